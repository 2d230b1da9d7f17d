/* One benchmark round of libsmartt, as scripts/bench-clients runs it:
 *   bench rtt SOCK_A SOCK_B ADDR_B N    mean 64 B round trip in microseconds over N
 *   bench bw  SOCK_A SOCK_B ADDR_B N    goodput of N 1 MiB messages in MB/s (depth 8;
 *                                       the receiver reads them from a ring of
 *                                       $BENCH_RING MiB if set, else the socket)
 * B's session runs in a thread of its own (echo, or receive and release). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smartt.h"

#define DIE(r) do { fprintf(stderr, "bench: line %d: %s\n", __LINE__, smartt_strerror(r)); exit(1); } while (0)

static smartt_session *b;
static int mode_bw, n;
static double t_last;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *peer(void *arg)
{
    (void)arg;
    for (int i = 0; i < n; i++) {
        smartt_event m;
        int r = smartt_recv(b, &m, 30000);
        if (r) {
            fprintf(stderr, "bench: received %d of %d\n", i, n);
            DIE(r);
        }
        if (!mode_bw && (r = smartt_send_async(b, &m.from, m.data, (size_t)m.size, NULL)))
            DIE(r);
        smartt_release(b, &m);
        smartt_event e;
        while (smartt_poll_outcome(b, &e) == 1) /* echo outcomes: not waited for */
            ;
    }
    t_last = now();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6)
        return fprintf(stderr, "usage: bench rtt|bw SOCK_A SOCK_B ADDR_B N\n"), 2;
    mode_bw = strcmp(argv[1], "bw") == 0;
    n = atoi(argv[5]);
    smartt_session *a;
    uint32_t eb;
    smartt_addr to;
    int r = smartt_open(&a, argv[2], NULL);
    if (!r) r = smartt_open(&b, argv[3], NULL);
    if (!r) r = smartt_bind(a, 0, NULL, 5000);
    if (!r) r = smartt_bind(b, 0, &eb, 5000);
    if (!r && mode_bw && getenv("BENCH_RING") && *getenv("BENCH_RING")) r = smartt_ring_enable(b, (uint64_t)atoi(getenv("BENCH_RING")) << 20, 65536, 5000);
    if (!r) r = smartt_addr_parse(&to, argv[4], eb);
    if (r)
        DIE(r);
    size_t size = mode_bw ? 1u << 20 : 64;
    unsigned char *buf = calloc(1, size);
    pthread_t th;
    pthread_create(&th, NULL, peer, NULL);
    double t0 = now();
    uint32_t tags[8];
    for (int i = 0; i < n; i++) {
        smartt_event e;
        if (mode_bw && i >= 8 && (r = smartt_wait(a, tags[i % 8], 1u << SMARTT_EV_SENT, &e, 30000)))
            DIE(r);
        if ((r = smartt_send_async(a, &to, buf, size, &tags[i % 8])))
            DIE(r);
        if (!mode_bw) {
            if ((r = smartt_recv(a, &e, 30000)))
                DIE(r);
            smartt_release(a, &e);
            while (smartt_poll_outcome(a, &e) == 1)
                ;
        }
    }
    for (int i = mode_bw ? (n > 8 ? n - 8 : 0) : n; i < n; i++) { /* drives the last writes */
        smartt_event e;
        if ((r = smartt_wait(a, tags[i % 8], 1u << SMARTT_EV_SENT, &e, 30000))) {
            fprintf(stderr, "bench: waiting for the Sent of message %d, queued %d\n", i, smartt_want_write(a));
            DIE(r);
        }
    }
    pthread_join(th, NULL);
    if (mode_bw)
        printf("%.1f\n", (double)n * (double)size / (t_last - t0) / 1e6);
    else
        printf("%.1f\n", (now() - t0) / n * 1e6);
    smartt_close(a);
    smartt_close(b);
    free(buf);
    return 0;
}
