/* libsmartt against a fake daemon (a forked child on a Unix socket) that answers with
 * scripted bytes: version negotiation, and hostile frames that must give errors,
 * never a crash (run under -fsanitize=address,undefined). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "smartt.h"
#include "testutil.h"

static char path[108];
static int close_early; /* the fake closes at once after its last response */

#define UP1 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/1\r\nConnection: Upgrade\r\n\r\n"
#define UP2 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/2\r\nSmartt-Version: 2\r\nConnection: Upgrade\r\n\r\n"
#define R426 "HTTP/1.1 426 Upgrade Required\r\nContent-Type: application/json\r\nContent-Length: 41\r\n\r\n{\"error\":\"messaging needs smartt-msg/1\"}\n"

/* A script: per connection, the response bytes; the child records each request's
 * Upgrade line in the file path.req. */
typedef struct { const void *p; size_t n; const void *after; size_t nafter; } chunk;

static void serve(const chunk *conns, int nconn)
{
    unlink(path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, 4))
        _exit(3);
    pid_t pid = fork();
    if (pid) {
        close(l);
        return;
    }
    char reqf[128];
    snprintf(reqf, sizeof reqf, "%s.req", path);
    FILE *rf = fopen(reqf, "w");
    for (int i = 0; i < nconn; i++) {
        int c = accept(l, NULL, NULL);
        char req[4096];
        size_t got = 0;
        while (got < sizeof req - 1) {
            ssize_t k = read(c, req + got, sizeof req - 1 - got);
            if (k <= 0)
                break;
            got += (size_t)k;
            req[got] = 0;
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        req[got] = 0;
        char *u = strstr(req, "Upgrade: ");
        if (u && rf) {
            fprintf(rf, "%.*s\n", (int)strcspn(u, "\r"), u);
            fflush(rf);
        }
        if (write(c, conns[i].p, conns[i].n) < 0)
            _exit(4);
        if (conns[i].after) { /* the rest once the client sent a request */
            char b[256];
            if (read(c, b, sizeof b) <= 0 || write(c, conns[i].after, conns[i].nafter) < 0)
                _exit(5);
        }
        if (i == nconn - 1 && !close_early) { /* keep the last one open until the client closes */
            char b[4096];
            while (read(c, b, sizeof b) > 0)
                ;
        }
        close(c);
    }
    _exit(0);
}

static void reap(void)
{
    int st;
    while (waitpid(-1, &st, 0) > 0)
        ;
}

static int requests(char *out, size_t n)
{
    char reqf[128];
    snprintf(reqf, sizeof reqf, "%s.req", path);
    FILE *f = fopen(reqf, "r");
    if (!f)
        return 0;
    size_t k = fread(out, 1, n - 1, f);
    out[k] = 0;
    fclose(f);
    return 1;
}

/* frame builds an upgrade response followed by one frame with the given fields. */
static size_t frame(unsigned char *b, const char *up, int type, uint32_t tag, uint32_t len,
                    const void *payload, size_t plen)
{
    size_t n = strlen(up);
    memcpy(b, up, n);
    unsigned char *h = b + n;
    h[0] = (unsigned char)type, h[1] = h[2] = h[3] = 0;
    h[4] = (unsigned char)(tag >> 24), h[5] = (unsigned char)(tag >> 16);
    h[6] = (unsigned char)(tag >> 8), h[7] = (unsigned char)tag;
    h[8] = (unsigned char)(len >> 24), h[9] = (unsigned char)(len >> 16);
    h[10] = (unsigned char)(len >> 8), h[11] = (unsigned char)len;
    memcpy(h + 12, payload, plen);
    return n + 12 + plen;
}

/* drive opens a session to the fake and runs progress until an error or 2 s. */
static int drive(smartt_session **out, smartt_event *ev)
{
    smartt_session *s;
    int r = smartt_open(&s, path, NULL);
    if (r)
        return r;
    *out = s;
    for (int i = 0; i < 20; i++) {
        smartt_event e;
        r = smartt_recv(s, &e, 10);
        if (r == 0 || r == SMARTT_ETIMEDOUT) {
            if (r == 0 && ev)
                *ev = e;
            if (r == 0)
                smartt_release(s, &e);
            if (smartt_poll_completion(s, &e) == 1 && ev)
                *ev = e;
            continue;
        }
        return r;
    }
    return 0;
}

static int hostile(const void *resp, size_t n)
{
    chunk c = {resp, n, NULL, 0};
    close_early = 1;
    serve(&c, 1);
    close_early = 0;
    smartt_session *s = NULL;
    int r = drive(&s, NULL);
    smartt_close(s);
    reap();
    return r;
}

TEST(version_list_refused_then_v1)
{
    chunk c[2] = {{R426, sizeof R426 - 1, NULL, 0}, {UP1, sizeof UP1 - 1, NULL, 0}};
    serve(c, 2);
    smartt_session *s;
    CHECK_EQ(smartt_open(&s, path, NULL), 0);
    CHECK_EQ(smartt_version(s), 1);
    CHECK_EQ(smartt_cancel(s, 3), SMARTT_ENOTSUP);
    /* no Smartt-SendFD, no Smartt-Recv-Ring: neither memfds nor a ring */
    smartt_addr to;
    CHECK_EQ(smartt_addr_parse(&to, "127.0.0.2:23600", 1), 0);
    CHECK_EQ(smartt_send_fd_async(s, &to, 0, 10, NULL), SMARTT_ENOTSUP);
    CHECK_EQ(smartt_ring_start(s, 1u << 20, 0, NULL), SMARTT_ENOTSUP);
    smartt_close(s);
    reap();
    char req[512];
    CHECK(requests(req, sizeof req));
    CHECK(strcmp(req, "Upgrade: smartt-msg/2, smartt-msg/1\nUpgrade: smartt-msg/1\n") == 0);
}

TEST(version_none)
{
    chunk c[2] = {{R426, sizeof R426 - 1, NULL, 0}, {R426, sizeof R426 - 1, NULL, 0}};
    serve(c, 2);
    smartt_session *s;
    char err[128];
    smartt_options o = {.errbuf = err, .errlen = sizeof err};
    CHECK_EQ(smartt_open(&s, path, &o), SMARTT_EVERSION);
    CHECK(strstr(err, "smartt-msg/1") != NULL);
    reap();
    static const char bad[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/9\r\n\r\n";
    chunk c2 = {bad, sizeof bad - 1, NULL, 0};
    serve(&c2, 1);
    CHECK_EQ(smartt_open(&s, path, NULL), SMARTT_EVERSION);
    reap();
    /* Smartt-Version that contradicts Upgrade */
    static const char lie[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/2\r\nSmartt-Version: 1\r\n\r\n";
    chunk c3 = {lie, sizeof lie - 1, NULL, 0};
    serve(&c3, 1);
    CHECK_EQ(smartt_open(&s, path, NULL), SMARTT_EPROTO);
    reap();
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 20\r\n\r\n{\"error\":\"full up\"}\n";
    chunk c4 = {busy, sizeof busy - 1, NULL, 0};
    serve(&c4, 1);
    CHECK_EQ(smartt_open(&s, path, &o), SMARTT_EBUSY);
    CHECK(strcmp(err, "full up") == 0);
    reap();
}

TEST(v2_events)
{
    unsigned char b[512];
    size_t n = frame(b, UP2, 0x88, 7, 0, "", 0);
    unsigned char one = 1;
    n += frame(b + n, "", 0x89, 7, 1, &one, 1);
    chunk c = {b, n, NULL, 0};
    serve(&c, 1);
    smartt_session *s;
    CHECK_EQ(smartt_open(&s, path, NULL), 0);
    CHECK_EQ(smartt_version(s), 2);
    CHECK(smartt_caps(s) & SMARTT_CAP_CANCEL);
    smartt_event ev;
    CHECK_EQ(smartt_wait(s, 7, 1u << SMARTT_EV_ACCEPTED, &ev, 2000), 0);
    CHECK_EQ(smartt_wait(s, 7, 1u << SMARTT_EV_CANCEL_RESULT, &ev, 2000), 0);
    CHECK_EQ(ev.cancel, 1u);
    smartt_close(s);
    reap();
}

TEST(hostile_frames)
{
    unsigned char b[4096], recv[34] = {0}, recvat[42] = {0};
    recv[33] = 10; /* size 10 */
    /* short frame, then EOF */
    CHECK_EQ(hostile(UP1 "\x81\0\0", sizeof UP1 - 1 + 3), SMARTT_ECLOSED);
    CHECK_EQ(hostile(b, frame(b, UP1, 0x42, 1, 0, "", 0)), SMARTT_EPROTO);       /* unknown type */
    CHECK_EQ(hostile(b, frame(b, UP1, 0x83, 1, (1u << 20) + 1, "", 0)), SMARTT_EPROTO); /* oversize */
    CHECK_EQ(hostile(b, frame(b, UP1, 0x03, 1, 3, "abc", 3)), SMARTT_EPROTO);   /* Data alone */
    CHECK_EQ(hostile(b, frame(b, UP1, 0x88, 1, 0, "", 0)), SMARTT_EPROTO);      /* v2 frame on v1 */
    CHECK_EQ(hostile(b, frame(b, UP1, 0x84, 1, 10, recv, 10)), SMARTT_EPROTO);  /* short Recv */
    CHECK_EQ(hostile(b, frame(b, UP1, 0x87, 1, 42, recvat, 42)), SMARTT_EPROTO); /* RecvAt, no ring */
    CHECK_EQ(hostile(b, frame(b, UP1, 0x82, 1, 31, b, 31)), SMARTT_EPROTO);     /* Sent of 31 */
    CHECK_EQ(hostile(b, frame(b, UP1, 0x85, 1, 1, "x", 1)), SMARTT_EPROTO);     /* Error of 1 */
    CHECK_EQ(hostile(b, frame(b, UP1, 0x86, 9, 8, b, 8)), SMARTT_EPROTO);       /* RingOK unasked */
    CHECK_EQ(hostile(b, frame(b, UP2, 0x89, 1, 1, "\x07", 1)), SMARTT_EPROTO);  /* cancel code 7 */
    unsigned char huge[34] = {0};
    huge[25] = 0x40 + 1; /* size 2^30 + 2^24.. beyond 1 GiB */
    CHECK_EQ(hostile(b, frame(b, UP1, 0x84, 1, 34, huge, 34)), SMARTT_EPROTO);
    size_t n = frame(b, UP1, 0x84, 1, 34, recv, 34);
    n += frame(b + n, "", 0x03, 1, 11, "hello world", 11); /* more than announced */
    CHECK_EQ(hostile(b, n), SMARTT_EPROTO);
    n = frame(b, UP1, 0x84, 1, 34, recv, 34);
    n += frame(b + n, "", 0x03, 2, 10, "helloworld", 10); /* another tag's Data */
    CHECK_EQ(hostile(b, n), SMARTT_EPROTO);
    n = frame(b, UP1, 0x84, 1, 34, recv, 34);
    n += frame(b + n, "", 0x84, 2, 34, recv, 34); /* a second Recv mid-message */
    CHECK_EQ(hostile(b, n), SMARTT_EPROTO);
    n = frame(b, UP1, 0x84, 1, 34, recv, 34);
    n += frame(b + n, "", 0x03, 1, 4, "hell", 4); /* cut message, then EOF */
    CHECK_EQ(hostile(b, n), SMARTT_ECLOSED);
    n = frame(b, UP1, 0x81, 1, 4, "\0\0\0\5", 4);
    b[n - 14] = 1; /* a reserved byte set */
    CHECK_EQ(hostile(b, n), SMARTT_EPROTO);
}

TEST(good_message_and_long_failed_text)
{
    static unsigned char b[(1 << 20) + 512];
    unsigned char recv[34] = {0};
    recv[33] = 10;
    size_t n = frame(b, UP1, 0x84, 5, 34, recv, 34);
    n += frame(b + n, "", 0x03, 5, 4, "hell", 4);
    n += frame(b + n, "", 0x03, 5, 6, "oworld", 6);
    static unsigned char text[1 << 20];
    memset(text, 'x', sizeof text);
    n += frame(b + n, "", 0x83, 9, sizeof text, text, sizeof text);
    chunk c = {b, n, NULL, 0};
    serve(&c, 1);
    smartt_session *s;
    CHECK_EQ(smartt_open(&s, path, NULL), 0);
    smartt_event ev;
    CHECK_EQ(smartt_recv(s, &ev, 2000), 0);
    CHECK(ev.size == 10 && memcmp(ev.data, "helloworld", 10) == 0);
    smartt_release(s, &ev);
    CHECK_EQ(smartt_wait(s, 9, 1u << SMARTT_EV_FAILED, &ev, 2000), 0);
    CHECK_EQ(ev.status, SMARTT_EFAILED);
    CHECK_EQ(strlen(ev.text), sizeof ev.text - 1);
    smartt_close(s);
    reap();
}

/* A tag-0 Error before the daemon closes is what the session reports. */
TEST(last_words)
{
    unsigned char b[256];
    size_t n = frame(b, UP1, 0x85, 0, 2 + 4, "\0\013idle", 6);
    chunk c = {b, n, NULL, 0};
    close_early = 1;
    serve(&c, 1);
    close_early = 0;
    smartt_session *s;
    CHECK_EQ(smartt_open(&s, path, NULL), 0);
    smartt_event ev;
    CHECK_EQ(smartt_recv(s, &ev, 2000), SMARTT_EDAEMON(11));
    CHECK(strcmp(ev.text, "idle") == 0);
    CHECK_EQ(smartt_recv(s, &ev, 2000), SMARTT_EDAEMON(11)); /* sticky */
    CHECK_EQ(smartt_progress(s), SMARTT_EDAEMON(11));
    smartt_close(s);
    reap();
}

/* read_frame reads one client frame (header and payload, up to cap bytes kept). */
static int read_frame(int c, unsigned char *h, unsigned char *p, size_t cap)
{
    size_t got = 0;
    while (got < 12) {
        ssize_t k = read(c, h + got, 12 - got);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    size_t len = (size_t)h[8] << 24 | (size_t)h[9] << 16 | (size_t)h[10] << 8 | h[11];
    for (size_t i = 0; i < len;) {
        unsigned char b[65536];
        size_t want = len - i < sizeof b ? len - i : sizeof b;
        ssize_t k = read(c, b, want);
        if (k <= 0)
            return -1;
        if (i < cap)
            memcpy(p + i, b, (size_t)k < cap - i ? (size_t)k : cap - i);
        i += (size_t)k;
    }
    return (int)len;
}

/* A daemon that refuses the session's memfd (Error 9) gets the message streamed, and
 * every later large message too. */
TEST(memfd_refused_then_streamed)
{
    unlink(path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 1) == 0);
    if (fork() == 0) {
        int c = accept(l, NULL, NULL);
        char req[4096];
        if (read(c, req, sizeof req) <= 0)
            _exit(3);
        static const char up[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/1\r\nSmartt-SendFD: 1\r\n\r\n";
        unsigned char h[12], p[64], out[64];
        int types = 0;
        if (write(c, up, sizeof up - 1) < 0)
            _exit(4);
        for (int i = 0; i < 3; i++) { /* SendFD (refused), then Send + Data, Send + Data */
            if (read_frame(c, h, p, sizeof p) < 0)
                _exit(5);
            types = types * 16 + h[0];
            size_t n = h[0] == 4 ? frame(out, "", 0x85, (uint32_t)(h[4] << 24 | h[5] << 16 | h[6] << 8 | h[7]), 6, "\0\011bad!", 6)
                                 : frame(out, "", 0x82, (uint32_t)(h[4] << 24 | h[5] << 16 | h[6] << 8 | h[7]), 32, p, 32);
            if (h[0] == 2) { /* read the Data frames of 5 MiB */
                size_t total = 0;
                while (total < (5u << 20) && read_frame(c, h, p, 0) > 0)
                    total += (size_t)(h[8] << 24 | h[9] << 16 | h[10] << 8 | h[11]);
            }
            if (write(c, out, n) < 0)
                _exit(6);
        }
        _exit(types == 0x422 ? 0 : 7);
    }
    close(l);
    smartt_session *s;
    CHECK_EQ(smartt_open(&s, path, NULL), 0);
    smartt_addr to;
    smartt_addr_parse(&to, "127.0.0.2:23600", 1);
    unsigned char *big = calloc(1, 5u << 20);
    smartt_event ev;
    CHECK_EQ(smartt_send(s, &to, big, 5u << 20, &ev, 5000), 0); /* refused, then streamed */
    CHECK_EQ(ev.type, SMARTT_EV_SENT);
    CHECK_EQ(smartt_send(s, &to, big, 5u << 20, &ev, 5000), 0); /* streamed at once */
    free(big);
    smartt_close(s);
    int st = 0;
    wait(&st);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* the fake saw SendFD, Send, Send */
}

/* A RecvAt must lie inside the ring the client set up. */
TEST(ring_bounds)
{
    static const char up[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/1\r\n"
                             "Smartt-SendFD: 1\r\nSmartt-Recv-Ring: 1048576\r\n\r\n";
    unsigned char ok[8] = {0, 0, 0, 0, 0, 0x10, 0, 0}; /* RingOK 1 MiB */
    for (int bad = 0; bad < 2; bad++) {
        unsigned char at[42] = {0}, b[256];
        at[33] = 100;                                  /* size 100 */
        at[39] = bad ? 0x10 : 0, at[41] = bad ? 0 : 64; /* offset 1 MiB (beyond) or 64 */
        size_t n = frame(b, "", 0x86, 1, 8, ok, 8);
        n += frame(b + n, "", 0x87, 5, 42, at, 42);
        chunk c = {up, sizeof up - 1, b, n};
        serve(&c, 1);
        smartt_session *s;
        CHECK_EQ(smartt_open(&s, path, NULL), 0);
        CHECK(smartt_caps(s) & SMARTT_CAP_RING);
        int r = smartt_ring_enable(s, 1u << 20, 0, 2000); /* the bad RecvAt may come in the same read */
        CHECK(r == 0 || (bad && r == SMARTT_EPROTO));
        smartt_event ev;
        r = smartt_recv(s, &ev, 2000);
        CHECK_EQ(r, bad ? SMARTT_EPROTO : 0);
        if (!r) {
            CHECK(ev.in_ring && ev.size == 100 && ev.data[0] == 0);
            CHECK_EQ(smartt_release(s, &ev), 0);
        }
        smartt_close(s);
        reap();
    }
}

/* Random frames after a valid Upgrade: any outcome but a crash or a hang. */
TEST(random_garbage)
{
    unsigned seed = 12345;
    static unsigned char b[8192];
    for (int round = 0; round < 40; round++) {
        size_t n = strlen(round % 2 ? UP1 : UP2);
        memcpy(b, round % 2 ? UP1 : UP2, n);
        size_t len = 12 + (size_t)(rand_r(&seed) % 2000);
        for (size_t i = 0; i < len; i++) {
            b[n + i] = (unsigned char)rand_r(&seed);
            if (i % 12 < 4 && rand_r(&seed) % 2) /* plausible headers now and then */
                b[n + i] = (unsigned char)(i % 12 == 0 ? 0x81 + rand_r(&seed) % 9 : 0);
        }
        int r = hostile(b, n + len);
        CHECK(r == 0 || r == SMARTT_EPROTO || r == SMARTT_ECLOSED);
    }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    snprintf(path, sizeof path, "/tmp/smartt-fake-%d.sock", (int)getpid());
    RUN(version_list_refused_then_v1);
    RUN(version_none);
    RUN(v2_events);
    RUN(hostile_frames);
    RUN(good_message_and_long_failed_text);
    RUN(last_words);
    RUN(memfd_refused_then_streamed);
    RUN(ring_bounds);
    RUN(random_garbage);
    unlink(path);
    char reqf[128];
    snprintf(reqf, sizeof reqf, "%s.req", path);
    unlink(reqf);
    return SUMMARY("libsmartt-fake");
}
