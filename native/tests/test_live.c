/* libsmartt against two real daemons: SMARTT_A_SOCK, SMARTT_B_SOCK (API sockets) and
 * SMARTT_A_ADDR, SMARTT_B_ADDR (their HOST:PORT), as python/tests/daemons.py sets them. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smartt.h"
#include "testutil.h"

#define TMO 20000

static const char *asock, *bsock, *aaddr, *baddr;

/* pair opens a session on each daemon; a binds ea (0: daemon-chosen), b binds eb. */
static void pair(smartt_session **a, smartt_session **b, uint32_t ea, uint32_t eb,
                 uint32_t *ga, uint32_t *gb)
{
    CHECK_EQ(smartt_open(a, asock, NULL), 0);
    CHECK_EQ(smartt_open(b, bsock, NULL), 0);
    CHECK_EQ(smartt_bind(*a, ea, ga, TMO), 0);
    CHECK_EQ(smartt_bind(*b, eb, gb, TMO), 0);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31 + seed + (i >> 12));
}

static int same(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 31 + seed + (i >> 12)))
            return 0;
    return 1;
}

TEST(version_and_caps)
{
    smartt_session *s;
    CHECK_EQ(smartt_open(&s, asock, NULL), 0);
    int v = smartt_version(s);
    char *body = NULL; /* the daemon's own word on what it speaks */
    CHECK_EQ(smartt_get(asock, "/v1/version", &body, 0), 200);
    CHECK_EQ(v, body && strstr(body, "smartt-msg/2") ? 2 : 1);
    free(body);
    unsigned c = smartt_caps(s);
    CHECK(c & SMARTT_CAP_SENDFD);
    CHECK(c & SMARTT_CAP_RING);
    CHECK(smartt_max_ring(s) > 0);
    if (v == 1)
        CHECK_EQ(smartt_cancel(s, 1), SMARTT_ENOTSUP);
    else
        CHECK(c & SMARTT_CAP_CANCEL);
    smartt_close(s);
    smartt_options o = {.max_version = 1};
    CHECK_EQ(smartt_open(&s, asock, &o), 0);
    CHECK_EQ(smartt_version(s), 1);
    CHECK_EQ(smartt_cancel(s, 1), SMARTT_ENOTSUP);
    CHECK(!(smartt_caps(s) & SMARTT_CAP_ACCEPTED));
    smartt_close(s);
}

TEST(small_both_ways)
{
    smartt_session *a, *b;
    uint32_t ea, eb;
    pair(&a, &b, 4242, 0, &ea, &eb);
    CHECK_EQ(ea, 4242u);
    CHECK(eb != 0);
    CHECK_EQ(smartt_endpoint(b), eb);
    smartt_addr to, back;
    CHECK_EQ(smartt_addr_parse(&to, aaddr, ea), 0);
    smartt_event ev;
    CHECK_EQ(smartt_send(b, &to, "hello", 5, &ev, TMO), 0);
    CHECK_EQ(ev.type, SMARTT_EV_SENT);
    smartt_event m;
    CHECK_EQ(smartt_recv(a, &m, TMO), 0);
    CHECK_EQ(m.type, SMARTT_EV_RECV);
    CHECK_EQ(m.size, 5u);
    CHECK(memcmp(m.data, "hello", 5) == 0);
    CHECK_EQ(m.from.endpoint, eb);
    CHECK_EQ(m.endpoint, ea);
    char f[80], want[80];
    CHECK_EQ(smartt_addr_format(&m.from, f, sizeof f), 0);
    snprintf(want, sizeof want, "%s/%u", baddr, eb);
    CHECK(strcmp(f, want) == 0);
    back = m.from;
    CHECK_EQ(smartt_release(a, &m), 0);
    CHECK_EQ(smartt_send(a, &back, "world!", 6, NULL, TMO), 0);
    CHECK_EQ(smartt_recv(b, &m, TMO), 0);
    CHECK(m.size == 6 && memcmp(m.data, "world!", 6) == 0);
    smartt_release(b, &m);
    CHECK_EQ(smartt_recv(b, &m, 50), SMARTT_ETIMEDOUT);
    smartt_close(a);
    smartt_close(b);
}

/* smartt_poll_outcome never takes a received message. */
TEST(poll_outcome_leaves_messages)
{
    smartt_session *a, *b;
    uint32_t ea, eb, tag;
    pair(&a, &b, 0, 0, &ea, &eb);
    smartt_addr ta, tb;
    smartt_addr_parse(&ta, aaddr, ea);
    smartt_addr_parse(&tb, baddr, eb);
    CHECK_EQ(smartt_send(b, &ta, "y", 1, NULL, TMO), 0);
    CHECK_EQ(smartt_send_async(a, &tb, "x", 1, &tag), 0);
    smartt_event ev;
    int outcomes = 0;
    for (int i = 0; i < 2000 && !outcomes; i++) {
        smartt_progress(a);
        while (smartt_poll_outcome(a, &ev) == 1) {
            CHECK(ev.type != SMARTT_EV_RECV);
            outcomes += ev.type == SMARTT_EV_SENT;
        }
        if (!outcomes)
            usleep(1000);
    }
    CHECK_EQ(outcomes, 1);
    CHECK_EQ(smartt_recv(a, &ev, TMO), 0);
    CHECK(ev.size == 1 && ev.data[0] == 'y');
    smartt_release(a, &ev);
    CHECK_EQ(smartt_recv(b, &ev, TMO), 0);
    smartt_release(b, &ev);
    smartt_close(a);
    smartt_close(b);
}

static long long memfd_msgs(void)
{
    char *body = NULL;
    long long n = -1;
    if (smartt_get(asock, "/v1/counters", &body, 0) == 200 && strstr(body, "\"msgs_memfd\":"))
        n = atoll(strstr(body, "\"msgs_memfd\":") + 13);
    free(body);
    return n;
}

/* Blocking sends: 1 and 3 MiB streamed, 4 and 9 MiB through the session's memfd (the
 * daemon's msgs_memfd counts them), and 9 MiB streamed with the memfd path off. */
TEST(large_copy)
{
    smartt_session *a, *b;
    uint32_t ea, eb;
    pair(&a, &b, 0, 0, &ea, &eb);
    smartt_addr to;
    smartt_addr_parse(&to, baddr, eb);
    long long fd0 = memfd_msgs();
    CHECK(fd0 >= 0);
    size_t sizes[] = {1u << 20, 3u * (1u << 20) + 7, 4u << 20, 9u * (1u << 20) + 3, 9u << 20};
    for (int i = 0; i < 5; i++) {
        if (i == 4) { /* the memfd path off */
            smartt_close(a);
            smartt_options o = {.sendfd_threshold = -1};
            CHECK_EQ(smartt_open(&a, asock, &o), 0);
            CHECK_EQ(smartt_bind(a, 0, NULL, TMO), 0);
        }
        unsigned char *buf = malloc(sizes[i]);
        fill(buf, sizes[i], (unsigned)i);
        CHECK_EQ(smartt_send(a, &to, buf, sizes[i], NULL, TMO), 0);
        memset(buf, 0, sizes[i]);
        free(buf);
        smartt_event m;
        CHECK_EQ(smartt_recv(b, &m, TMO), 0);
        CHECK_EQ(m.size, sizes[i]);
        CHECK(!m.in_ring);
        CHECK(same(m.data, m.size, (unsigned)i));
        smartt_release(b, &m);
        CHECK_EQ(memfd_msgs() - fd0, i < 2 ? 0 : i < 4 ? i - 1 : 2);
    }
    smartt_close(a);
    smartt_close(b);
}

/* nonblocking: 200 async sends of 64 B and 4 of 1 MiB driven by poll + progress. */
TEST(nonblocking_progress)
{
    smartt_session *a, *b;
    uint32_t ea, eb;
    pair(&a, &b, 0, 0, &ea, &eb);
    smartt_addr to;
    smartt_addr_parse(&to, baddr, eb);
    enum { N = 204 };
    static unsigned char big[1 << 20];
    uint32_t tags[N];
    for (int i = 0; i < N; i++) {
        unsigned char small[64];
        memset(small, i, sizeof small);
        int isbig = i % 50 == 49;
        if (isbig)
            fill(big, sizeof big, (unsigned)i);
        CHECK_EQ(smartt_send_async(a, &to, isbig ? big : small, isbig ? sizeof big : 64, &tags[i]), 0);
    }
    int sent = 0, got = 0, accepted = 0;
    long deadline = 30000;
    while ((sent < N || got < N) && deadline > 0) {
        struct pollfd p[2] = {{smartt_fd(a), POLLIN | (smartt_want_write(a) ? POLLOUT : 0), 0},
                              {smartt_fd(b), POLLIN, 0}};
        poll(p, 2, 10);
        deadline -= 10;
        CHECK(smartt_progress(a) >= 0);
        CHECK(smartt_progress(b) >= 0);
        smartt_event ev;
        while (smartt_poll_completion(a, &ev) == 1) {
            if (ev.type == SMARTT_EV_ACCEPTED)
                accepted++;
            CHECK(ev.type == SMARTT_EV_SENT || ev.type == SMARTT_EV_ACCEPTED);
            if (ev.type == SMARTT_EV_SENT)
                sent++;
        }
        while (smartt_poll_completion(b, &ev) == 1) {
            CHECK_EQ(ev.type, SMARTT_EV_RECV);
            int isbig = got % 50 == 49;
            CHECK_EQ(ev.size, isbig ? sizeof big : 64u);
            CHECK(isbig ? same(ev.data, ev.size, (unsigned)got) : ev.data[63] == (unsigned char)got);
            got++;
            smartt_release(b, &ev);
        }
    }
    CHECK_EQ(sent, N);
    CHECK_EQ(got, N);
    if (smartt_version(a) == 2)
        CHECK_EQ(accepted, N);
    smartt_close(a);
    smartt_close(b);
}

TEST(memfd_zero_copy)
{
    smartt_session *a, *b;
    uint32_t ea, eb;
    pair(&a, &b, 0, 0, &ea, &eb);
    smartt_addr to;
    smartt_addr_parse(&to, baddr, eb);
    smartt_memfd m;
    size_t n = 8u << 20;
    CHECK_EQ(smartt_memfd_open(&m, n), 0);
    for (int round = 0; round < 2; round++) { /* the memfd is reused after its outcome */
        fill(m.data, n, (unsigned)round + 7);
        uint32_t tag;
        CHECK_EQ(smartt_send_memfd(a, &to, &m, n - (size_t)round, &tag), 0);
        smartt_event ev;
        CHECK_EQ(smartt_wait(a, tag, 1u << SMARTT_EV_SENT | 1u << SMARTT_EV_ERROR | 1u << SMARTT_EV_FAILED, &ev, TMO), 0);
        CHECK_EQ(ev.type, SMARTT_EV_SENT);
        CHECK_EQ(smartt_recv(b, &ev, TMO), 0);
        CHECK_EQ(ev.size, n - (size_t)round);
        CHECK(same(ev.data, ev.size, (unsigned)round + 7));
        smartt_release(b, &ev);
    }
    smartt_memfd_close(&m);
    smartt_close(a);
    smartt_close(b);
}

/* ring: 40 x 1 MiB through an 8 MiB ring needs the releases to work. */
TEST(ring_receive)
{
    smartt_session *a, *b;
    uint32_t ea, eb;
    pair(&a, &b, 0, 0, &ea, &eb);
    CHECK_EQ(smartt_ring_enable(b, 8u << 20, 0, TMO), 0);
    CHECK_EQ(smartt_ring_enable(b, 8u << 20, 0, TMO), SMARTT_EINVAL); /* one ring */
    smartt_addr to;
    smartt_addr_parse(&to, baddr, eb);
    static unsigned char buf[1 << 20];
    int inring = 0;
    for (int i = 0; i < 40; i++) {
        fill(buf, sizeof buf, (unsigned)i);
        uint32_t tag;
        CHECK_EQ(smartt_send_async(a, &to, buf, sizeof buf, &tag), 0);
        smartt_event ev;
        CHECK_EQ(smartt_recv(b, &ev, TMO), 0);
        CHECK_EQ(ev.size, sizeof buf);
        CHECK(same(ev.data, ev.size, (unsigned)i));
        inring += ev.in_ring;
        CHECK_EQ(smartt_release(b, &ev), 0);
        CHECK_EQ(smartt_wait(a, tag, 1u << SMARTT_EV_SENT, &ev, TMO), 0);
    }
    CHECK(inring >= 30);
    smartt_close(a);
    smartt_close(b);
}

static long long ring_msgs(void)
{
    char *body = NULL;
    long long n = -1;
    if (smartt_get(bsock, "/v1/counters", &body, 0) == 200 && strstr(body, "\"ring_msgs\":"))
        n = atoll(strstr(body, "\"ring_msgs\":") + 12);
    free(body);
    return n;
}

/* The automatic ring: the first 2 MiB message over the socket sets up an 8 MiB ring by
 * itself; later large ones come through it (the daemon's ring_msgs) and are copied out
 * (in_ring 0, the caller's own buffer), small ones over the socket; all arrive whole
 * and in order. auto_ring -1 keeps the session on the socket. */
TEST(auto_ring)
{
    static unsigned char buf[2 << 20];
    for (int off = 0; off < 2; off++) {
        smartt_session *a, *b;
        smartt_options o = {.auto_ring = off ? -1 : 0};
        CHECK_EQ(smartt_open(&a, asock, NULL), 0);
        CHECK_EQ(smartt_open(&b, bsock, &o), 0);
        uint32_t eb;
        CHECK_EQ(smartt_bind(a, 0, NULL, TMO), 0);
        CHECK_EQ(smartt_bind(b, 0, &eb, TMO), 0);
        smartt_addr to;
        smartt_addr_parse(&to, baddr, eb);
        long long r0 = ring_msgs();
        for (int i = 0; i < 12; i++) {
            size_t n = i % 3 ? sizeof buf : 100;
            fill(buf, n, (unsigned)i);
            uint32_t tag;
            CHECK_EQ(smartt_send_async(a, &to, buf, n, &tag), 0);
            smartt_event ev;
            CHECK_EQ(smartt_recv(b, &ev, TMO), 0);
            CHECK_EQ(ev.size, n);
            CHECK(!ev.in_ring);
            CHECK(same(ev.data, ev.size, (unsigned)i));
            CHECK_EQ(smartt_release(b, &ev), 0);
            CHECK_EQ(smartt_wait(a, tag, 1u << SMARTT_EV_SENT, &ev, TMO), 0);
        }
        long long rings = ring_msgs() - r0;
        if (off) {
            CHECK_EQ(smartt_ring_auto(b), 0);
            CHECK_EQ(rings, 0);
        } else {
            CHECK_EQ(smartt_ring_auto(b), 8u << 20);
            CHECK(rings >= 6);
        }
        smartt_close(a);
        smartt_close(b);
    }
}

TEST(daemon_refusals)
{
    smartt_session *a, *b;
    CHECK_EQ(smartt_open(&a, asock, NULL), 0);
    smartt_addr to;
    smartt_addr_parse(&to, baddr, 1);
    smartt_event ev;
    CHECK_EQ(smartt_send(a, &to, "x", 1, &ev, TMO), SMARTT_EDAEMON(2)); /* not bound */
    CHECK_EQ(ev.type, SMARTT_EV_ERROR);
    CHECK(strlen(ev.text) > 0);
    uint32_t e;
    CHECK_EQ(smartt_bind(a, 0, &e, TMO), 0);
    CHECK_EQ(smartt_open(&b, asock, NULL), 0);
    CHECK_EQ(smartt_bind(b, e, NULL, TMO), SMARTT_EDAEMON(3)); /* bound elsewhere */
    smartt_addr bad;
    smartt_addr_parse(&bad, baddr, 0);
    CHECK_EQ(smartt_send(a, &bad, "x", 1, NULL, TMO), SMARTT_EDAEMON(10)); /* endpoint 0 */
    CHECK_EQ(smartt_send(a, &to, "x", 1, NULL, TMO), 0); /* the session goes on */
    CHECK(strstr(smartt_strerror(SMARTT_EDAEMON(3)), "bound") != NULL);
    smartt_close(a);
    smartt_close(b);
}

TEST(control_gets)
{
    smartt_session *a;
    CHECK_EQ(smartt_open(&a, asock, NULL), 0);
    char *body = NULL;
    CHECK_EQ(smartt_status_json(a, &body), 200);
    CHECK(body && strstr(body, "\"pid\"") != NULL);
    free(body);
    CHECK_EQ(smartt_counters_json(a, &body), 200);
    CHECK(body && strstr(body, "\"api\"") != NULL);
    free(body);
    CHECK_EQ(smartt_get(asock, "/v1/nonesuch", &body, 0), 404);
    free(body);
    smartt_close(a);
    setenv("SMARTT_SOCKET", asock, 1);
    CHECK(strcmp(smartt_default_socket(), asock) == 0);
    CHECK_EQ(smartt_open(&a, NULL, NULL), 0); /* $SMARTT_SOCKET */
    smartt_close(a);
    setenv("SMARTT_SOCKET", "", 1);
    CHECK(strcmp(smartt_default_socket(), SMARTT_DEFAULT_SOCKET) == 0);
    unsetenv("SMARTT_SOCKET");
    CHECK_EQ(smartt_open(&a, "/nonexistent/smarttd.sock", NULL), SMARTT_ECONNECT);
    char longp[200];
    memset(longp, 'x', sizeof longp - 1);
    longp[0] = '/', longp[sizeof longp - 1] = 0;
    CHECK_EQ(smartt_open(&a, longp, NULL), SMARTT_EINVAL); /* beyond sun_path */
}

/* cancel: a v2 daemon answers every Cancel with a CancelResult; v1 says not supported. */
TEST(cancel)
{
    smartt_session *a, *b;
    uint32_t ea, eb;
    pair(&a, &b, 0, 0, &ea, &eb);
    smartt_addr to;
    smartt_addr_parse(&to, baddr, eb);
    if (smartt_version(a) < 2) {
        CHECK_EQ(smartt_cancel(a, 5), SMARTT_ENOTSUP);
    } else {
        static unsigned char big[4 << 20];
        uint32_t tag;
        CHECK_EQ(smartt_send_async(a, &to, big, sizeof big, &tag), 0);
        CHECK_EQ(smartt_cancel(a, tag), 0);
        smartt_event ev;
        CHECK_EQ(smartt_wait(a, tag, 1u << SMARTT_EV_CANCEL_RESULT, &ev, TMO), 0);
        CHECK(ev.cancel <= 2);
        unsigned end = 1u << SMARTT_EV_SENT | 1u << SMARTT_EV_FAILED;
        if (ev.cancel != SMARTT_CANCEL_UNKNOWN)
            CHECK_EQ(smartt_wait(a, tag, end, &ev, TMO), 0);
        CHECK_EQ(smartt_cancel(a, 999999), 0);
        CHECK_EQ(smartt_wait(a, 999999, 1u << SMARTT_EV_CANCEL_RESULT, &ev, TMO), 0);
        CHECK_EQ(ev.cancel, (uint32_t)SMARTT_CANCEL_UNKNOWN);
    }
    smartt_close(a);
    smartt_close(b);
}

int main(void)
{
    asock = getenv("SMARTT_A_SOCK"), bsock = getenv("SMARTT_B_SOCK");
    aaddr = getenv("SMARTT_A_ADDR"), baddr = getenv("SMARTT_B_ADDR");
    if (!asock || !bsock || !aaddr || !baddr) {
        fprintf(stderr, "run under python/tests/daemons.py (SMARTT_A_SOCK ... unset)\n");
        return 2;
    }
    RUN(version_and_caps);
    RUN(small_both_ways);
    RUN(poll_outcome_leaves_messages);
    RUN(large_copy);
    RUN(nonblocking_progress);
    RUN(memfd_zero_copy);
    RUN(ring_receive);
    RUN(auto_ring);
    RUN(daemon_refusals);
    RUN(control_gets);
    RUN(cancel);
    return SUMMARY("libsmartt-live");
}
