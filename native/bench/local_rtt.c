/* local_rtt: the round trip of a small message between two processes' sessions of one
 * daemon, over the direct path and through the daemon, in interleaved rounds:
 *   local_rtt SOCK ADDR ROUNDS N SIZE (1 B .. 8 MiB)
 * (ADDR: the daemon's HOST:PORT). Each round runs N round trips on the direct sessions,
 * then N on the relayed ones; both processes block in poll() while they wait. Prints one
 * line per round and min/median/max of the per-round mean round trip in microseconds. */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "smartt.h"

#define DIE(w, r) do { fprintf(stderr, "local_rtt: %s: %s\n", w, smartt_strerror(r)); exit(1); } while (0)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static smartt_session *open_bound(const char *sock, int direct, uint32_t ep)
{
    smartt_session *s;
    smartt_options o = {.direct = direct};
    int r = smartt_open(&s, sock, &o);
    if (!r)
        r = smartt_bind(s, ep, NULL, 10000);
    if (r)
        DIE("open", r);
    if (direct && !(smartt_caps(s) & SMARTT_CAP_DIRECT))
        DIE("the daemon offers no direct path", SMARTT_ENOTSUP);
    return s;
}

/* echo answers every message on both sessions until killed. */
static void echo(smartt_session *s[2])
{
    for (;;) {
        struct pollfd p[2];
        for (int i = 0; i < 2; i++)
            p[i] = (struct pollfd){smartt_poll_fd(s[i]), (short)smartt_poll_events(s[i]), 0};
        poll(p, 2, 1000);
        for (int i = 0; i < 2; i++) {
            smartt_event ev;
            int r = smartt_progress(s[i]);
            if (r < 0)
                DIE("echo progress", r);
            while (smartt_poll_completion(s[i], &ev) == 1) {
                if (ev.type != SMARTT_EV_RECV)
                    continue;
                while ((r = smartt_send_async(s[i], &ev.from, ev.data, (size_t)ev.size, NULL)) ==
                       SMARTT_EAGAIN)
                    smartt_progress(s[i]);
                if (r)
                    DIE("echo send", r);
                smartt_release(s[i], &ev);
            }
        }
    }
}

/* round runs n round trips of size bytes from s to `to`; mean microseconds. */
static double round_trip(smartt_session *s, const smartt_addr *to, int n, size_t size)
{
    static unsigned char buf[8 << 20];
    double t0 = now_us();
    for (int i = 0; i < n; i++) {
        int r;
        while ((r = smartt_send_async(s, to, buf, size, NULL)) == SMARTT_EAGAIN)
            smartt_progress(s);
        if (r)
            DIE("send", r);
        smartt_event ev;
        if ((r = smartt_recv(s, &ev, 10000)))
            DIE("recv", r);
        smartt_release(s, &ev);
        while (smartt_poll_outcome(s, &ev) == 1) /* Accepted, Sent: not kept */
            ;
    }
    return (now_us() - t0) / n;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void stats(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    printf("%-12s min %7.2f  median %7.2f  max %7.2f\n", what, v[0], v[n / 2], v[n - 1]);
}

int main(int argc, char **argv)
{
    if (argc != 6)
        return fprintf(stderr, "usage: local_rtt SOCK ADDR ROUNDS N SIZE\n"), 2;
    const char *sock = argv[1], *addr = argv[2];
    int rounds = atoi(argv[3]), n = atoi(argv[4]);
    size_t size = (size_t)atoi(argv[5]);
    if (rounds < 1 || rounds > 1000 || n < 1 || size < 1 || size > (8 << 20))
        return fprintf(stderr, "local_rtt: bad arguments\n"), 2;
    uint32_t base = 50000 + (uint32_t)(getpid() % 10000) * 4;
    pid_t pid = fork();
    if (pid == 0) {
        smartt_session *s[2] = {open_bound(sock, 1, base + 2), open_bound(sock, 0, base + 3)};
        echo(s);
    }
    smartt_session *d = open_bound(sock, 1, base), *r = open_bound(sock, 0, base + 1);
    smartt_addr td, tr;
    smartt_addr_parse(&td, addr, base + 2);
    smartt_addr_parse(&tr, addr, base + 3);
    usleep(200000); /* the child's endpoints are bound */
    round_trip(d, &td, 100, size); /* warm: the direct path is asked for */
    round_trip(r, &tr, 100, size);
    double *vd = calloc((size_t)rounds, sizeof *vd), *vr = calloc((size_t)rounds, sizeof *vr);
    double *q = calloc((size_t)rounds, sizeof *q);
    for (int i = 0; i < rounds; i++) {
        vd[i] = round_trip(d, &td, n, size);
        vr[i] = round_trip(r, &tr, n, size);
        q[i] = vr[i] / vd[i];
        printf("round %2d: direct %7.2f us  relayed %7.2f us  relayed/direct %5.2f\n", i + 1, vd[i],
               vr[i], q[i]);
    }
    smartt_direct_stats st;
    smartt_direct_stats_get(d, &st);
    printf("direct session: %llu messages over pairs, %llu received over pairs\n",
           (unsigned long long)st.sent, (unsigned long long)st.received);
    stats("direct us", vd, rounds);
    stats("relayed us", vr, rounds);
    stats("relay/direct", q, rounds);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    smartt_close(d);
    smartt_close(r);
    free(vd), free(vr), free(q);
    return 0;
}
