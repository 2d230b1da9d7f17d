/* test_fi: the smartt libfabric provider against real daemons (run under ASan and
 * UBSan by scripts/test-native, inside python/tests/daemons.py: SMARTT_A_SOCK,
 * SMARTT_B_SOCK; SMARTTD names the daemon binary for the restart test). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "smartt.h"
#include <poll.h>

static int fails;
#define CHECK(c, ...)                                                          \
    do {                                                                       \
        if (!(c)) {                                                            \
            fails++;                                                           \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c);       \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)

typedef struct node {
    struct fi_info *info;
    struct fid_fabric *fab;
    struct fid_domain *dom;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_cntr *rc;
    struct fid_ep *ep;
    unsigned char name[64];
    size_t namelen;
} node;

static struct fi_cq_err_entry last_err;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct fi_info *hints(void)
{
    struct fi_info *h = fi_allocinfo();
    h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE;
    h->ep_attr->type = FI_EP_RDM;
    h->mode = FI_CONTEXT;
    h->fabric_attr->prov_name = strdup("smartt");
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->tx_attr->msg_order = FI_ORDER_SAS;
    return h;
}

static int node_open(node *n, const char *sock)
{
    memset(n, 0, sizeof *n);
    setenv("SMARTT_SOCKET", sock, 1);
    struct fi_info *h = hints();
    int r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &n->info);
    fi_freeinfo(h);
    if (r)
        return r;
    if ((r = fi_fabric(n->info->fabric_attr, &n->fab, NULL)) ||
        (r = fi_domain(n->fab, n->info, &n->dom, NULL)))
        return r;
    struct fi_av_attr aa = {.type = FI_AV_MAP};
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC};
    struct fi_cntr_attr ta = {.events = FI_CNTR_EVENTS_COMP};
    if ((r = fi_av_open(n->dom, &aa, &n->av, NULL)) || (r = fi_cq_open(n->dom, &ca, &n->cq, NULL)) ||
        (r = fi_cntr_open(n->dom, &ta, &n->rc, NULL)) || (r = fi_endpoint(n->dom, n->info, &n->ep, NULL)) ||
        (r = fi_ep_bind(n->ep, &n->av->fid, 0)) ||
        (r = fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (r = fi_ep_bind(n->ep, &n->rc->fid, FI_RECV)) || (r = fi_enable(n->ep)))
        return r;
    n->namelen = sizeof n->name;
    return fi_getname(&n->ep->fid, n->name, &n->namelen);
}

static void node_close(node *n)
{
    if (n->ep)
        fi_close(&n->ep->fid);
    if (n->rc)
        fi_close(&n->rc->fid);
    if (n->cq)
        fi_close(&n->cq->fid);
    if (n->av)
        fi_close(&n->av->fid);
    if (n->dom)
        fi_close(&n->dom->fid);
    if (n->fab)
        fi_close(&n->fab->fid);
    if (n->info)
        fi_freeinfo(n->info);
    memset(n, 0, sizeof *n);
}

static fi_addr_t add_peer(node *n, const node *peer)
{
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    int r = fi_av_insert(n->av, peer->name, 1, &a, 0, NULL);
    CHECK(r == 1, "av_insert %d", r);
    return a;
}

/* comp waits up to ms for one completion: 1, 0 on timeout, or -err (last_err). */
static int comp(node *n, struct fi_cq_tagged_entry *e, fi_addr_t *src, int ms)
{
    long long dl = now_ms() + ms;
    for (;;) {
        ssize_t r = fi_cq_sreadfrom(n->cq, e, 1, src, NULL, 50);
        if (r == 1)
            return 1;
        if (r == -FI_EAVAIL) {
            memset(&last_err, 0, sizeof last_err);
            r = fi_cq_readerr(n->cq, &last_err, 0);
            return r == 1 ? -last_err.err : (int)r;
        }
        if (r != -FI_EAGAIN)
            return (int)r;
        if (now_ms() > dl)
            return 0;
    }
}

/* cancel_drain cancels the receive posted with ctx and takes its error completion. */
static void cancel_drain(node *n, void *ctx)
{
    struct fi_cq_tagged_entry e;
    CHECK(fi_cancel(&n->ep->fid, ctx) == 0, "cancel");
    CHECK(comp(n, &e, NULL, 2000) == -FI_ECANCELED, "cancelled");
}

static int send_wait(node *n, const void *buf, size_t len, fi_addr_t to, uint64_t tag, void *ctx)
{
    ssize_t r;
    while ((r = fi_tsend(n->ep, buf, len, NULL, to, tag, ctx)) == -FI_EAGAIN) {
        struct fi_cq_tagged_entry e;
        fi_cq_read(n->cq, &e, 0);
    }
    return (int)r;
}

/* ---- the tests ---- */

static void test_unsupported(node *a)
{
    char b[8] = {0};
    CHECK(fi_write(a->ep, b, 8, NULL, 0, 0, 0, NULL) == -FI_ENOSYS, "fi_write");
    CHECK(fi_read(a->ep, b, 8, NULL, 0, 0, 0, NULL) == -FI_ENOSYS, "fi_read");
    size_t v = 1, l = sizeof v;
    CHECK(fi_setopt(&a->ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, sizeof v) == -FI_ENOPROTOOPT, "setopt");
    CHECK(fi_getopt(&a->ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &l) == -FI_ENOPROTOOPT, "getopt");
    CHECK(fi_connect(a->ep, b, NULL, 0) == -FI_ENOSYS, "connect");
    struct fi_info *h = hints(), *out = NULL;
    h->caps |= FI_RMA;
    CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &out) == -FI_ENODATA, "getinfo FI_RMA");
    h->caps &= ~FI_RMA;
    h->ep_attr->type = FI_EP_MSG;
    CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &out) == -FI_ENODATA, "getinfo MSG");
    fi_freeinfo(h);
    CHECK(fi_tinject(a->ep, b, 8192, 0, 1) == -FI_EMSGSIZE, "inject beyond inject_size");
    CHECK(fi_tsend(a->ep, b, 8, NULL, 12345, 1, NULL) == -FI_EINVAL, "send to no address");
    struct fid_mr *mr;
    CHECK(fi_mr_reg(a->dom, b, 8, FI_SEND | FI_RECV, 0, 7, 0, &mr, NULL) == 0, "mr_reg");
    CHECK(fi_mr_key(mr) == 7, "mr key");
    fi_close(&mr->fid);
}

static void test_tagged(node *a, node *b)
{
    fi_addr_t ab = add_peer(a, b), ba = add_peer(b, a);
    struct fi_context cx[8];
    char in[64] = {0}, out[64];
    struct fi_cq_tagged_entry e;
    fi_addr_t src;
    /* expected: a posted receive with an ignore mask matches, from a named source */
    CHECK(fi_trecv(b->ep, in, sizeof in, NULL, ba, 0x1200, 0xff, &cx[0]) == 0, "trecv");
    strcpy(out, "hello");
    CHECK(fi_tsenddata(a->ep, out, 6, NULL, 0xdeadbeef, ab, 0x1234, &cx[1]) == 0, "tsenddata");
    int r = comp(b, &e, &src, 5000);
    CHECK(r == 1 && e.op_context == &cx[0] && e.tag == 0x1234 && e.len == 6 && !strcmp(in, "hello") &&
          e.data == 0xdeadbeef && (e.flags & FI_REMOTE_CQ_DATA) && src == ba,
          "r %d tag %llx len %zu data %llx src %llu", r, (unsigned long long)e.tag, e.len,
          (unsigned long long)e.data, (unsigned long long)src);
    r = comp(a, &e, NULL, 5000);
    CHECK(r == 1 && e.op_context == &cx[1] && (e.flags & FI_SEND), "send completion %d", r);
    /* unexpected: three messages in, then PEEK, CLAIM, DISCARD and a plain receive */
    for (int i = 0; i < 3; i++) {
        out[0] = (char)('a' + i);
        CHECK(fi_tinject(a->ep, out, 1, ab, 0x500 + (uint64_t)i) == 0, "tinject %d", i);
    }
    struct fi_msg_tagged m = {0};
    struct iovec iov = {in, sizeof in};
    m.msg_iov = &iov, m.iov_count = 1, m.addr = FI_ADDR_UNSPEC, m.tag = 0x501, m.context = &cx[2];
    long long dl = now_ms() + 5000;
    for (;;) { /* peek until it has arrived */
        CHECK(fi_trecvmsg(b->ep, &m, FI_PEEK) == 0, "peek");
        r = comp(b, &e, NULL, 2000);
        if (r == 1 || now_ms() > dl)
            break;
        CHECK(r == -FI_ENOMSG, "peek miss %d", r);
        usleep(10000);
    }
    CHECK(r == 1 && e.tag == 0x501 && e.len == 1, "peek hit %d", r);
    CHECK(fi_trecvmsg(b->ep, &m, FI_PEEK | FI_CLAIM) == 0, "peek claim");
    CHECK(comp(b, &e, NULL, 2000) == 1 && e.tag == 0x501, "claimed");
    in[0] = 0;
    CHECK(fi_trecvmsg(b->ep, &m, FI_CLAIM) == 0, "claim");
    CHECK(comp(b, &e, NULL, 2000) == 1 && in[0] == 'b' && e.len == 1, "claim delivers %c", in[0]);
    m.tag = 0x500, m.context = &cx[3];
    CHECK(fi_trecvmsg(b->ep, &m, FI_PEEK | FI_DISCARD) == 0, "discard");
    CHECK(comp(b, &e, NULL, 2000) == 1 && e.tag == 0x500, "discarded");
    in[0] = 0;
    CHECK(fi_trecv(b->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0, ~0ull, &cx[4]) == 0, "any tag");
    CHECK(comp(b, &e, NULL, 2000) == 1 && in[0] == 'c' && e.tag == 0x502, "the third, once: %c", in[0]);
    CHECK(fi_trecvmsg(b->ep, &m, FI_PEEK) == 0 && comp(b, &e, NULL, 2000) == -FI_ENOMSG, "nothing left");
    /* cancel a posted receive; truncation */
    CHECK(fi_trecv(b->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x999, 0, &cx[5]) == 0, "trecv");
    CHECK(fi_cancel(&b->ep->fid, &cx[5]) == 0, "cancel");
    CHECK(comp(b, &e, NULL, 2000) == -FI_ECANCELED && last_err.op_context == &cx[5], "cancelled");
    CHECK(fi_cancel(&b->ep->fid, &cx[5]) == -FI_ENOENT, "cancel twice");
    CHECK(fi_trecv(b->ep, in, 4, NULL, FI_ADDR_UNSPEC, 0x77, 0, &cx[6]) == 0, "short trecv");
    CHECK(fi_tinject(a->ep, "0123456789", 10, ab, 0x77) == 0, "tinject 10");
    CHECK(comp(b, &e, NULL, 5000) == -FI_ETRUNC && last_err.olen == 6 && last_err.len == 4, "truncated");
    /* fi_tsendmsg with FI_INJECT still completes (only fi_tinject calls do not) */
    struct fi_msg_tagged sm = {0};
    struct iovec siov = {"inj", 4};
    sm.msg_iov = &siov, sm.iov_count = 1, sm.addr = ab, sm.tag = 0x78, sm.context = &cx[7];
    CHECK(fi_trecv(b->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x78, 0, &cx[6]) == 0, "trecv");
    CHECK(fi_tsendmsg(a->ep, &sm, FI_INJECT | FI_COMPLETION) == 0, "tsendmsg inject");
    CHECK(comp(a, &e, NULL, 5000) == 1 && e.op_context == &cx[7], "sendmsg inject completes");
    CHECK(comp(b, &e, NULL, 5000) == 1 && !strcmp(in, "inj"), "inject delivered");
    CHECK(fi_cntr_readerr(b->rc) >= 1 && fi_cntr_read(b->rc) >= 4, "counters %llu %llu",
          (unsigned long long)fi_cntr_read(b->rc), (unsigned long long)fi_cntr_readerr(b->rc));
}

/* test_multi_recv: untagged messages land back to back in one multi-receive buffer. */
static void test_multi_recv(node *a, node *b)
{
    fi_addr_t ab = 0; /* a's first AV entry is b */
    char big[256];
    struct fi_context cx;
    struct iovec iov = {big, sizeof big};
    struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &cx};
    size_t min = 110; /* 256 - 3 * 50 = 106 left after the third: released */
    CHECK(fi_setopt(&b->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min) == 0, "min");
    CHECK(fi_recvmsg(b->ep, &m, FI_MULTI_RECV) == 0, "recvmsg multi");
    for (int i = 0; i < 3; i++)
        CHECK(fi_inject(a->ep, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 50, ab) == 0, "inject");
    struct fi_cq_tagged_entry e;
    int got = 0, last = 0;
    for (int i = 0; i < 3; i++) {
        int r = comp(b, &e, NULL, 5000);
        CHECK(r == 1 && e.len == 50 && e.buf == big + 50 * i, "part %d: %d", i, r);
        got += r == 1;
        last = (e.flags & FI_MULTI_RECV) != 0;
    }
    CHECK(got == 3 && last, "three parts, the buffer released after the third");
}

/* test_av: a sender is found among 3000 addresses (readfrom gives the newest entry
 * of its name); removing that entry falls back to the older one; lookup and straddr. */
static void test_av(node *a, node *b)
{
    unsigned char fake[24];
    static fi_addr_t idx[3000];
    for (int i = 0; i < 3000; i++) {
        memcpy(fake, b->name, 24);
        fake[20] = 0x7f, fake[21] = (unsigned char)(i >> 8), fake[22] = (unsigned char)i;
        CHECK(fi_av_insert(a->av, fake, 1, &idx[i], 0, NULL) == 1, "insert %d", i);
    }
    fi_addr_t again = FI_ADDR_NOTAVAIL, src = FI_ADDR_NOTAVAIL;
    CHECK(fi_av_insert(a->av, b->name, 1, &again, 0, NULL) == 1 && again != 0, "b again");
    char in[8];
    struct fi_cq_tagged_entry e;
    fi_addr_t ba = 0;
    CHECK(fi_trecv(a->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x9000, 0, NULL) == 0, "trecv");
    CHECK(fi_tinject(b->ep, "hi", 3, ba, 0x9000) == 0, "tinject");
    CHECK(comp(a, &e, &src, 5000) == 1 && src == again, "src %llu want %llu", (unsigned long long)src,
          (unsigned long long)again);
    CHECK(fi_av_remove(a->av, &again, 1, 0) == 0, "remove");
    CHECK(fi_trecv(a->ep, in, sizeof in, NULL, again, 0x9000, 0, NULL) == -FI_EINVAL, "recv from a removed address");
    CHECK(fi_trecv(a->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x9000, 0, NULL) == 0, "trecv");
    CHECK(fi_tinject(b->ep, "hi", 3, ba, 0x9000) == 0, "tinject");
    CHECK(comp(a, &e, &src, 5000) == 1 && src == 0, "src %llu after remove", (unsigned long long)src);
    unsigned char got[64];
    size_t len = sizeof got;
    CHECK(fi_av_lookup(a->av, idx[77], got, &len) == 0 && len == 24 && got[22] == 77, "lookup");
    char str[80];
    len = sizeof str;
    fi_av_straddr(a->av, b->name, str, &len);
    CHECK(!strncmp(str, "smartt://127.0.0.2:", 19), "straddr %s", str);
    CHECK(fi_av_remove(a->av, idx, 3000, 0) == 0, "remove the rest");
}

/* test_flood: 300 unexpected messages behind a queue limit of 8 arrive in order, once. */
static void test_flood(node *a, node *b)
{
    fi_addr_t ab = 0;
    char buf[16];
    for (int i = 0; i < 300; i++) {
        snprintf(buf, sizeof buf, "%d", i);
        ssize_t r;
        while ((r = fi_tinject(a->ep, buf, sizeof buf, ab, 0x4000)) == -FI_EAGAIN)
            fi_cq_read(a->cq, NULL, 0);
        CHECK(r == 0, "inject %d: %zd", i, r);
    }
    struct fi_cq_tagged_entry e;
    for (int k = 0; k < 20; k++) /* progress while nothing is posted */
        fi_cq_read(b->cq, &e, 1);
    int ok = 0;
    for (int i = 0; i < 300; i++) {
        char in[16] = {0}, want[16];
        CHECK(fi_trecv(b->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x4000, 0, NULL) == 0, "trecv");
        int r = comp(b, &e, NULL, 10000);
        snprintf(want, sizeof want, "%d", i);
        ok += r == 1 && !strcmp(in, want);
        if (r != 1 || strcmp(in, want)) {
            CHECK(0, "message %d: r %d got %s", i, r, in);
            break;
        }
    }
    CHECK(ok == 300, "%d of 300 in order", ok);
    char x[16];
    CHECK(fi_trecv(b->ep, x, sizeof x, NULL, FI_ADDR_UNSPEC, 0x4000, 0, NULL) == 0 &&
          comp(b, &e, NULL, 500) == 0, "no duplicate");
    cancel_drain(b, NULL);
}

/* test_crash: a rank killed while streaming a 256 MiB message delivers nothing of it;
 * its next incarnation's message arrives once. */
static void test_crash(node *b, const char *sock_a)
{
    int go[2];
    CHECK(pipe(go) == 0, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        node c;
        if (node_open(&c, sock_a))
            _exit(3);
        fi_addr_t cb = add_peer(&c, b);
        size_t n = 256u << 20;
        char *p = malloc(n);
        memset(p, 'z', n);
        if (write(go[1], "g", 1) != 1)
            _exit(4);
        send_wait(&c, p, n, cb, 0x6000, NULL); /* killed while it is written */
        for (;;)
            fi_cq_read(c.cq, NULL, 0);
    }
    char g;
    CHECK(read(go[0], &g, 1) == 1, "the child started");
    close(go[0]);
    close(go[1]);
    usleep(150000); /* 256 MiB cannot cross the socket, daemons and engine this fast */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    char *in = malloc(256u << 20);
    struct fi_cq_tagged_entry e;
    CHECK(fi_trecv(b->ep, in, 256u << 20, NULL, FI_ADDR_UNSPEC, 0x6000, 0, NULL) == 0, "trecv");
    long long t0 = now_ms();
    int r = comp(b, &e, NULL, 3000);
    CHECK(r == 0, "nothing of the killed rank's message: %d", r);
    CHECK(now_ms() - t0 < 4000, "the wait ended at its timeout");
    pid = fork();
    if (pid == 0) {
        node c;
        if (node_open(&c, sock_a))
            _exit(3);
        fi_addr_t cb = add_peer(&c, b);
        int rr = send_wait(&c, "again", 6, cb, 0x6000, NULL);
        struct fi_cq_tagged_entry ce;
        _exit(rr || comp(&c, &ce, NULL, 10000) != 1);
    }
    int st = 0;
    r = comp(b, &e, NULL, 10000);
    waitpid(pid, &st, 0);
    CHECK(r == 1 && !strcmp(in, "again") && WIFEXITED(st) && !WEXITSTATUS(st), "after the crash %d", r);
    CHECK(fi_trecv(b->ep, in, 16, NULL, FI_ADDR_UNSPEC, 0x6000, 0, NULL) == 0 && comp(b, &e, NULL, 500) == 0,
          "delivered once");
    cancel_drain(b, NULL);
    free(in);
}

/* test_foreign: plain smartt messages without the provider's envelope (short, a bad
 * magic byte, bad flags) are discarded; the next provider message arrives. */
static void test_foreign(node *a, node *b)
{
    smartt_session *s = NULL;
    smartt_addr to;
    memcpy(to.addr, b->name, 16);
    to.port = (uint16_t)(b->name[16] << 8 | b->name[17]);
    to.endpoint = (uint32_t)b->name[20] << 24 | (uint32_t)b->name[21] << 16 | (uint32_t)b->name[22] << 8 | b->name[23];
    int r = smartt_open(&s, getenv("SMARTT_A_SOCK"), NULL);
    CHECK(r == 0, "smartt_open %d", r);
    if (r)
        return;
    CHECK(smartt_bind(s, 0, NULL, 5000) == 0, "bind");
    unsigned char bad[3][24] = {{1, 2, 3}, {0x00, 0, 0, 0}, {0xf1, 0x80, 0, 0}};
    size_t len[3] = {3, 24, 24};
    for (int i = 0; i < 3; i++)
        CHECK(smartt_send(s, &to, bad[i], len[i], NULL, 5000) == 0, "raw send %d", i);
    char in[8] = {0};
    struct fi_cq_tagged_entry e;
    CHECK(fi_trecv(b->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0, ~0ull, NULL) == 0, "trecv");
    CHECK(fi_recv(b->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, NULL) == 0, "recv");
    CHECK(comp(b, &e, NULL, 1000) == 0, "nothing of the foreign messages");
    CHECK(fi_inject(a->ep, "ok", 3, 0) == 0, "inject");
    CHECK(comp(b, &e, NULL, 5000) == 1 && !strcmp(in, "ok") && (e.flags & FI_MSG), "the real one");
    cancel_drain(b, NULL);
    smartt_close(s);
}

/* test_wait_fd: a CQ with an fd wait object gives a descriptor that becomes readable
 * when a message comes; fi_trywait says when it is safe to block. */
static void test_wait_fd(node *a, node *b)
{
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD};
    struct fid_cq *cq;
    CHECK(fi_cq_open(b->dom, &ca, &cq, NULL) == 0, "cq_open");
    int fd = -1;
    CHECK(fi_control(&cq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0, "getwait %d", fd);
    struct fid *f = &cq->fid;
    CHECK(fi_trywait(b->fab, &f, 1) == 0, "trywait on an empty CQ");
    fi_close(&cq->fid);
    (void)a;
}

/* test_threads: two threads send 500 messages each on one endpoint and read its CQ
 * concurrently (FI_THREAD_SAFE); each thread's messages arrive once, in order. */
typedef struct sender {
    node *n;
    fi_addr_t to;
    uint64_t tag;
    int comps;
} sender;

static void *send_thread(void *arg)
{
    sender *t = arg;
    for (uint32_t i = 0; i < 500; i++) {
        ssize_t r;
        while ((r = fi_tinject(t->n->ep, &i, sizeof i, t->to, t->tag)) == -FI_EAGAIN)
            fi_cq_read(t->n->cq, NULL, 0);
        if (r)
            return NULL;
        struct fi_cq_tagged_entry e;
        if (fi_cq_read(t->n->cq, &e, 1) == 1)
            t->comps++;
    }
    return t;
}

static void test_threads(node *a, node *b)
{
    sender t[2] = {{a, 0, 0xb000, 0}, {a, 0, 0xb001, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, send_thread, &t[i]);
    uint32_t next[2] = {0, 0}, v;
    int bad = 0;
    struct fi_cq_tagged_entry e;
    for (int k = 0; k < 1000 && !bad; k++) {
        CHECK(fi_trecv(b->ep, &v, sizeof v, NULL, FI_ADDR_UNSPEC, 0xb000, 1, NULL) == 0, "trecv");
        if (comp(b, &e, NULL, 10000) != 1) {
            bad = 1;
            break;
        }
        int w = (int)(e.tag & 1);
        bad = v != next[w]++;
    }
    void *ok[2];
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], &ok[i]);
    CHECK(!bad && next[0] == 500 && next[1] == 500 && ok[0] && ok[1], "in order: %u %u", next[0], next[1]);
    CHECK(comp(b, &e, NULL, 300) == 0, "nothing more");
    while (fi_cq_read(a->cq, &e, 1) > 0) /* injects complete nothing: the CQ stays empty */
        t[0].comps++;
    CHECK(t[0].comps + t[1].comps == 0, "no completions for injects: %d", t[0].comps + t[1].comps);
}

/* test_cancel_send: a small send queued behind a 64 MiB one and cancelled at once
 * either completes (in flight) or ends in FI_ECANCELED, never FI_EIO; the receiver
 * gets it exactly when it completed; the big one completes. */
static void test_cancel_send(node *a, node *b)
{
    fi_addr_t ab = 0;
    size_t n = 64u << 20;
    char *big = calloc(1, n), *bin = malloc(n), small[8] = "small", in[8] = {0};
    struct fi_context cb, cs;
    struct fi_cq_tagged_entry e;
    CHECK(send_wait(a, big, n, ab, 0xc000, &cb) == 0, "big");
    CHECK(send_wait(a, small, 6, ab, 0xc001, &cs) == 0, "small");
    ssize_t c = fi_cancel(&a->ep->fid, &cs);
    CHECK(c == 0 || c == -FI_ENOENT, "cancel %zd", c);
    int big_ok = 0, small_ok = 0, small_cancelled = 0;
    for (int i = 0; i < 2; i++) {
        int r = comp(a, &e, NULL, 30000);
        void *ctx = r == 1 ? e.op_context : last_err.op_context;
        if (ctx == &cb)
            big_ok += r == 1;
        else if (ctx == &cs)
            small_ok += r == 1, small_cancelled += r == -FI_ECANCELED;
        CHECK(r == 1 || r == -FI_ECANCELED, "completion %d", r);
    }
    CHECK(big_ok == 1 && small_ok + small_cancelled == 1, "big %d small %d cancelled %d", big_ok, small_ok,
          small_cancelled);
    CHECK(fi_trecv(b->ep, bin, n, NULL, FI_ADDR_UNSPEC, 0xc000, 0, NULL) == 0, "trecv big");
    CHECK(comp(b, &e, NULL, 30000) == 1 && e.len == n, "big arrives");
    CHECK(fi_trecv(b->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0xc001, 0, NULL) == 0, "trecv small");
    int r = comp(b, &e, NULL, small_ok ? 10000 : 1000);
    CHECK(small_ok ? r == 1 && !strcmp(in, "small") : r == 0, "small arrived %d, completed %d", r, small_ok);
    if (!small_ok)
        cancel_drain(b, NULL);
    printf("  send cancel: %s\n", small_cancelled ? "cancelled" : "was in flight");
    free(big);
    free(bin);
}

/* test_stalled: a receiver that stops progressing holds 160 MiB back at the sender
 * (the sender's sread times out, nothing hangs), then takes every message once. */
static void test_stalled(node *a, node *b)
{
    setenv("SMARTT_FI_DELIVERY", "1", 1);
    node s;
    int r = node_open(&s, getenv("SMARTT_A_SOCK"));
    unsetenv("SMARTT_FI_DELIVERY");
    CHECK(r == 0, "open %d", r);
    (void)a;
    fi_addr_t sb = add_peer(&s, b);
    add_peer(b, &s);
    size_t n = 4u << 20;
    int count = 40;
    unsigned char *p = malloc(n), *in = malloc(n);
    int posted = 0, done = 0, fails_tx = 0;
    struct fi_cq_tagged_entry e;
    long long t0 = now_ms();
    while (posted < count && now_ms() - t0 < 20000) {
        memset(p, posted, n);
        ssize_t x = fi_tsend(s.ep, p, n, NULL, sb, 0x7000 + (uint64_t)posted, NULL);
        if (x == -FI_EAGAIN) {
            int c = comp(&s, &e, NULL, 10);
            done += c == 1, fails_tx += c < 0;
            continue;
        }
        CHECK(x == 0, "tsend %zd", x);
        posted++;
    }
    int c;
    while ((c = comp(&s, &e, NULL, 1500)) != 0)
        done += c == 1, fails_tx += c < 0;
    CHECK(done < count && fails_tx == 0, "the stalled receiver held sends back: %d of %d complete", done, count);
    int ok = 0;
    for (int i = 0; i < posted; i++) {
        CHECK(fi_trecv(b->ep, in, n, NULL, FI_ADDR_UNSPEC, 0x7000 + (uint64_t)i, 0, NULL) == 0, "trecv");
        r = comp(b, &e, NULL, 20000);
        ok += r == 1 && in[0] == (unsigned char)i && in[n - 1] == (unsigned char)i;
        while ((c = comp(&s, &e, NULL, 0)) != 0)
            done += c == 1;
    }
    while (done < posted && (c = comp(&s, &e, NULL, 5000)) != 0)
        done += c == 1;
    CHECK(ok == posted && done == posted, "%d of %d received, %d sends complete", ok, posted, done);
    node_close(&s);
    free(p);
    free(in);
}

/* ---- a daemon of the test's own, to kill ---- */

static pid_t start_daemon(const char *dir, const char *sock, int port, const char *extra)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s/own.yaml", dir);
    FILE *f = fopen(cfg, "w");
    if (!f)
        return -1;
    fprintf(f, "listen: 127.0.0.3:%d\nlog_level: warn\nmetrics: \"\"\napi:\n  socket: %s\n%s", port, sock, extra);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        execl(getenv("SMARTTD"), "smarttd", "-config", cfg, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        if (ok)
            return pid;
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* tsend_dc sends with delivery completion. */
static int tsend_dc(node *n, const char *msg, fi_addr_t to, uint64_t tag, void *ctx)
{
    struct iovec iov = {(void *)msg, strlen(msg) + 1};
    struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = to, .tag = tag, .context = ctx};
    return (int)fi_tsendmsg(n->ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION);
}

/* test_daemon_restart: a daemon dies and comes back. Its own endpoint's posted
 * receive ends in FI_EIO within 2 s and new sends are refused; a peer's
 * delivery-complete send to it ends in an error completion within 15 s (the
 * engine's 5 s idle timeout, or a RESET); after the restart new endpoints work and
 * nothing sent before is delivered. */
static void test_daemon_restart(node *a)
{
    char dir[] = "/tmp/sfi-test-XXXXXX", sock[300];
    if (!mkdtemp(dir) || !getenv("SMARTTD")) {
        CHECK(0, "no SMARTTD or temporary directory");
        return;
    }
    snprintf(sock, sizeof sock, "%s/own.sock", dir);
    int port = 30000 + getpid() % 20000;
    pid_t d = start_daemon(dir, sock, port, "");
    CHECK(d > 0, "own daemon");
    if (d <= 0)
        return;
    node o;
    int r = node_open(&o, sock);
    CHECK(r == 0, "open on own daemon %d", r);
    fi_addr_t ao = add_peer(a, &o);
    char in[16];
    struct fi_context rc, sc;
    struct fi_cq_tagged_entry e;
    CHECK(fi_trecv(o.ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x8000, 0, NULL) == 0, "trecv");
    CHECK(tsend_dc(a, "first", ao, 0x8000, &sc) == 0, "send first");
    CHECK(comp(&o, &e, NULL, 10000) == 1 && !strcmp(in, "first"), "first arrives");
    CHECK(comp(a, &e, NULL, 10000) == 1 && e.op_context == &sc, "first delivered");
    CHECK(fi_trecv(o.ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 1, 0, &rc) == 0, "trecv");
    kill(d, SIGKILL);
    waitpid(d, NULL, 0);
    long long t0 = now_ms();
    r = 0;
    while (now_ms() - t0 < 2000 && r >= 0)
        r = comp(&o, &e, NULL, 100);
    CHECK(r == -FI_EIO && last_err.op_context == &rc, "own daemon gone: %d after %lld ms", r, now_ms() - t0);
    CHECK(fi_tinject(o.ep, "x", 1, 0, 1) < 0, "sends fail on a dead session");
    node_close(&o);
    CHECK(tsend_dc(a, "lost", ao, 0x8000, &sc) == 0, "send to the dead daemon");
    t0 = now_ms();
    r = comp(a, &e, NULL, 15000);
    printf("  peer daemon down: send error after %lld ms\n", now_ms() - t0);
    CHECK(r < 0 && last_err.op_context == &sc, "the peer's send fails: %d", r);
    d = start_daemon(dir, sock, port, "");
    CHECK(d > 0, "restarted");
    r = node_open(&o, sock);
    CHECK(r == 0, "open after restart %d", r);
    fi_addr_t ao2 = add_peer(a, &o);
    CHECK(fi_trecv(o.ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x8000, 0, NULL) == 0, "trecv");
    CHECK(tsend_dc(a, "fresh", ao2, 0x8000, &sc) == 0, "send after restart");
    r = comp(&o, &e, NULL, 15000);
    CHECK(r == 1 && !strcmp(in, "fresh"), "after restart: %d %s", r, in);
    r = comp(a, &e, NULL, 15000);
    CHECK(r == 1, "fresh delivered: %d", r);
    CHECK(fi_trecv(o.ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x8000, 0, NULL) == 0 && comp(&o, &e, NULL, 500) == 0,
          "nothing delivered twice");
    node_close(&o);
    kill(d, SIGTERM);
    waitpid(d, NULL, 0);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* test_unordered: a daemon that delivers out of order offers no FI_ORDER_SAS, and a
 * request for it finds no provider. */
static void test_unordered(void)
{
    char dir[] = "/tmp/sfi-test-XXXXXX", sock[300];
    if (!mkdtemp(dir) || !getenv("SMARTTD")) {
        CHECK(0, "no SMARTTD or temporary directory");
        return;
    }
    snprintf(sock, sizeof sock, "%s/own.sock", dir);
    pid_t d = start_daemon(dir, sock, 30000 + (getpid() + 7) % 20000, "transport:\n  unordered: true\n");
    CHECK(d > 0, "unordered daemon");
    if (d > 0) {
        char *old = getenv("SMARTT_SOCKET") ? strdup(getenv("SMARTT_SOCKET")) : NULL;
        setenv("SMARTT_SOCKET", sock, 1);
        struct fi_info *h = hints(), *out = NULL;
        CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &out) == -FI_ENODATA, "FI_ORDER_SAS refused");
        h->tx_attr->msg_order = 0;
        CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &out) == 0 && out->tx_attr->msg_order == 0,
              "offered without ordering");
        if (out)
            fi_freeinfo(out);
        fi_freeinfo(h);
        if (old) {
            setenv("SMARTT_SOCKET", old, 1);
            free(old);
        }
        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}


/* ---- segmented messages ---- */

static unsigned char pat(size_t i, unsigned seed)
{
    return (unsigned char)(i * 7 + seed + (i >> 12));
}

static int pat_ok(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(i, seed))
            return 0;
    return 1;
}

static unsigned char *pat_buf(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n);
    for (size_t i = 0; p && i < n; i++)
        p[i] = pat(i, seed);
    return p;
}

/* node_open_env opens a node with environment variable k set to v for its endpoint. */
static int node_open_env(node *n, const char *sock, const char *k, const char *v)
{
    setenv(k, v, 1);
    int r = node_open(n, sock);
    unsetenv(k);
    return r;
}

/* seg_raw sends a hand-made segment (40-byte envelope, then len bytes) to `to`. */
static int seg_raw(smartt_session *s, const smartt_addr *to, unsigned flags, uint32_t id, uint64_t total,
                   uint64_t off, size_t len)
{
    unsigned char m[40 + 1024] = {0xf1, (unsigned char)(1u | 4u | flags)};
    for (int i = 0; i < 8; i++)
        m[8 + i] = (unsigned char)(0x7300ull >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        m[16 + i] = (unsigned char)(id >> (24 - 8 * i));
    for (int i = 0; i < 8; i++) {
        m[24 + i] = (unsigned char)(total >> (56 - 8 * i));
        m[32 + i] = (unsigned char)(off >> (56 - 8 * i));
    }
    return smartt_send(s, to, m, 40 + len, NULL, 5000);
}

static void addr_of(smartt_addr *to, const node *n)
{
    memcpy(to->addr, n->name, 16);
    to->port = (uint16_t)(n->name[16] << 8 | n->name[17]);
    to->endpoint = (uint32_t)n->name[20] << 24 | (uint32_t)n->name[21] << 16 | (uint32_t)n->name[22] << 8 | n->name[23];
}

/* seg_hostile: segments with a gap, an abort, a sender gone silent: each ends the
 * posted receive in an error completion (never success), and r goes on working. */
static void seg_hostile(node *r)
{
    smartt_session *s = NULL;
    smartt_addr to;
    addr_of(&to, r);
    CHECK(smartt_open(&s, getenv("SMARTT_A_SOCK"), NULL) == 0 && smartt_bind(s, 0, NULL, 5000) == 0, "raw session");
    if (!s)
        return;
    char in[4096];
    struct fi_cq_tagged_entry e;
    struct fi_context cx;
    CHECK(fi_trecv(r->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x7300, 0, &cx) == 0, "trecv");
    CHECK(seg_raw(s, &to, 0, 5, 3000, 0, 1000) == 0 && seg_raw(s, &to, 0, 5, 3000, 2000, 1000) == 0, "gap");
    CHECK(comp(r, &e, NULL, 5000) == -FI_EIO && last_err.op_context == &cx, "a gap fails the receive");
    CHECK(fi_trecv(r->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x7300, 0, &cx) == 0, "trecv");
    CHECK(seg_raw(s, &to, 0, 6, 2000, 0, 1000) == 0 && seg_raw(s, &to, 8, 6, 2000, 1000, 0) == 0, "abort");
    CHECK(comp(r, &e, NULL, 5000) == -FI_EIO && last_err.op_context == &cx, "an abort fails the receive");
    CHECK(fi_trecv(r->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x7300, 0, &cx) == 0, "trecv");
    long long t0 = now_ms();
    CHECK(seg_raw(s, &to, 0, 7, 2000, 0, 1000) == 0, "first segment only");
    int got = comp(r, &e, NULL, 10000);
    CHECK(got == -FI_ETIMEDOUT && now_ms() - t0 >= 1000, "a silent sender times out: %d after %lld ms", got,
          now_ms() - t0);
    CHECK(fi_trecv(r->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x7300, 0, &cx) == 0, "trecv");
    CHECK(seg_raw(s, &to, 0, 8, 1500, 0, 1000) == 0 && seg_raw(s, &to, 0, 8, 1500, 1000, 500) == 0, "whole");
    CHECK(comp(r, &e, NULL, 5000) == 1 && e.len == 1500 && e.op_context == &cx, "a whole one completes");
    smartt_close(s);
}

/* seg_roundtrip: s sends n bytes of pattern seed to r (posted first, or unexpected
 * and peeked), and r gets them whole, with tag and CQ data. */
static void seg_roundtrip(node *s, node *r, size_t n, unsigned seed, int unexpected)
{
    fi_addr_t sr = add_peer(s, r);
    unsigned char *out = pat_buf(n, seed), *in = calloc(1, n + 64);
    struct fi_context cs, cr;
    struct fi_cq_tagged_entry e;
    if (!unexpected)
        CHECK(fi_trecv(r->ep, in, n + 64, NULL, FI_ADDR_UNSPEC, 0x7100 + seed, 0, &cr) == 0, "trecv");
    CHECK(send_wait(s, out, n, sr, 0x7100 + seed, &cs) == 0, "send");
    if (unexpected) {
        struct iovec iov = {in, n + 64};
        struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 0x7100 + seed,
                                  .context = &cr};
        int got = 0;
        for (long long dl = now_ms() + 10000; got != 1 && now_ms() < dl;) {
            fi_cq_read(s->cq, NULL, 0); /* the sender's progress sends the later segments */
            CHECK(fi_trecvmsg(r->ep, &m, FI_PEEK) == 0, "peek");
            got = comp(r, &e, NULL, 200);
        }
        CHECK(got == 1 && e.len == n, "peek says the whole length: %d %zu", got, e.len);
        CHECK(fi_trecv(r->ep, in, n + 64, NULL, FI_ADDR_UNSPEC, 0x7100 + seed, 0, &cr) == 0, "trecv");
    }
    int rs = 0, rr = 0;
    for (long long dl = now_ms() + 20000; (rs != 1 || rr != 1) && now_ms() < dl;) {
        if (rs != 1)
            rs = comp(s, &e, NULL, 10);
        if (rr != 1 && (rr = comp(r, &e, NULL, 10)) == 1)
            CHECK(e.len == n && e.tag == 0x7100 + seed && e.op_context == &cr, "recv completion %zu", e.len);
    }
    CHECK(rs == 1 && rr == 1, "both complete: %d %d", rs, rr);
    CHECK(pat_ok(in, n, seed) && in[n] == 0, "the bytes arrive whole and in place");
    free(out);
    free(in);
}

/* counter reads the daemon's API counter key ("msgs_memfd") from GET /v1/counters. */
static long long counter(const char *sock, const char *key)
{
    char *body = NULL, want[64];
    long long v = -1;
    snprintf(want, sizeof want, "\"%s\":", key);
    if (smartt_get(sock, "/v1/counters", &body, 5000) == 200 && body) {
        const char *p = strstr(body, want);
        if (p)
            v = strtoll(p + strlen(want), NULL, 10);
    }
    free(body);
    return v;
}

/* test_large: messages of 1 to 5 MiB arrive whole, expected and unexpected: a's daemon
 * took them as memfds (memfds reused) and b's daemon wrote them into b's ring. */
static void test_large(node *a, node *b)
{
    const char *sa = getenv("SMARTT_A_SOCK"), *sb = getenv("SMARTT_B_SOCK");
    long long fd0 = counter(sa, "msgs_memfd"), ring0 = counter(sb, "ring_msgs");
    seg_roundtrip(a, b, (1u << 20) + 123, 6, 0);
    seg_roundtrip(a, b, (5u << 20) + 7, 7, 1);
    seg_roundtrip(a, b, 3u << 20, 8, 0);
    seg_roundtrip(a, b, 2u << 20, 9, 0);
    long long fd1 = counter(sa, "msgs_memfd"), ring1 = counter(sb, "ring_msgs");
    CHECK(fd0 >= 0 && fd1 - fd0 == 4, "sent as memfds: %lld", fd1 - fd0);
    CHECK(ring0 >= 0 && ring1 - ring0 >= 2, "received through the ring: %lld", ring1 - ring0);
}

/* test_segments: a daemon whose api.max_message is 256 KiB refuses a 1 MiB message
 * sent whole; with SMARTT_FI_SEGMENT 64 KiB the provider sends it (and larger ones) as
 * segments, reassembled into the posted buffer, expected or unexpected; truncation and
 * hostile segments end in error completions. */
static void test_segments(node *b)
{
    char dir[] = "/tmp/sfi-test-XXXXXX", sock[300];
    if (!mkdtemp(dir) || !getenv("SMARTTD")) {
        CHECK(0, "no SMARTTD or temporary directory");
        return;
    }
    snprintf(sock, sizeof sock, "%s/own.sock", dir);
    pid_t d = start_daemon(dir, sock, 30000 + (getpid() + 13) % 20000, "  max_message: 262144\n");
    CHECK(d > 0, "own daemon");
    node w = {0}, s = {0}, r = {0};
    struct fi_cq_tagged_entry e;
    if (d > 0 && node_open_env(&w, sock, "SMARTT_FI_SEGMENT", "1048576") == 0) {
        unsigned char *big = pat_buf(1u << 20, 1);
        CHECK(send_wait(&w, big, 1u << 20, add_peer(&w, b), 0x7000, NULL) == 0, "send whole");
        CHECK(comp(&w, &e, NULL, 10000) == -FI_EMSGSIZE, "the daemon's limit: %d %d %s", last_err.err, last_err.prov_errno, "");
        free(big);
        node_close(&w);
    }
    int ok = d > 0 && node_open_env(&s, sock, "SMARTT_FI_SEGMENT", "65536") == 0 &&
             node_open_env(&r, getenv("SMARTT_B_SOCK"), "SMARTT_FI_SEG_TIMEOUT", "1500") == 0;
    CHECK(ok, "segmenting nodes");
    if (ok) {
        seg_roundtrip(&s, &r, (1u << 20) + 123, 2, 0);
        seg_roundtrip(&s, &r, (700u << 10) + 5, 3, 1);
        seg_roundtrip(&s, &r, 3u << 20, 4, 0);
        /* truncation: the receive gets what fits and FI_ETRUNC */
        unsigned char *out = pat_buf(300u << 10, 5), *in = malloc(100u << 10);
        CHECK(fi_trecv(r.ep, in, 100u << 10, NULL, FI_ADDR_UNSPEC, 0x7200, 0, NULL) == 0, "short trecv");
        CHECK(send_wait(&s, out, 300u << 10, add_peer(&s, &r), 0x7200, NULL) == 0, "send");
        int got = 0;
        for (long long dl = now_ms() + 10000; got == 0 && now_ms() < dl;) {
            fi_cq_read(s.cq, NULL, 0);
            got = comp(&r, &e, NULL, 10);
        }
        CHECK(got == -FI_ETRUNC && last_err.len == (100u << 10) && last_err.olen == (200u << 10) &&
              pat_ok(in, 100u << 10, 5), "truncated: %d %zu %zu", got, last_err.len, last_err.olen);
        free(out);
        free(in);
        seg_hostile(&r);
    }
    node_close(&s);
    node_close(&r);
    if (d > 0) {
        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* test_dead_peer: a send to a killed peer over its pair ends in an error completion
 * (fi_cq_readerr, FI_EIO), not a silent success; messages before it arrived. */
static void test_dead_peer(node *x, const char *sa)
{
    int up[2], go[2];
    CHECK(pipe(up) == 0 && pipe(go) == 0, "pipes");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        node c;
        if (node_open(&c, sa))
            _exit(3);
        fi_addr_t cx = add_peer(&c, x);
        struct fi_cq_tagged_entry ce;
        char in[8];
        if (send_wait(&c, "hi", 3, cx, 0x7000, NULL) || comp(&c, &ce, NULL, 10000) != 1 ||
            fi_trecv(c.ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x7001, 0, NULL) ||
            write(up[1], c.name, c.namelen) != (ssize_t)c.namelen)
            _exit(4);
        for (;;) /* receives x's message, then waits to be killed */
            fi_cq_read(c.cq, &ce, 1);
    }
    node c = {0};
    c.namelen = (size_t)read(up[0], c.name, sizeof c.name);
    char in[8] = {0};
    struct fi_cq_tagged_entry e;
    CHECK(fi_trecv(x->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 0x7000, 0, NULL) == 0, "trecv");
    CHECK(comp(x, &e, NULL, 10000) == 1 && !strcmp(in, "hi"), "the peer's message");
    fi_addr_t xc = add_peer(x, &c);
    for (int i = 0; i < 2; i++) /* the first through the daemon, then the pair */
        CHECK(send_wait(x, "yo", 3, xc, 0x7001, NULL) == 0 && comp(x, &e, NULL, 10000) == 1, "to the peer");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    struct fi_context ctx;
    CHECK(send_wait(x, "lost", 5, xc, 0x7001, &ctx) == 0, "send to the killed peer");
    long long t0 = now_ms();
    int r = comp(x, &e, NULL, 5000);
    CHECK(r == -FI_EIO && last_err.op_context == &ctx, "error completion: %d", r);
    CHECK(now_ms() - t0 < 5000, "at once");
    close(up[0]), close(up[1]), close(go[0]), close(go[1]);
}

/* test_direct: two endpoints of one daemon talk over the direct path (the daemon made a
 * pair): tagged with PEEK/CLAIM/DISCARD, cancel and truncation, multi-receive, a flood
 * through a small unexpected queue, a rank killed mid-message (nothing of it, then its
 * next incarnation's message once), a killed peer's error completion, segmented
 * messages expected and unexpected; and with SMARTT_FI_DIRECT=0 no pair is made. */
/* A large send over a pair goes from the caller's buffer (libsmartt borrows what the
 * socket does not take at once): its completion comes only once all of it is written,
 * so zeroing the buffer at the completion changes nothing the receiver gets. */
static void test_borrow(node *s, node *r)
{
    size_t n = 32u << 20;
    fi_addr_t sr = add_peer(s, r);
    unsigned char *out = pat_buf(n, 31), *in = calloc(1, n);
    struct fi_context cs, cr;
    struct fi_cq_tagged_entry e;
    CHECK(out && in && send_wait(s, out, n, sr, 0x7300, &cs) == 0, "send");
    CHECK(fi_trecv(r->ep, in, n, NULL, FI_ADDR_UNSPEC, 0x7300, 0, &cr) == 0, "trecv");
    int rs = 0, rr = 0;
    for (long long dl = now_ms() + 20000; (rs != 1 || rr != 1) && now_ms() < dl;) {
        if (rs != 1 && (rs = comp(s, &e, NULL, 10)) == 1)
            memset(out, 0, n); /* the completion gives the buffer back */
        if (rr != 1)
            rr = comp(r, &e, NULL, 10);
    }
    CHECK(rs == 1 && rr == 1, "both complete: %d %d", rs, rr);
    CHECK(pat_ok(in, n, 31), "the bytes sent are the ones the buffer held at the send");
    free(out);
    free(in);
}

/* Placement over a pair: two posted tagged receives get the two 1 MiB messages that
 * match them, sent in the other order, straight into their buffers, with their tags,
 * remote CQ data and source; a posted receive too small for its message ends in a
 * truncation error. */
static void test_place(node *s, node *r)
{
    size_t n = 1u << 20;
    fi_addr_t sr = add_peer(s, r), rs = add_peer(r, s);
    unsigned char *o1 = pat_buf(n, 41), *o2 = pat_buf(n, 42), *i1 = calloc(1, n), *i2 = calloc(1, n);
    struct fi_context c1, c2, cs[2];
    struct fi_cq_tagged_entry e;
    fi_addr_t src = 0;
    CHECK(fi_trecv(r->ep, i1, n, NULL, FI_ADDR_UNSPEC, 0x7401, 0, &c1) == 0, "trecv 1");
    CHECK(fi_trecv(r->ep, i2, n, NULL, rs, 0x7402, 0, &c2) == 0, "trecv 2");
    ssize_t w;
    while ((w = fi_tsenddata(s->ep, o2, n, NULL, 0x22, sr, 0x7402, &cs[0])) == -FI_EAGAIN)
        fi_cq_read(s->cq, &e, 0);
    CHECK(w == 0, "senddata 2");
    CHECK(send_wait(s, o1, n, sr, 0x7401, &cs[1]) == 0, "send 1");
    int got = 0, sent = 0;
    for (long long dl = now_ms() + 20000; (got < 2 || sent < 2) && now_ms() < dl;) {
        if (sent < 2 && comp(s, &e, NULL, 10) == 1)
            sent++;
        if (got < 2 && comp(r, &e, &src, 10) == 1) {
            got++;
            int two = e.op_context == &c2;
            CHECK(e.len == n && e.tag == (two ? 0x7402u : 0x7401u) && e.buf == (two ? i2 : i1) &&
                      src == rs && (!two || (e.data == 0x22 && (e.flags & FI_REMOTE_CQ_DATA))),
                  "completion %d: len %zu tag %llx", two, e.len, (unsigned long long)e.tag);
        }
    }
    CHECK(got == 2 && sent == 2, "all complete: %d %d", got, sent);
    CHECK(pat_ok(i1, n, 41) && pat_ok(i2, n, 42), "each in its own buffer");
    CHECK(fi_trecv(r->ep, i1, n / 2, NULL, FI_ADDR_UNSPEC, 0x7403, 0, &c1) == 0, "trecv small");
    CHECK(send_wait(s, o1, n, sr, 0x7403, &cs[0]) == 0, "send large");
    int rr = 0;
    for (long long dl = now_ms() + 20000; rr == 0 && now_ms() < dl;) {
        fi_cq_read(s->cq, &e, 0);
        rr = comp(r, &e, NULL, 10);
    }
    CHECK(rr == -FI_ETRUNC && last_err.olen == n / 2, "truncated: %d olen %zu", rr, last_err.olen);
    comp(s, &e, NULL, 1000);
    free(o1), free(o2), free(i1), free(i2);
}

/* A message being placed into a posted receive whose sender is killed in its middle:
 * the receive is posted again, gets nothing of it, and takes the next matching
 * message, once. */
static void test_place_cut(node *b, const char *sock)
{
    size_t n = 256u << 20;
    char *in = malloc(n), small[16];
    struct fi_context cb, cs;
    struct fi_cq_tagged_entry e;
    CHECK(in && fi_trecv(b->ep, in, n, NULL, FI_ADDR_UNSPEC, 0x6100, 0, &cb) == 0, "trecv");
    CHECK(fi_trecv(b->ep, small, sizeof small, NULL, FI_ADDR_UNSPEC, 0x6101, 0, &cs) == 0, "trecv small");
    int go[2];
    CHECK(pipe(go) == 0, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        node c;
        if (node_open(&c, sock))
            _exit(3);
        fi_addr_t to = add_peer(&c, b);
        struct fi_cq_tagged_entry ce;
        if (send_wait(&c, "first", 6, to, 0x6101, NULL) || comp(&c, &ce, NULL, 10000) != 1)
            _exit(4); /* through the daemon: the pair is asked for meanwhile */
        char *p = malloc(n);
        memset(p, 'z', n);
        if (write(go[1], "g", 1) != 1)
            _exit(5);
        send_wait(&c, p, n, to, 0x6100, NULL); /* over the pair, killed while written */
        for (;;)
            fi_cq_read(c.cq, NULL, 0);
    }
    char g;
    CHECK(read(go[0], &g, 1) == 1, "the child started");
    CHECK(comp(b, &e, NULL, 10000) == 1 && e.op_context == &cs, "the first message");
    usleep(100000); /* the child fills the pair's socket, which b does not read yet */
    kill(pid, SIGKILL); /* b then reads the start (placed), the rest, and the end */
    waitpid(pid, NULL, 0);
    close(go[0]), close(go[1]);
    int r0 = comp(b, &e, NULL, 2000);
    CHECK(r0 == 0, "nothing of the killed rank's message: %d (err %d, len %zu, ctx %s)", r0, last_err.err,
          e.len, e.op_context == &cb ? "the big receive" : "another");
    pid = fork();
    if (pid == 0) {
        node c;
        if (node_open(&c, sock))
            _exit(3);
        fi_addr_t to = add_peer(&c, b);
        struct fi_cq_tagged_entry ce;
        _exit(send_wait(&c, "again", 6, to, 0x6100, NULL) || comp(&c, &ce, NULL, 10000) != 1);
    }
    int st = 0, r = comp(b, &e, NULL, 10000);
    waitpid(pid, &st, 0);
    CHECK(r == 1 && e.op_context == &cb && e.len == 6 && !strcmp(in, "again") && WIFEXITED(st) &&
              !WEXITSTATUS(st), "the receive posted again took the next message: %d", r);
    CHECK(comp(b, &e, NULL, 300) == 0, "delivered once");
    free(in);
}

static void test_direct(const char *sa)
{
    long long p0 = counter(sa, "direct_pairs");
    node x, y;
    int r = node_open(&x, sa);
    CHECK(r == 0, "node x %d", r);
    CHECK((r = node_open(&y, sa)) == 0, "node y %d", r);
    if (fails)
        return;
    test_tagged(&x, &y);
    test_multi_recv(&x, &y);
    test_flood(&x, &y);
    test_borrow(&x, &y);
    test_borrow(&y, &x);
    test_place(&x, &y);
    long long p1 = counter(sa, "direct_pairs");
    CHECK(p1 - p0 == 1, "one pair for both ways: %lld", p1 - p0);
    test_crash(&y, sa);
    test_place_cut(&y, sa);
    test_dead_peer(&x, sa);
    node_close(&x);
    node_close(&y);
    /* segments over the pair: 64 KiB segments, expected and unexpected */
    CHECK(node_open_env(&x, sa, "SMARTT_FI_SEGMENT", "65536") == 0 &&
          node_open_env(&y, sa, "SMARTT_FI_SEGMENT", "65536") == 0, "segmenting nodes");
    seg_roundtrip(&x, &y, (1u << 20) + 77, 21, 0);
    seg_roundtrip(&x, &y, (3u << 20) + 5, 22, 1);
    node_close(&x);
    node_close(&y);
    setenv("SMARTT_FI_DIRECT", "0", 1);
    CHECK(node_open(&x, sa) == 0 && node_open(&y, sa) == 0, "nodes without");
    p1 = counter(sa, "direct_pairs");
    add_peer(&x, &y);
    test_flood(&x, &y);
    CHECK(counter(sa, "direct_pairs") == p1, "SMARTT_FI_DIRECT=0: no pair");
    unsetenv("SMARTT_FI_DIRECT");
    node_close(&x);
    node_close(&y);
}

int main(void)
{
    const char *sa = getenv("SMARTT_A_SOCK"), *sb = getenv("SMARTT_B_SOCK");
    if (!sa || !sb) {
        fprintf(stderr, "test_fi: run inside python/tests/daemons.py\n");
        return 2;
    }
    setenv("SMARTT_FI_UX_MAX", "8", 1); /* a small unexpected queue: the daemon holds the rest */
    node a, b;
    int r = node_open(&a, sa);
    CHECK(r == 0, "node a: %s", fi_strerror(-r));
    r = node_open(&b, sb);
    CHECK(r == 0, "node b: %s", fi_strerror(-r));
    if (fails)
        return 1;
    struct { const char *name; int before; } t;
#define RUN(x, ...) do { t.name = #x; t.before = fails; long long t0 = now_ms(); x(__VA_ARGS__); \
        printf("%-20s %s (%lld ms)\n", t.name, fails == t.before ? "ok" : "FAILED", now_ms() - t0); \
        fflush(stdout); } while (0)
    RUN(test_unsupported, &a);
    RUN(test_tagged, &a, &b);
    RUN(test_multi_recv, &a, &b);
    RUN(test_flood, &a, &b);
    RUN(test_av, &a, &b);
    RUN(test_foreign, &a, &b);
    RUN(test_wait_fd, &a, &b);
    RUN(test_threads, &a, &b);
    RUN(test_cancel_send, &a, &b);
    RUN(test_crash, &b, sa);
    RUN(test_stalled, &a, &b);
    RUN(test_daemon_restart, &a);
    RUN(test_unordered);
    RUN(test_large, &a, &b);
    RUN(test_segments, &b);
    RUN(test_direct, sa);
    node_close(&a);
    node_close(&b);
    printf("test_fi: %d failures\n", fails);
    return fails != 0;
}
