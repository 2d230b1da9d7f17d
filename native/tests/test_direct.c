/* libsmartt's direct path (docs/api.md "Direct path"): against a fake daemon in a child
 * process that hands out socket pairs and writes hostile bytes on them, and, when run
 * under python/tests/daemons.py (SMARTT_A_SOCK, SMARTT_A_ADDR), between sessions of one
 * real daemon: grants both ways, cut-over order, back-pressure, a peer killed in the
 * middle of a message. */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "smartt.h"
#include "testutil.h"

#define TMO 20000

static const char *asock, *aaddr;
static char path[108];

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}
static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* ---- the fake daemon ---- */

/* send_frame writes one daemon frame to c, with descriptor fd (>= 0) on its first byte. */
static void send_frame(int c, int type, uint32_t tag, const unsigned char *p, uint32_t n, int fd)
{
    unsigned char b[12 + 64];
    b[0] = (unsigned char)type, b[1] = b[2] = b[3] = 0;
    put32(b + 4, tag), put32(b + 8, n);
    memcpy(b + 12, p, n);
    struct iovec iov = {b, 12 + n};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } cb;
    if (fd >= 0) {
        memset(&cb, 0, sizeof cb);
        m.msg_control = cb.buf, m.msg_controllen = sizeof cb.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    if (sendmsg(c, &m, MSG_NOSIGNAL) < 0)
        _exit(3);
}

/* peer_frame sends a DirectPeer for pair id from endpoint 7 of 127.0.0.9:99 to our 5. */
static void peer_frame(int c, uint64_t id, int fd)
{
    unsigned char p[34] = {0};
    put64(p, id);
    p[8 + 10] = p[8 + 11] = 0xff, p[8 + 12] = 127, p[8 + 15] = 9;
    p[24] = 0, p[25] = 99;
    put32(p + 26, 7), put32(p + 30, 5);
    send_frame(c, 0x8b, 0, p, sizeof p, fd);
}

/* msg writes a pair message: header (type, size) and body. */
static void msg(int fd, int type, uint64_t size, const char *body)
{
    unsigned char h[16] = {0};
    h[0] = (unsigned char)type;
    put64(h + 8, size);
    if (write(fd, h, 16) != 16 || (body && write(fd, body, strlen(body)) != (ssize_t)strlen(body)))
        _exit(4);
}

/* fake runs script(c) as the daemon of one session in a child process. */
static pid_t fake(void (*script)(int))
{
    snprintf(path, sizeof path, "/tmp/smartt-direct-%d.sock", (int)getpid());
    unlink(path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, path);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int c = accept(l, NULL, NULL);
        char req[1024];
        ssize_t n = read(c, req, sizeof req - 1);
        const char *up = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/2\r\n"
                         "Smartt-Version: 2\r\nSmartt-Direct: 1\r\nConnection: Upgrade\r\n\r\n";
        if (n <= 0 || !strstr(req, "Smartt-Direct: 1") || write(c, up, strlen(up)) < 0)
            _exit(2);
        unsigned char bind[16], ep[4] = {0, 0, 0, 5}; /* the client binds first */
        for (size_t got = 0; got < sizeof bind; got += (size_t)n)
            if ((n = read(c, bind + got, sizeof bind - got)) <= 0)
                _exit(2);
        send_frame(c, 0x81, (uint32_t)bind[4] << 24 | bind[5] << 16 | bind[6] << 8 | bind[7], ep, 4, -1);
        script(c);
        char b[4096];
        while (read(c, b, sizeof b) > 0) /* until the session closes */
            ;
        _exit(0);
    }
    close(l);
    return pid;
}

static void reap(pid_t pid)
{
    int st;
    waitpid(pid, &st, 0);
    unlink(path);
}

/* open_direct opens a session with the direct path on the fake. */
static smartt_session *open_direct(void)
{
    smartt_session *s = NULL;
    smartt_options o = {.direct = 1};
    CHECK_EQ(smartt_open(&s, path, &o), 0);
    if (s)
        CHECK(smartt_caps(s) & SMARTT_CAP_DIRECT);
    if (s)
        CHECK_EQ(smartt_bind(s, 5, NULL, 5000), 0);
    return s;
}

static void script_hostile(int c)
{
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    peer_frame(c, 1, sv[0]);
    msg(sv[1], 1, 3, "ok1");
    msg(sv[1], 2, 3, "bad"); /* a wrong type ends the pair */
    msg(sv[1], 1, 3, "no1"); /* never read */
    int sw[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sw);
    peer_frame(c, 2, sw[0]);
    msg(sw[1], 1, (1ull << 30) + 1, NULL); /* beyond MAX_RECV_SIZE: ends the pair */
    int sx[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sx);
    peer_frame(c, 3, sx[0]);
    unsigned char h[16] = {1, 0, 0, 1}; /* a nonzero reserved byte */
    put64(h + 8, 3);
    if (write(sx[1], h, 16) < 0)
        _exit(4);
    int sy[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sy);
    peer_frame(c, 4, sy[0]);
    msg(sy[1], 1, 5, "ok"); /* 2 of 5 bytes, then the writer goes: cut */
    close(sy[1]);
    int sz[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sz);
    peer_frame(c, 5, sz[0]);
    msg(sz[1], 1, 3, "ok2");
    peer_frame(c, 1, -1); /* a pair ended here: ignored */
}

/* Hostile bytes on pairs end those pairs, counted, never the session; whole messages
 * before them are delivered, labelled with the sender DirectPeer named. */
TEST(fake_hostile_pairs)
{
    pid_t pid = fake(script_hostile);
    smartt_session *s = open_direct();
    if (!s) {
        reap(pid);
        return;
    }
    const char *want[] = {"ok1", "ok2"};
    for (int i = 0; i < 2; i++) {
        smartt_event ev;
        CHECK_EQ(smartt_recv(s, &ev, 5000), 0);
        if (ev.type != SMARTT_EV_RECV)
            break;
        CHECK_EQ(ev.size, 3);
        CHECK(memcmp(ev.data, want[i], 3) == 0);
        CHECK_EQ(ev.from.endpoint, 7);
        CHECK_EQ(ev.from.port, 99);
        CHECK_EQ(ev.from.addr[15], 9);
        CHECK_EQ(ev.endpoint, 5);
        smartt_release(s, &ev);
    }
    smartt_event ev;
    CHECK_EQ(smartt_recv(s, &ev, 300), SMARTT_ETIMEDOUT); /* nothing else, nothing twice */
    smartt_direct_stats st;
    smartt_direct_stats_get(s, &st);
    CHECK_EQ(st.pairs, 5);
    CHECK_EQ(st.pairs_open, 1);
    CHECK_EQ(st.bad, 3);
    CHECK_EQ(st.cut, 1);
    CHECK_EQ(st.received, 2);
    CHECK_EQ(smartt_progress(s) >= 0, 1);
    smartt_close(s);
    reap(pid);
}

static void script_no_fd(int c) { peer_frame(c, 9, -1); }
static void script_bad_len(int c)
{
    unsigned char p[8] = {0};
    send_frame(c, 0x8a, 1, p, 8, -1); /* DirectOK is 9 bytes */
}
static void script_bad_status(int c)
{
    unsigned char p[9] = {3};
    send_frame(c, 0x8a, 1, p, 9, -1);
}

/* Protocol errors of the daemon's direct frames break the session (SMARTT_EPROTO). */
TEST(fake_frame_errors)
{
    void (*scripts[])(int) = {script_no_fd, script_bad_len, script_bad_status};
    for (int i = 0; i < 3; i++) {
        pid_t pid = fake(scripts[i]);
        smartt_session *s = open_direct();
        smartt_event ev;
        if (s)
            CHECK_EQ(smartt_recv(s, &ev, 5000), SMARTT_EPROTO);
        smartt_close(s);
        reap(pid);
    }
}

static void script_many(int c)
{
    for (uint64_t id = 1; id <= 1025; id++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
            _exit(5);
        peer_frame(c, id, sv[0]);
        close(sv[0]); /* sv[1] stays open: the pair lives */
    }
}

/* A session takes part in at most 1,024 pairs (the daemon's bound): at the bound the
 * pairs work, one more is a protocol error, and no descriptor leaks either way. */
TEST(fake_pairs_bound)
{
    pid_t pid = fake(script_many);
    smartt_session *s = open_direct();
    int r = 0;
    smartt_event ev;
    while (s && (r = smartt_recv(s, &ev, 5000)) == 0)
        smartt_release(s, &ev);
    CHECK_EQ(r, SMARTT_EPROTO);
    smartt_direct_stats st = {0};
    smartt_direct_stats_get(s, &st);
    CHECK_EQ(st.pairs, 1024);
    smartt_close(s);
    reap(pid);
}

static void script_budget(int c)
{
    int sv[2], sw[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || socketpair(AF_UNIX, SOCK_STREAM, 0, sw))
        _exit(5);
    peer_frame(c, 1, sv[0]);
    peer_frame(c, 2, sw[0]);
    static char body[(256 << 10) + 1];
    for (int i = 0; i < 12; i++) { /* 3 MiB on pair 1: beyond the 1 MiB budget */
        memset(body, 'a' + i, sizeof body - 1);
        msg(sv[1], 1, sizeof body - 1, body);
    }
    msg(sw[1], 1, 3, "two");
    static char big[(3 << 20) + 1]; /* one message over the budget on its own */
    memset(big, 'z', sizeof big - 1);
    msg(sv[1], 1, sizeof big - 1, big);
    close(sv[1]);
    close(sw[1]);
}

/* The receive budget (direct_recv_max 1 MiB): while the application takes nothing, what
 * is held stays at the budget however much the pairs bring; the pairs' next messages
 * wait in them (counted), and once messages are taken every one arrives whole, in order
 * per pair, once, a 3 MiB one too (alone beyond the budget). */
TEST(fake_recv_budget)
{
    pid_t pid = fake(script_budget);
    smartt_session *s = NULL;
    smartt_options o = {.direct = 1, .direct_recv_max = 1 << 20};
    CHECK_EQ(smartt_open(&s, path, &o), 0);
    if (!s || smartt_bind(s, 5, NULL, 5000)) {
        reap(pid);
        return;
    }
    smartt_direct_stats st = {0};
    for (int i = 0; i < 200; i++) { /* read, take nothing */
        CHECK(smartt_progress(s) >= 0);
        smartt_direct_stats_get(s, &st);
        CHECK(st.held <= 1 << 20);
        usleep(1000);
    }
    CHECK_EQ(st.held, 1 << 20);
    CHECK(st.waits >= 1);
    int next = 0, two = 0;
    smartt_event ev; /* taking one makes room: the waiting pair is read again at once, */
    CHECK_EQ(smartt_poll_completion(s, &ev), 1); /* so a caller that sleeps now wakes */
    CHECK(ev.type == SMARTT_EV_RECV && ev.size == 256u << 10 && ev.data[0] == 'a');
    smartt_release(s, &ev);
    next++;
    struct pollfd pf = {.fd = smartt_poll_fd(s), .events = POLLIN};
    CHECK_EQ(poll(&pf, 1, 2000), 1);
    while (smartt_recv(s, &ev, 2000) == 0) {
        CHECK_EQ(ev.type, SMARTT_EV_RECV);
        if (ev.from.endpoint == 7 && ev.size == 3) {
            two += memcmp(ev.data, "two", 3) == 0;
        } else {
            int whole = 1;
            char want = next < 12 ? (char)('a' + next) : 'z';
            for (uint64_t i = 0; i < ev.size; i++)
                whole &= ev.data[i] == want;
            CHECK(whole);
            CHECK_EQ(ev.size, next < 12 ? 256u << 10 : 3u << 20);
            next++;
        }
        smartt_release(s, &ev);
        smartt_direct_stats_get(s, &st);
        CHECK(st.held <= 3u << 20);
    }
    CHECK_EQ(next, 13);
    CHECK_EQ(two, 1);
    smartt_direct_stats_get(s, &st);
    CHECK_EQ(st.held, 0);
    CHECK_EQ(st.received, 14);
    CHECK_EQ(st.cut, 0);
    smartt_close(s);
    reap(pid);
}

/* A placer for the tests: takes messages into buf from byte 8 on, keeping their head. */
struct tplace {
    unsigned char *buf;
    size_t cap;
    unsigned char head[8];
    int placed, cut;
    void *cut_buf;
};
static void *tplace_cb(void *ctx, const smartt_addr *from, uint32_t endpoint, uint64_t size,
                       const unsigned char *head, size_t nhead, size_t *skip)
{
    struct tplace *t = ctx;
    (void)from, (void)endpoint;
    if (nhead < 8 || size - 8 > t->cap)
        return NULL;
    memcpy(t->head, head, 8);
    t->placed++;
    *skip = 8;
    return t->buf;
}
static void tcut_cb(void *ctx, void *buf)
{
    struct tplace *t = ctx;
    t->cut++, t->cut_buf = buf;
}

static void script_cut(int c)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        _exit(5);
    peer_frame(c, 1, sv[0]);
    static char body[101];
    memset(body, 'q', 100);
    msg(sv[1], 1, 1 << 20, body); /* 100 of 1 MiB, then the writer goes */
    close(sv[1]);
}

/* A placed message whose pair ends in its middle: the placer gets its buffer back (cut),
 * the message is counted cut and never delivered. */
TEST(fake_place_cut)
{
    pid_t pid = fake(script_cut);
    smartt_session *s = open_direct();
    if (!s) {
        reap(pid);
        return;
    }
    static unsigned char buf[1 << 20];
    struct tplace t = {.buf = buf, .cap = sizeof buf};
    smartt_placer pl = {.place = tplace_cb, .cut = tcut_cb, .ctx = &t, .min_size = 1024};
    CHECK_EQ(smartt_set_placer(s, &pl), 0);
    smartt_event ev;
    CHECK_EQ(smartt_recv(s, &ev, 500), SMARTT_ETIMEDOUT);
    smartt_direct_stats st;
    smartt_direct_stats_get(s, &st);
    CHECK_EQ(t.placed, 1);
    CHECK_EQ(t.cut, 1);
    CHECK(t.cut_buf == buf);
    CHECK(memcmp(t.head, "qqqqqqqq", 8) == 0);
    CHECK_EQ(st.placed, 1);
    CHECK_EQ(st.cut, 1);
    CHECK_EQ(st.held, 0);
    smartt_close(s);
    reap(pid);
}

/* ---- live: sessions of one real daemon ---- */

static smartt_session *live(uint32_t *ep)
{
    smartt_session *s = NULL;
    smartt_options o = {.direct = 1};
    CHECK_EQ(smartt_open(&s, asock, &o), 0);
    if (!s)
        return NULL;
    CHECK(smartt_caps(s) & SMARTT_CAP_DIRECT);
    CHECK_EQ(smartt_bind(s, 0, ep, TMO), 0);
    return s;
}

/* recv_seq receives one message and returns its sequence number (-1: none). */
static long recv_seq(smartt_session *s, int tmo, uint32_t from_ep)
{
    smartt_event ev;
    if (smartt_recv(s, &ev, tmo) != 0 || ev.type != SMARTT_EV_RECV)
        return -1;
    long v = -2;
    if (ev.size >= 8 && ev.from.endpoint == from_ep)
        memcpy(&v, ev.data, sizeof v);
    for (uint64_t i = 8; i < ev.size; i++)
        if (ev.data[i] != (unsigned char)(v + i))
            v = -3;
    smartt_release(s, &ev);
    return v;
}

static void seq_buf(unsigned char *b, size_t n, long v)
{
    memcpy(b, &v, sizeof v);
    for (size_t i = 8; i < n; i++)
        b[i] = (unsigned char)(v + i);
}

/* Two sessions of one daemon exchange messages both ways over one pair. */
TEST(live_both_ways)
{
    uint32_t ea, eb;
    smartt_session *a = live(&ea), *b = live(&eb);
    if (!a || !b)
        return;
    smartt_addr ta, tb;
    smartt_addr_parse(&ta, aaddr, ea);
    smartt_addr_parse(&tb, aaddr, eb);
    unsigned char buf[64];
    for (long i = 0; i < 50; i++) {
        seq_buf(buf, sizeof buf, i);
        smartt_event ev;
        CHECK_EQ(smartt_send(a, &tb, buf, sizeof buf, &ev, TMO), 0);
        CHECK_EQ(recv_seq(b, TMO, ea), i);
        CHECK_EQ(smartt_send(b, &ta, buf, sizeof buf, &ev, TMO), 0);
        CHECK_EQ(recv_seq(a, TMO, eb), i);
    }
    smartt_direct_stats sa, sb;
    smartt_direct_stats_get(a, &sa);
    smartt_direct_stats_get(b, &sb);
    CHECK_EQ(sa.pairs, 1); /* b's grant reused a's pair */
    CHECK_EQ(sb.pairs, 1);
    CHECK_EQ(sa.sent, 49); /* the first through the daemon, before the ask */
    CHECK_EQ(sb.received, 49);
    CHECK_EQ(sa.received, 49);
    smartt_close(a);
    smartt_close(b);
}

/* A session without the direct path still talks to one with it (through the daemon). */
TEST(live_mixed)
{
    uint32_t ea, eb;
    smartt_session *a = live(&ea), *b = NULL;
    CHECK_EQ(smartt_open(&b, asock, NULL), 0);
    if (!a || !b)
        return;
    CHECK(!(smartt_caps(b) & SMARTT_CAP_DIRECT));
    CHECK_EQ(smartt_bind(b, 0, &eb, TMO), 0);
    smartt_addr tb;
    smartt_addr_parse(&tb, aaddr, eb);
    unsigned char buf[16];
    seq_buf(buf, sizeof buf, 1);
    smartt_event ev;
    CHECK_EQ(smartt_send(a, &tb, buf, sizeof buf, &ev, TMO), 0);
    CHECK_EQ(recv_seq(b, TMO, ea), 1);
    smartt_direct_stats sa;
    smartt_direct_stats_get(a, &sa);
    CHECK_EQ(sa.pairs, 0);
    smartt_close(a);
    smartt_close(b);
}

/* send_or_progress sends message v to `to`, progressing a (and letting b take one
 * message into got[]) while the library answers SMARTT_EAGAIN. */
static int send_or_progress(smartt_session *a, const smartt_addr *to, unsigned char *buf,
                            size_t n, long v, smartt_session *b, uint32_t ea, long *got,
                            long *ngot)
{
    seq_buf(buf, n, v);
    for (int spins = 0; spins < 200000; spins++) {
        int r = smartt_send_async(a, to, buf, n, NULL);
        if (r != SMARTT_EAGAIN)
            return r;
        smartt_progress(a);
        long x = recv_seq(b, 1, ea);
        if (x >= 0)
            got[(*ngot)++] = x;
    }
    return SMARTT_ETIMEDOUT;
}

/* drain_outcomes forgets a's outcomes, counting failures. */
static int drain_outcomes(smartt_session *a)
{
    int failed = 0;
    smartt_event ev;
    smartt_progress(a);
    while (smartt_poll_outcome(a, &ev) == 1)
        failed += ev.type == SMARTT_EV_FAILED || ev.type == SMARTT_EV_ERROR;
    return failed;
}

/* Cut-over: a's first ask for b's endpoint comes before b binds it (the daemon says
 * "through me"), then 4,096 messages go through the daemon to b, which reads only when
 * a must wait; a then asks again, gets the pair, and the rest go over it. b receives
 * every message once and in order: those through the daemon before any over the pair. */
TEST(live_cutover)
{
    uint32_t ea, eb = 40000 + (uint32_t)(getpid() % 20000);
    smartt_session *a = live(&ea), *b = NULL;
    smartt_options o = {.direct = 1};
    CHECK_EQ(smartt_open(&b, asock, &o), 0);
    if (!a || !b)
        return;
    smartt_addr tb;
    smartt_addr_parse(&tb, aaddr, eb);
    unsigned char buf[32];
    seq_buf(buf, sizeof buf, -5);
    smartt_event ev;
    /* through the daemon, then the ask; refused (not bound): the daemon fails the message */
    smartt_send(a, &tb, buf, sizeof buf, &ev, TMO);
    int r;
    CHECK_EQ(smartt_bind(b, eb, NULL, TMO), 0);
    enum { N = 4096 + 400 };
    static long got[N + 8];
    long ngot = 0;
    for (long v = 0; v < N; v++) {
        r = send_or_progress(a, &tb, buf, sizeof buf, v, b, ea, got, &ngot);
        if (r) {
            CHECK_EQ(r, 0);
            break;
        }
        if (v % 64 == 0)
            drain_outcomes(a);
    }
    while (ngot < N + 1) {
        smartt_progress(a); /* held messages go when the answer is read */
        long x = recv_seq(b, 5000, ea);
        if (x == -1)
            break;
        got[ngot++] = x;
    }
    CHECK_EQ(ngot, N);
    int inorder = 1;
    for (long i = 0; i < ngot && i < N; i++)
        inorder &= got[i] == i;
    CHECK(inorder);
    smartt_direct_stats sa, sb;
    smartt_direct_stats_get(a, &sa);
    smartt_direct_stats_get(b, &sb);
    CHECK_EQ(sa.sent, N - 4097); /* after 4,096 relayed and the one before the ask */
    CHECK_EQ(sb.received, sa.sent);
    smartt_close(a);
    smartt_close(b);
}

/* Back-pressure: a receiver that reads nothing fills the pair; the sender's sends then
 * answer SMARTT_EAGAIN (nothing is dropped) until it reads, and every message arrives in
 * order. */
TEST(live_backpressure)
{
    uint32_t ea, eb;
    smartt_session *a = live(&ea), *b = live(&eb);
    if (!a || !b)
        return;
    smartt_addr tb;
    smartt_addr_parse(&tb, aaddr, eb);
    enum { N = 2000, SZ = 64 << 10 };
    static unsigned char buf[SZ];
    static long got[N + 8];
    long ngot = 0, first_wait = -1, granted = -1;
    for (long v = 0; v < N; v++) {
        seq_buf(buf, SZ, v);
        smartt_direct_stats sa;
        smartt_direct_stats_get(a, &sa);
        if (sa.pairs && granted < 0)
            granted = v;
        int r = smartt_send_async(a, &tb, buf, SZ, NULL);
        if (r == SMARTT_EAGAIN && granted >= 0 && first_wait < 0) {
            first_wait = v;
            CHECK(smartt_want_write(a));
        }
        if (r == SMARTT_EAGAIN) {
            CHECK_EQ(send_or_progress(a, &tb, buf, SZ, v, b, ea, got, &ngot), 0);
        } else {
            CHECK_EQ(r, 0);
        }
        CHECK_EQ(drain_outcomes(a), 0);
    }
    while (ngot < N) {
        smartt_progress(a);
        long x = recv_seq(b, 5000, ea);
        if (x == -1)
            break;
        got[ngot++] = x;
    }
    CHECK(granted >= 0 && first_wait > granted && first_wait < granted + 400); /* bounded */
    CHECK_EQ(ngot, N);
    int inorder = 1;
    for (long i = 0; i < ngot && i < N; i++)
        inorder &= got[i] == i;
    CHECK(inorder);
    CHECK_EQ(drain_outcomes(a), 0);
    smartt_close(a);
    smartt_close(b);
}

/* pair_up sends two messages to b (numbered 0 and 1) and checks they arrive: the
 * first goes through the daemon and asks for the pair, the second takes it. */
static void pair_up(smartt_session *a, smartt_session *b, const smartt_addr *tb, uint32_t ea)
{
    unsigned char small[64];
    for (long v = 0; v < 2; v++) {
        seq_buf(small, sizeof small, v);
        CHECK_EQ(smartt_send(a, tb, small, sizeof small, NULL, TMO), 0);
        CHECK_EQ(recv_seq(b, TMO, ea), v);
    }
}

/* Borrowed sends: a 32 MiB message in three pieces to a receiver that is not reading is
 * written in part and the rest borrowed (no copy); a send while more than 1 MiB waits
 * answers SMARTT_EAGAIN; once the receiver reads, the message arrives whole and SENT
 * follows. A destination with no pair answers SMARTT_ENOTSUP, nothing sent. */
TEST(live_borrow)
{
    uint32_t ea, eb;
    smartt_session *a = live(&ea), *b = live(&eb);
    if (!a || !b)
        return;
    smartt_addr tb, none;
    smartt_addr_parse(&tb, aaddr, eb);
    smartt_addr_parse(&none, aaddr, eb + 1);
    unsigned char small[64];
    pair_up(a, b, &tb, ea);
    int borrowed = -1;
    uint32_t tag = 0;
    struct iovec one = {small, sizeof small};
    CHECK_EQ(smartt_sendv_direct(a, &none, &one, 1, &tag, &borrowed), SMARTT_ENOTSUP);
    CHECK_EQ(borrowed, 0);
    enum { SZ = 32 << 20 };
    unsigned char *big = malloc(SZ);
    if (!big)
        return;
    seq_buf(big, SZ, 7);
    struct iovec v[3] = {{big, 100}, {big + 100, SZ / 2}, {big + 100 + SZ / 2, SZ / 2 - 100}};
    CHECK_EQ(smartt_sendv_direct(a, &tb, v, 3, &tag, &borrowed), 0);
    CHECK_EQ(borrowed, 1);
    int b2 = -1;
    CHECK_EQ(smartt_sendv_direct(a, &tb, &one, 1, NULL, &b2), SMARTT_EAGAIN);
    smartt_event ev;
    int sent = 0, got = 0;
    for (int i = 0; i < 20000 && !(sent && got); i++) {
        smartt_progress(a);
        while (smartt_poll_outcome(a, &ev) == 1)
            sent += ev.tag == tag && ev.type == SMARTT_EV_SENT;
        if (!got && smartt_recv(b, &ev, 1) == 0) {
            CHECK_EQ(ev.size, SZ);
            CHECK(ev.size == SZ && memcmp(ev.data, big, SZ) == 0);
            smartt_release(b, &ev);
            got = 1;
        }
    }
    CHECK_EQ(got, 1);
    CHECK_EQ(sent, 1);
    free(big);
    smartt_close(a);
    smartt_close(b);
}

/* A placer: a 512 KiB message over the pair is read straight into the placer's buffer
 * from the byte it skipped to (placed, its head seen by the placer, nothing held); a
 * small one below min_size arrives as usual. */
TEST(live_place)
{
    uint32_t ea, eb;
    smartt_session *a = live(&ea), *b = live(&eb);
    if (!a || !b)
        return;
    smartt_addr tb;
    smartt_addr_parse(&tb, aaddr, eb);
    unsigned char small[64];
    pair_up(a, b, &tb, ea);
    enum { SZ = 512 << 10 };
    static unsigned char out[SZ], in[SZ];
    struct tplace t = {.buf = in, .cap = sizeof in};
    smartt_placer pl = {.place = tplace_cb, .cut = tcut_cb, .ctx = &t, .min_size = 1024};
    CHECK_EQ(smartt_set_placer(b, &pl), 0);
    seq_buf(out, SZ, 11);
    CHECK_EQ(smartt_send(a, &tb, out, SZ, NULL, TMO), 0);
    smartt_event ev;
    CHECK_EQ(smartt_recv(b, &ev, TMO), 0);
    CHECK_EQ(ev.placed, 1);
    CHECK(ev.data == in);
    CHECK_EQ(ev.size, SZ - 8);
    CHECK(memcmp(in, out + 8, SZ - 8) == 0 && memcmp(t.head, out, 8) == 0);
    smartt_release(b, &ev);
    seq_buf(small, sizeof small, 2);
    CHECK_EQ(smartt_send(a, &tb, small, sizeof small, NULL, TMO), 0);
    CHECK_EQ(recv_seq(b, TMO, ea), 2);
    smartt_direct_stats st;
    smartt_direct_stats_get(b, &st);
    CHECK_EQ(st.placed, 1);
    CHECK_EQ(t.placed, 1);
    CHECK_EQ(t.cut, 0);
    CHECK_EQ(st.held, 0);
    smartt_close(a);
    smartt_close(b);
}

/* Closing a session writes what its pairs still hold (its messages were accepted), as a
 * socket's close does: a child sends 40 x 256 KiB to a slow reader and closes at once;
 * every message arrives whole and in order, none cut. */
TEST(live_close_linger)
{
    uint32_t eb;
    smartt_session *b = live(&eb);
    int up[2];
    if (!b || pipe(up))
        return;
    enum { N = 40, SZ = 256 << 10 };
    pid_t pid = fork();
    if (pid == 0) {
        smartt_session *c = NULL;
        smartt_options o = {.direct = 1};
        uint32_t ec;
        if (smartt_open(&c, asock, &o) || smartt_bind(c, 0, &ec, TMO))
            _exit(2);
        if (write(up[1], &ec, sizeof ec) != sizeof ec)
            _exit(3);
        smartt_addr tb;
        smartt_addr_parse(&tb, aaddr, eb);
        static unsigned char m[SZ];
        for (long v = 0; v < N; v++) {
            seq_buf(m, SZ, v);
            int r;
            for (int i = 0; (r = smartt_send_async(c, &tb, m, SZ, NULL)) == SMARTT_EAGAIN && i < 100000; i++)
                smartt_progress(c), usleep(200);
            if (r)
                _exit(4);
        }
        smartt_close(c); /* with bytes still queued for the pair */
        _exit(0);
    }
    uint32_t ec = 0;
    CHECK_EQ(read(up[0], &ec, sizeof ec), (ssize_t)sizeof ec);
    long n = 0, x;
    while ((x = recv_seq(b, 5000, ec)) >= 0) {
        CHECK_EQ(x, n++);
        usleep(3000); /* slower than the sender: its queue stays full */
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_EQ(n, N);
    smartt_direct_stats sb;
    smartt_direct_stats_get(b, &sb);
    CHECK_EQ(sb.cut, 0);
    CHECK(sb.received >= N - 2); /* all but the first (or two) over the pair */
    smartt_close(b);
    close(up[0]), close(up[1]);
}

/* A peer killed in the middle of a message: the receiver gets the whole messages before
 * it once, drops the cut one (counted), and nothing hangs; a message written to the dead
 * peer's pair fails (FAILED, "direct path: ..."), never vanishes. */
TEST(live_peer_killed)
{
    uint32_t eb;
    smartt_session *b = live(&eb);
    int up[2], go[2];
    if (!b || pipe(up) || pipe(go))
        return;
    pid_t pid = fork();
    if (pid == 0) {
        smartt_session *c = NULL;
        smartt_options o = {.direct = 1};
        uint32_t ec;
        if (smartt_open(&c, asock, &o) || smartt_bind(c, 0, &ec, TMO))
            _exit(2);
        smartt_addr tb;
        smartt_addr_parse(&tb, aaddr, eb);
        unsigned char small[16];
        for (long v = 0; v < 3; v++) {
            seq_buf(small, sizeof small, v);
            if (smartt_send(c, &tb, small, sizeof small, NULL, TMO))
                _exit(3);
        }
        if (write(up[1], &ec, sizeof ec) != sizeof ec || read(go[0], &ec, 1) != 1)
            _exit(5);
        static unsigned char big[32 << 20];
        if (smartt_send_async(c, &tb, big, sizeof big, NULL)) /* part of it is written */
            _exit(4);
        kill(getpid(), SIGKILL);
    }
    uint32_t ec = 0;
    CHECK_EQ(read(up[0], &ec, sizeof ec), (ssize_t)sizeof ec);
    smartt_addr tc;
    smartt_addr_parse(&tc, aaddr, ec);
    unsigned char m[8] = {0};
    smartt_event ev;
    CHECK_EQ(smartt_send(b, &tc, m, sizeof m, &ev, TMO), 0); /* through the daemon, asks */
    CHECK_EQ(smartt_send(b, &tc, m, sizeof m, &ev, TMO), 0); /* over the pair c made */
    CHECK_EQ(write(go[1], "g", 1), 1);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st));
    uint32_t tag = 0;
    CHECK_EQ(smartt_send_async(b, &tc, m, sizeof m, &tag), 0); /* the pair is gone */
    int failed = 0;
    while (smartt_poll_outcome(b, &ev) == 1)
        failed += ev.tag == tag && ev.type == SMARTT_EV_FAILED && strstr(ev.text, "direct path");
    CHECK_EQ(failed, 1);
    long n = 0, x;
    while ((x = recv_seq(b, 2000, ec)) >= 0)
        CHECK_EQ(x, n++);
    CHECK_EQ(n, 3);
    smartt_direct_stats sb;
    smartt_direct_stats_get(b, &sb);
    CHECK_EQ(sb.received, 2); /* c's first went through the daemon */
    CHECK_EQ(sb.cut, 1);
    CHECK_EQ(sb.failed, 1);
    CHECK_EQ(sb.pairs_open, 0);
    smartt_close(b);
    close(up[0]), close(up[1]), close(go[0]), close(go[1]);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN(fake_hostile_pairs);
    RUN(fake_frame_errors);
    RUN(fake_pairs_bound);
    RUN(fake_recv_budget);
    RUN(fake_place_cut);
    asock = getenv("SMARTT_A_SOCK"), aaddr = getenv("SMARTT_A_ADDR");
    if (asock && aaddr) {
        RUN(live_both_ways);
        RUN(live_mixed);
        RUN(live_cutover);
        RUN(live_backpressure);
        RUN(live_borrow);
        RUN(live_place);
        RUN(live_close_linger);
        RUN(live_peer_killed);
    } else {
        printf("live tests skipped (run under python/tests/daemons.py)\n");
    }
    return SUMMARY("libsmartt-direct");
}
