/* hop_rtt: the cost of one hop between two processes on this machine, the floor under any
 * daemon on a message's path: a 100-byte ping-pong over a loopback UDP socket and over a
 * Unix stream socket pair, each with the receiver sleeping in its blocking call (a woken
 * process per hop) or spinning on non-blocking calls (no wake-up), in interleaved rounds:
 *   hop_rtt ROUNDS N
 * Prints, per kind, min/median/max over the rounds of the one-way time (half the mean
 * round trip) in microseconds: "hop_rtt: KIND MIN MED MAX". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 100
#define MAX_ROUNDS 100

enum { UDP, UNIX, KINDS };
static const char *kind_name[KINDS] = {"udp", "unix"};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* xfer sends or receives one message, spinning on EAGAIN when spin is set. */
static void xfer(int fd, char *b, int out, int spin)
{
    for (;;) {
        ssize_t n = out ? send(fd, b, MSG, spin ? MSG_DONTWAIT : 0) : recv(fd, b, MSG, spin ? MSG_DONTWAIT : 0);
        if (n == MSG)
            return;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n == 0)
            exit(0);
        die(out ? "send" : "recv");
    }
}

/* pair gives two connected sockets of kind k. */
static void pair(int k, int fd[2])
{
    if (k == UNIX) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fd))
            die("socketpair");
        return;
    }
    struct sockaddr_in a[2];
    for (int i = 0; i < 2; i++) {
        fd[i] = socket(AF_INET, SOCK_DGRAM, 0);
        memset(&a[i], 0, sizeof a[i]);
        a[i].sin_family = AF_INET;
        a[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t l = sizeof a[i];
        if (fd[i] < 0 || bind(fd[i], (struct sockaddr *)&a[i], l) || getsockname(fd[i], (struct sockaddr *)&a[i], &l))
            die("udp socket");
    }
    if (connect(fd[0], (struct sockaddr *)&a[1], sizeof a[1]) || connect(fd[1], (struct sockaddr *)&a[0], sizeof a[0]))
        die("connect");
}

/* one_way runs n round trips of kind k and returns half the mean round trip in us. */
static double one_way(int k, int spin, int n)
{
    int fd[2];
    char b[MSG] = {0};
    pair(k, fd);
    pid_t p = fork();
    if (p < 0)
        die("fork");
    if (p == 0) {
        close(fd[0]);
        for (int i = 0; i < n; i++) {
            xfer(fd[1], b, 0, spin);
            xfer(fd[1], b, 1, spin);
        }
        _exit(0);
    }
    close(fd[1]);
    xfer(fd[0], b, 1, spin); /* one untimed round trip: the child is running */
    xfer(fd[0], b, 0, spin);
    double t = now_us();
    for (int i = 1; i < n; i++) {
        xfer(fd[0], b, 1, spin);
        xfer(fd[0], b, 0, spin);
    }
    t = now_us() - t;
    close(fd[0]);
    waitpid(p, NULL, 0);
    return t / (n - 1) / 2;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 0, n = argc > 2 ? atoi(argv[2]) : 0;
    if (argc != 3 || rounds < 1 || rounds > MAX_ROUNDS || n < 2 || n > 10000000) {
        fprintf(stderr, "usage: hop_rtt ROUNDS (1..%d) N (2..10000000)\n", MAX_ROUNDS);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    static double us[KINDS][2][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < KINDS; k++)
            for (int spin = 0; spin < 2; spin++)
                us[k][spin][r] = one_way(k, spin, n);
    for (int k = 0; k < KINDS; k++)
        for (int spin = 0; spin < 2; spin++) {
            double *v = us[k][spin];
            qsort(v, (size_t)rounds, sizeof *v, cmp);
            printf("hop_rtt: %s-%s %.1f %.1f %.1f\n", kind_name[k], spin ? "spin" : "sleep", v[0], v[rounds / 2],
                   v[rounds - 1]);
        }
    return 0;
}
