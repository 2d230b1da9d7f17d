/* libsmartt: the direct path (docs/api.md, "Direct path"). Messages to an endpoint of
 * the same daemon go over a Unix socket pair the daemon hands to both sessions. The
 * first send to a destination asks the daemon (Direct) and answers SMARTT_EAGAIN until
 * the answer came; nothing more goes through the daemon to a destination once it was
 * asked for, so the receiver gets what came through the daemon first (it starts reading
 * the pair at the DirectPeer frame, which the daemon queues behind those messages).
 * Everything read from a pair is untrusted: a malformed header or an oversized message
 * ends that pair (not the session), counted. */
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

struct sm_pair {
    uint64_t id;
    int fd;            /* -1 once ended */
    size_t idx;        /* in s->pairs: the epoll key is idx + 1 */
    int reading;       /* DirectPeer came: the peer writes to us */
    int backed;        /* bytes wait to be written (counted in s->backed_pairs) */
    int wdead;         /* a write failed: read what the peer wrote before it went, then end */
    int paused;        /* its next message waits for the receive budget (not read meanwhile) */
    int placed;        /* msg is the placer's buffer (not charged, not ours to free) */
    uint32_t events;   /* registered epoll events (0: not registered) */
    smartt_addr from;  /* the sender, as DirectPeer named it */
    uint32_t ep;       /* our endpoint */
    /* output: bytes not yet written, and the messages they end */
    unsigned char *out;
    size_t out_len, out_head, out_cap;
    uint64_t written, queued; /* stream offsets */
    struct pend { uint64_t end; uint32_t tag; } *pend;
    size_t npend, pend_cap;
    /* a message's unwritten rest borrowed from the application (smartt_sendv_direct):
     * it goes before out's bytes; bhdr is its header */
    unsigned char bhdr[PAIR_HDR];
    struct iovec bv[SMARTT_IOV_MAX + 1];
    int nbv, bvi;
    uint64_t bleft;
    /* input: buffered bytes, and the message being read */
    unsigned char *in;
    size_t in_len;
    unsigned char *msg;
    uint64_t msg_size, msg_got;
};

/* ---- descriptors from the daemon ---- */

ssize_t sm_read(smartt_session *s, struct iovec *iov, int n)
{
    union { char b[CMSG_SPACE(sizeof(int) * 8)]; struct cmsghdr align; } c;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n, .msg_control = c.b,
                       .msg_controllen = sizeof c.b};
    ssize_t r = recvmsg(s->fd, &m, MSG_CMSG_CLOEXEC);
    if (r < 0 || !m.msg_controllen)
        return r;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof fd, sizeof fd);
            if (s->direct && s->nfds_in < MAX_FDS_IN)
                s->fds_in[s->nfds_in++] = fd;
            else
                close(fd); /* nobody asked for it: a frame that wants it fails */
        }
    }
    return r;
}

static int take_fd(smartt_session *s)
{
    if (!s->nfds_in)
        return -1;
    int fd = s->fds_in[0];
    memmove(s->fds_in, s->fds_in + 1, (s->nfds_in - 1) * sizeof *s->fds_in);
    s->nfds_in--;
    return fd;
}

/* ---- setup ---- */

int direct_setup(smartt_session *s)
{
    if (!s->direct)
        return 0;
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0)
        return SMARTT_ESYS;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    return epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->fd, &ev) ? SMARTT_ESYS : 0;
}

static void pair_release(smartt_session *s, sm_pair *p)
{
    if (p->msg && p->placed) { /* cut short: the placer's buffer is its own again */
        if (s->placer.cut)
            s->placer.cut(s->placer.ctx, p->msg);
        p->msg = NULL, p->placed = 0;
    }
    if (p->msg)
        s->pair_held -= p->msg_size; /* a message cut short: dropped, no longer held */
    if (p->paused)
        s->paused_pairs--, p->paused = 0;
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    free(p->out), free(p->pend), free(p->in), free(p->msg);
    p->out = NULL, p->pend = NULL, p->in = NULL, p->msg = NULL;
    p->out_len = p->out_head = p->out_cap = p->npend = p->pend_cap = p->in_len = 0;
}

void direct_free(smartt_session *s)
{
    s->placer.cut = NULL; /* the session's owner is closing it: no callbacks now */
    for (size_t i = 0; i < s->npairs; i++) {
        pair_release(s, s->pairs[i]);
        free(s->pairs[i]);
    }
    for (size_t i = 0; i < s->nfds_in; i++)
        close(s->fds_in[i]);
    if (s->epfd >= 0)
        close(s->epfd);
    for (size_t i = 0; i < s->routes_cap; i++)
        free(s->routes[i].held), free(s->routes[i].htags);
    free(s->pairs);
    free(s->routes);
    free(s->hq);
}

/* watch registers the epoll events p needs now: input once it is read, output while
 * bytes wait for it. */
static void watch(smartt_session *s, sm_pair *p)
{
    uint32_t want = (p->reading && !p->paused ? EPOLLIN : 0) |
                    (p->out_head < p->out_len || p->bleft ? EPOLLOUT : 0);
    if (want == p->events || p->fd < 0)
        return;
    struct epoll_event ev = {.events = want, .data.u64 = p->idx + 1};
    int op = !p->events ? EPOLL_CTL_ADD : want ? EPOLL_CTL_MOD : EPOLL_CTL_DEL;
    if (epoll_ctl(s->epfd, op, p->fd, &ev) == 0)
        p->events = want;
}

void direct_sync(smartt_session *s)
{
    if (s->epfd < 0)
        return;
    int want = s->out_head < s->out_len;
    if (want == s->out_armed)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.u64 = 0};
    if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->fd, &ev) == 0)
        s->out_armed = want;
}

/* ---- routes ---- */

static void route_key(unsigned char *k, const smartt_addr *a)
{
    memcpy(k, a->addr, 16);
    put_u16(k + 16, a->port);
    put_u32(k + 18, a->endpoint);
}

static size_t key_hash(const unsigned char *k)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < DIRECT_REQ; i++)
        h = (h ^ k[i]) * 1099511628211ull;
    return (size_t)h;
}

/* route_find returns the route of key k, adding it (NULL when the table is full). */
static sm_route *route_find(smartt_session *s, const unsigned char *k)
{
    if (2 * (s->nroutes + 1) > s->routes_cap) {
        if (s->nroutes >= MAX_ROUTES)
            goto look;
        size_t nc = s->routes_cap ? 2 * s->routes_cap : 64;
        sm_route *nr = calloc(nc, sizeof *nr);
        if (!nr)
            goto look;
        for (size_t i = 0; i < s->routes_cap; i++) {
            if (!s->routes[i].used)
                continue;
            size_t j = key_hash(s->routes[i].key) & (nc - 1);
            while (nr[j].used)
                j = (j + 1) & (nc - 1);
            nr[j] = s->routes[i];
        }
        free(s->routes);
        s->routes = nr, s->routes_cap = nc;
    }
look:
    if (!s->routes_cap)
        return NULL;
    for (size_t j = key_hash(k) & (s->routes_cap - 1);; j = (j + 1) & (s->routes_cap - 1)) {
        sm_route *r = &s->routes[j];
        if (r->used && memcmp(r->key, k, DIRECT_REQ) == 0)
            return r;
        if (!r->used) {
            if (2 * (s->nroutes + 1) > s->routes_cap)
                return NULL;
            memcpy(r->key, k, DIRECT_REQ);
            r->used = 1, r->state = R_NONE;
            s->nroutes++;
            return r;
        }
    }
}

/* pair_unwritten is what waits to be written to p, borrowed or queued. */
static uint64_t pair_unwritten(const sm_pair *p) { return p->out_len - p->out_head + p->bleft; }

int direct_route(smartt_session *s, const smartt_addr *to, sm_pair **pp, sm_route **rp)
{
    if (!s->direct)
        return 0;
    unsigned char k[DIRECT_REQ];
    route_key(k, to);
    sm_route *r = route_find(s, k);
    if (!r)
        return 0; /* too many destinations: the rest go through the daemon */
    *rp = r;
    switch (r->state) {
    case R_ASKING:
        return r->held_len > PAIR_QMAX ? SMARTT_EAGAIN : 2;
    case R_RELAY:
        if (--r->left == 0)
            r->state = R_NONE;
        return 0;
    case R_PAIR:
        if (r->pair->fd >= 0 && !r->pair->wdead) {
            *pp = r->pair;
            return pair_unwritten(r->pair) > PAIR_QMAX ? SMARTT_EAGAIN : 1;
        }
        break;
    }
    return 3; /* this one through the daemon, then ask: it arrives before the grant */
}

/* direct_ask asks the daemon for a direct path to r's destination and waits up to
 * ASK_WAIT_MS for the answer (one round trip to the daemon, which answers at once unless
 * its reader of this session waits for room at a full receiver): messages sent meanwhile
 * would be held until a later progress call reads it. */
int direct_ask(smartt_session *s, sm_route *r)
{
    uint32_t t = sm_tag(s);
    int e = sm_request(s, F_DIRECT, t, r->key, DIRECT_REQ, -1);
    if (e)
        return e;
    r->state = R_ASKING, r->tag = t, r->pair = NULL;
    long long dl = now_ms() + ASK_WAIT_MS;
    for (long long left = ASK_WAIT_MS; r->state == R_ASKING && left > 0 && !s->err;
         left = dl - now_ms())
        wait_io(s, (int)left, 0);
    return 0; /* an error found meanwhile is the session's: the next call returns it */
}

int direct_hold(smartt_session *s, sm_route *r, const void *buf, size_t len, uint32_t *tag)
{
    if (len > MAX_RECV_SIZE)
        return SMARTT_EINVAL;
    size_t need = r->held_len + PAIR_HDR + len;
    if (need > r->held_cap) {
        size_t nc = r->held_cap ? r->held_cap : 4096;
        while (nc < need)
            nc *= 2;
        unsigned char *nh = realloc(r->held, nc);
        if (!nh)
            return SMARTT_ENOMEM;
        r->held = nh, r->held_cap = nc;
    }
    if (r->nheld == r->htags_cap) {
        size_t nc = r->htags_cap ? 2 * r->htags_cap : 16;
        uint32_t *nt = realloc(r->htags, nc * sizeof *nt);
        if (!nt)
            return SMARTT_ENOMEM;
        r->htags = nt, r->htags_cap = nc;
    }
    unsigned char *h = r->held + r->held_len;
    memset(h, 0, PAIR_HDR);
    h[0] = 1;
    put_u64(h + 8, len);
    memcpy(h + PAIR_HDR, buf, len);
    r->held_len = need;
    uint32_t t = sm_tag(s);
    r->htags[r->nheld++] = t;
    if (tag)
        *tag = t;
    return 0;
}

/* ---- pairs ---- */

static sm_pair *pair_by_id(smartt_session *s, uint64_t id)
{
    for (size_t i = 0; i < s->npairs; i++)
        if (s->pairs[i]->id == id)
            return s->pairs[i];
    return NULL;
}

/* pair_new adopts the descriptor passed with the frame naming pair id. */
static int pair_new(smartt_session *s, uint64_t id, sm_pair **out)
{
    int fd = take_fd(s);
    if (fd < 0 || s->live_pairs >= MAX_PAIRS) {
        if (fd >= 0)
            close(fd);
        return SMARTT_EPROTO; /* no socket came with it, or beyond the daemon's bound */
    }
    if (s->npairs == s->pairs_cap) {
        size_t nc = s->pairs_cap ? 2 * s->pairs_cap : 16;
        sm_pair **np = realloc(s->pairs, nc * sizeof *np);
        if (!np) {
            close(fd);
            return SMARTT_ENOMEM;
        }
        s->pairs = np, s->pairs_cap = nc;
    }
    sm_pair *p = calloc(1, sizeof *p);
    if (!p) {
        close(fd);
        return SMARTT_ENOMEM;
    }
    int buf = 4 << 20; /* as the daemon's socket: fewer wake-ups per large message */
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    p->id = id, p->fd = fd, p->idx = s->npairs;
    s->pairs[s->npairs++] = p;
    s->live_pairs++;
    s->st.pairs++;
    *out = p;
    return 0;
}

static void outcome(smartt_session *s, int type, uint32_t tag, const char *text)
{
    smartt_event e = {.type = type, .tag = tag};
    if (type == SMARTT_EV_FAILED) {
        e.status = SMARTT_EFAILED;
        snprintf(e.text, sizeof e.text, "%s", text);
        s->st.failed++;
    }
    if (evq_push(&s->done, &e))
        sm_fail(s, SMARTT_ENOMEM);
}

/* fail_out fails what waits to be written to p, and routes to p ask again. */
static void fail_out(smartt_session *s, sm_pair *p, const char *why)
{
    if (p->backed)
        s->backed_pairs--;
    p->backed = 0, p->wdead = 1;
    char text[160];
    snprintf(text, sizeof text, "direct path: %s (the message was not delivered)", why);
    for (size_t i = 0; i < p->npend; i++)
        outcome(s, SMARTT_EV_FAILED, p->pend[i].tag, text);
    p->npend = 0, p->out_head = p->out_len = 0;
    p->bleft = 0, p->nbv = p->bvi = 0; /* the borrowed message failed with the rest */
    for (size_t i = 0; i < s->routes_cap; i++)
        if (s->routes[i].used && s->routes[i].state == R_PAIR && s->routes[i].pair == p)
            s->routes[i].state = R_NONE;
}

/* pair_end closes p: what waits to be written to it fails, a message half read is
 * dropped (its sender's session ended or broke the framing), and routes to it ask again. */
static void pair_end(smartt_session *s, sm_pair *p, const char *why)
{
    if (p->fd < 0)
        return;
    if (p->events)
        epoll_ctl(s->epfd, EPOLL_CTL_DEL, p->fd, NULL);
    fail_out(s, p, why);
    if (p->msg || p->in_len)
        s->st.cut++;
    pair_release(s, p);
    p->events = 0;
    s->live_pairs--;
}

/* write_failed ends p, or only its writing while the peer's last messages wait to be
 * read (they end with EOF). */
static void write_failed(smartt_session *s, sm_pair *p)
{
    if (!p->reading) {
        pair_end(s, p, "the receiving session is gone");
        return;
    }
    fail_out(s, p, "the receiving session is gone");
    watch(s, p);
}

static int queue_out(sm_pair *p, const unsigned char *b, size_t n)
{
    if (p->out_head && p->out_head == p->out_len)
        p->out_head = p->out_len = 0;
    if (p->out_len + n > p->out_cap) {
        if (p->out_head) {
            memmove(p->out, p->out + p->out_head, p->out_len - p->out_head);
            p->out_len -= p->out_head, p->out_head = 0;
        }
        size_t nc = p->out_cap ? p->out_cap : 65536;
        while (nc < p->out_len + n)
            nc *= 2;
        unsigned char *no = realloc(p->out, nc);
        if (!no)
            return SMARTT_ENOMEM;
        p->out = no, p->out_cap = nc;
    }
    memcpy(p->out + p->out_len, b, n);
    p->out_len += n;
    return 0;
}

/* iov_advance moves v[*i..n) past w written bytes. */
static void iov_advance(struct iovec *v, int n, int *i, size_t w)
{
    for (; *i < n && w >= v[*i].iov_len; (*i)++)
        w -= v[*i].iov_len;
    if (*i < n) {
        v[*i].iov_base = (unsigned char *)v[*i].iov_base + w;
        v[*i].iov_len -= w;
    }
}

/* flush_borrowed writes the borrowed rest; 0 once it is all written. */
static int flush_borrowed(smartt_session *s, sm_pair *p)
{
    if (s->err) { /* the session is broken: its owner may free the buffers now */
        p->bleft = 0, p->nbv = p->bvi = 0;
        return 1;
    }
    while (p->bleft) {
        struct msghdr m = {.msg_iov = p->bv + p->bvi, .msg_iovlen = (size_t)(p->nbv - p->bvi)};
        ssize_t w = sendmsg(p->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 1;
        if (w < 0) {
            write_failed(s, p);
            return 1;
        }
        iov_advance(p->bv, p->nbv, &p->bvi, (size_t)w);
        p->bleft -= (uint64_t)w, p->written += (uint64_t)w;
    }
    return 0;
}

/* pair_flush writes queued bytes and completes the messages they end. */
static void pair_flush(smartt_session *s, sm_pair *p)
{
    if (p->bleft && flush_borrowed(s, p) && p->fd < 0)
        return;
    while (!p->bleft && p->out_head < p->out_len) {
        ssize_t w = send(p->fd, p->out + p->out_head, p->out_len - p->out_head,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w < 0) {
            write_failed(s, p);
            return;
        }
        p->out_head += (size_t)w, p->written += (uint64_t)w;
    }
    size_t k = 0;
    while (k < p->npend && p->pend[k].end <= p->written)
        outcome(s, SMARTT_EV_SENT, p->pend[k++].tag, NULL);
    memmove(p->pend, p->pend + k, (p->npend - k) * sizeof *p->pend);
    p->npend -= k;
    if (p->out_head == p->out_len && !p->bleft && p->backed)
        s->backed_pairs--, p->backed = 0;
    watch(s, p);
}

/* queue_rest copies v[i..n) to p's queue, or borrows it when borrow is set (the queue
 * is then empty: the borrowed bytes go first). */
static int queue_rest(sm_pair *p, struct iovec *v, int i, int n, uint64_t left, int *borrow)
{
    if (borrow && *borrow) {
        memcpy(p->bv, v + i, (size_t)(n - i) * sizeof *v);
        p->nbv = n - i, p->bvi = 0, p->bleft = left;
        return 0;
    }
    int r = 0;
    for (; i < n && !r; i++)
        r = queue_out(p, v[i].iov_base, v[i].iov_len);
    return r;
}

/* direct_sendv writes a message of len bytes gathered from iov to p, queueing what the
 * socket does not take: copied, or borrowed if borrow is set and p has nothing queued
 * (*borrow says which). */
static int direct_sendv(smartt_session *s, sm_pair *p, const struct iovec *iov, int niov,
                        size_t len, uint32_t *tag, int *borrow)
{
    int idle = p->out_head == p->out_len && !p->bleft;
    unsigned char h[PAIR_HDR] = {1};
    put_u64(h + 8, len);
    struct iovec v[SMARTT_IOV_MAX + 1] = {{idle && borrow ? p->bhdr : h, PAIR_HDR}};
    memcpy(v[0].iov_base, h, PAIR_HDR);
    memcpy(v + 1, iov, (size_t)niov * sizeof *iov);
    uint32_t t = sm_tag(s);
    if (tag)
        *tag = t;
    size_t done = 0;
    if (idle) {
        struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)niov + 1};
        ssize_t w;
        do
            w = sendmsg(p->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            write_failed(s, p);
            outcome(s, SMARTT_EV_FAILED, t, "direct path: the receiving session is gone "
                                            "(the message was not delivered)");
            return 0;
        }
        done = w < 0 ? 0 : (size_t)w;
        p->written += done;
    }
    if (s->version >= 2) /* after a write that did not fail: a dead peer's is FAILED alone */
        outcome(s, SMARTT_EV_ACCEPTED, t, NULL);
    s->st.sent++;
    p->queued += PAIR_HDR + len;
    if (done == PAIR_HDR + len) {
        outcome(s, SMARTT_EV_SENT, t, NULL);
        return 0;
    }
    int i = 0;
    iov_advance(v, niov + 1, &i, done);
    if (borrow)
        *borrow = idle;
    int r = queue_rest(p, v, i, niov + 1, PAIR_HDR + len - done, borrow);
    if (!r && p->npend == p->pend_cap) {
        size_t nc = p->pend_cap ? 2 * p->pend_cap : 16;
        struct pend *np = realloc(p->pend, nc * sizeof *np);
        if (np)
            p->pend = np, p->pend_cap = nc;
        else
            r = SMARTT_ENOMEM;
    }
    if (r) /* the pair's framing is cut: end it, failing this message too */
        return sm_fail(s, r);
    p->pend[p->npend++] = (struct pend){p->queued, t};
    if (!p->backed)
        s->backed_pairs++, p->backed = 1;
    watch(s, p);
    return 0;
}

int direct_send(smartt_session *s, sm_pair *p, const void *buf, size_t len, uint32_t *tag)
{
    if (len > MAX_RECV_SIZE)
        return SMARTT_EINVAL;
    struct iovec v = {(void *)buf, len};
    return direct_sendv(s, p, &v, 1, len, tag, NULL);
}

int smartt_sendv_direct(smartt_session *s, const smartt_addr *to, const struct iovec *iov,
                        int niov, uint32_t *tag, int *borrowed)
{
    if (!s || !to || !iov || niov <= 0 || niov > SMARTT_IOV_MAX || !borrowed)
        return SMARTT_EINVAL;
    *borrowed = 0;
    if (tag)
        *tag = 0;
    size_t len = 0;
    for (int i = 0; i < niov; i++) {
        if (iov[i].iov_len > MAX_RECV_SIZE - len)
            return SMARTT_EINVAL;
        len += iov[i].iov_len;
    }
    if (!len)
        return SMARTT_EINVAL;
    if (s->err)
        return s->err;
    unsigned char k[DIRECT_REQ];
    route_key(k, to);
    sm_route *r = s->direct ? route_find(s, k) : NULL;
    if (!r || r->state != R_PAIR || r->pair->fd < 0 || r->pair->wdead)
        return SMARTT_ENOTSUP; /* no pair now: send it another way */
    if (pair_unwritten(r->pair) > PAIR_QMAX)
        return SMARTT_EAGAIN;
    *borrowed = 1;
    return direct_sendv(s, r->pair, iov, niov, len, tag, borrowed);
}

/* ---- reading pairs ---- */

/* ---- the receive budget ---- */

/* A pair message is charged from its header until the application takes its RECV event;
 * one that would pass the budget waits in its pair (the pair is not read, so its writer
 * backs up) unless nothing is held: any one message can arrive, and what is held is at
 * most the budget or one message. Charged at its declared size, which it allocates. */
static int pair_admit(smartt_session *s, sm_pair *p, uint64_t size)
{
    if (s->pair_held && s->pair_held + size > s->pair_budget) {
        if (!p->paused)
            s->paused_pairs++, s->st.waits++, p->paused = 1;
        return 0;
    }
    if (p->paused)
        s->paused_pairs--, p->paused = 0;
    s->pair_held += size;
    return 1;
}

/* try_place offers a message starting on p (header h, avail bytes of it buffered after
 * the header) to the placer: 0 not placed, -1 wait for its first bytes, else 1 + the
 * bytes it skipped (p->msg is then the placer's buffer for the rest). */
static long try_place(smartt_session *s, sm_pair *p, const unsigned char *h, size_t avail,
                      uint64_t size)
{
    if (!s->placer.place || size < s->placer.min_size || s->recv.n)
        return 0; /* a queued message comes first: matching it may take the buffer */
    size_t want = size < SMARTT_PLACE_HEAD ? (size_t)size : SMARTT_PLACE_HEAD;
    if (avail < want)
        return -1;
    size_t nhead = avail < size ? avail : (size_t)size, skip = 0;
    void *buf = s->placer.place(s->placer.ctx, &p->from, p->ep, size, h + PAIR_HDR, nhead, &skip);
    if (!buf)
        return 0;
    if (skip > nhead || skip >= size) { /* the placer's mistake: give it back */
        if (s->placer.cut)
            s->placer.cut(s->placer.ctx, buf);
        return 0;
    }
    p->msg = buf, p->placed = 1, p->msg_size = size - skip, p->msg_got = 0;
    s->st.placed++;
    return 1 + (long)skip;
}

int smartt_set_placer(smartt_session *s, const smartt_placer *pl)
{
    if (!s || (pl && !pl->place))
        return SMARTT_EINVAL;
    if (pl)
        s->placer = *pl;
    else
        memset(&s->placer, 0, sizeof s->placer);
    return 0;
}

/* held_push records a queued pair message, in the order of the receive queue. */
static int held_push(smartt_session *s, const void *data, uint64_t size)
{
    if (s->hq_n == s->hq_cap) {
        size_t nc = s->hq_cap ? 2 * s->hq_cap : 64;
        struct heldmsg *nq = malloc(nc * sizeof *nq);
        if (!nq)
            return SMARTT_ENOMEM;
        for (size_t i = 0; i < s->hq_n; i++)
            nq[i] = s->hq[(s->hq_head + i) % s->hq_cap];
        free(s->hq);
        s->hq = nq, s->hq_cap = nc, s->hq_head = 0;
    }
    s->hq[(s->hq_head + s->hq_n++) % s->hq_cap] = (struct heldmsg){data, size};
    return 0;
}

static void resume_pairs(smartt_session *s);

int sm_recv_pop(smartt_session *s, smartt_event *ev)
{
    if (!evq_pop(&s->recv, ev))
        return 0;
    /* pair messages leave the queue in order: the oldest recorded is this one or later */
    if (s->hq_n && ev->type == SMARTT_EV_RECV && ev->data == s->hq[s->hq_head].data) {
        s->pair_held -= s->hq[s->hq_head].size;
        s->hq_head = (s->hq_head + 1) % s->hq_cap, s->hq_n--;
        if (s->paused_pairs) /* now: a caller about to sleep would not see them wake */
            resume_pairs(s);
    }
    return 1;
}

/* pair_deliver queues the message read whole from p. */
static int pair_deliver(smartt_session *s, sm_pair *p)
{
    smartt_event e = {.type = SMARTT_EV_RECV, .from = p->from, .endpoint = p->ep,
                      .size = p->msg_size, .data = p->msg, .own_ = p->msg};
    p->msg = NULL, p->msg_size = p->msg_got = 0;
    s->st.received++;
    s->received = 1;
    if (p->placed) {
        e.own_ = NULL, e.placed = 1, p->placed = 0;
        int r = evq_push(&s->recv, &e);
        if (r && s->placer.cut)
            s->placer.cut(s->placer.ctx, (void *)e.data);
        return r;
    }
    int r = held_push(s, e.data, e.size);
    if (!r && (r = evq_push(&s->recv, &e)))
        s->hq_n--;
    if (r) {
        s->pair_held -= e.size;
        free((void *)e.data);
    }
    return r;
}

/* pair_parse takes messages from p's buffered bytes; 1 when p ended. */
static int pair_parse(smartt_session *s, sm_pair *p)
{
    size_t off = 0;
    while (off < p->in_len) {
        if (p->msg) {
            size_t n = p->in_len - off;
            if (n > p->msg_size - p->msg_got)
                n = (size_t)(p->msg_size - p->msg_got);
            memcpy(p->msg + p->msg_got, p->in + off, n);
            p->msg_got += n, off += n;
            if (p->msg_got == p->msg_size && pair_deliver(s, p))
                return sm_fail(s, SMARTT_ENOMEM), 1;
            continue;
        }
        if (p->in_len - off < PAIR_HDR)
            break;
        const unsigned char *h = p->in + off;
        uint64_t size = get_u64(h + 8);
        int bad = h[0] != 1 || size == 0 || size > MAX_RECV_SIZE;
        for (int i = 1; i < 8; i++)
            bad |= h[i] != 0;
        if (bad) {
            s->st.bad++;
            p->in_len = 0;
            pair_end(s, p, "malformed bytes from the peer");
            return 1;
        }
        int pl = try_place(s, p, h, p->in_len - off - PAIR_HDR, size);
        if (pl < 0)
            break; /* its first bytes are not here yet */
        if (pl > 0) {
            off += PAIR_HDR + (size_t)pl - 1;
            continue;
        }
        if (!pair_admit(s, p, size))
            break; /* its header stays buffered */
        p->msg = malloc((size_t)size);
        if (!p->msg) {
            s->pair_held -= size;
            return sm_fail(s, SMARTT_ENOMEM), 1;
        }
        p->msg_size = size, p->msg_got = 0;
        off += PAIR_HDR;
    }
    memmove(p->in, p->in + off, p->in_len - off);
    p->in_len -= off;
    return 0;
}

/* pair_read reads what p has (a bounded number of reads); a large message's body is
 * read straight into it. */
static void pair_read(smartt_session *s, sm_pair *p)
{
    if (!p->in && !(p->in = malloc(PAIR_INBUF))) {
        sm_fail(s, SMARTT_ENOMEM);
        return;
    }
    for (int i = 0; i < PAIR_READS && p->fd >= 0 && !p->paused && !s->err; i++) {
        ssize_t n;
        int straight = p->msg && !p->in_len && p->msg_size - p->msg_got >= PAIR_INBUF;
        if (straight)
            n = recv(p->fd, p->msg + p->msg_got, (size_t)(p->msg_size - p->msg_got), MSG_DONTWAIT);
        else
            n = recv(p->fd, p->in + p->in_len, PAIR_INBUF - p->in_len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            pair_end(s, p, n == 0 ? "the peer closed the pair" : "the pair broke");
            return;
        }
        if (straight) {
            p->msg_got += (uint64_t)n;
            if (p->msg_got == p->msg_size && pair_deliver(s, p))
                sm_fail(s, SMARTT_ENOMEM);
            continue; /* the rest of the message may still come: read on */
        }
        size_t want = PAIR_INBUF - p->in_len;
        p->in_len += (size_t)n;
        if (pair_parse(s, p) || (size_t)n < want || p->paused)
            break; /* ended, a short read (the socket is drained), or waiting */
    }
}

/* resume_pairs lets waiting pairs go on now that messages were taken. */
static void resume_pairs(smartt_session *s)
{
    for (size_t i = 0; i < s->npairs && s->paused_pairs && !s->err; i++) {
        sm_pair *p = s->pairs[i];
        if (!p->paused || p->fd < 0)
            continue;
        if (!pair_parse(s, p) && !p->paused) {
            watch(s, p);
            pair_read(s, p); /* what came meanwhile, and EOF, which epoll reported as HUP */
        }
    }
}

/* linger_round waits up to ms for the pairs in ps (n of them) and writes what they
 * hold, reading and dropping what their peers write meanwhile; a pair whose peer is
 * gone, or that breaks, is taken out (ps[i] = NULL). */
static void linger_round(sm_pair **ps, size_t n, struct pollfd *pf, unsigned char *sink, int ms)
{
    for (size_t i = 0; i < n; i++)
        pf[i] = (struct pollfd){.fd = ps[i] ? ps[i]->fd : -1, .events = POLLIN | POLLOUT};
    if (poll(pf, n, ms) <= 0)
        return;
    for (size_t i = 0; i < n; i++) {
        sm_pair *p = ps[i];
        ssize_t r = 1;
        if (p && (pf[i].revents & POLLIN))
            r = recv(p->fd, sink, 65536, MSG_DONTWAIT);
        if (p && r > 0 && (pf[i].revents & POLLOUT))
            r = send(p->fd, p->out + p->out_head, p->out_len - p->out_head, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (p && r > 0 && (pf[i].revents & POLLOUT))
            p->out_head += (size_t)r;
        if (!p || (r < 0 && errno != EAGAIN && errno != EINTR) || r == 0 ||
            (pf[i].revents & (POLLERR | POLLNVAL)) || p->out_head == p->out_len)
            ps[i] = NULL;
    }
}

void direct_linger(smartt_session *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->npairs; i++) { /* a borrowed rest's buffers may be gone */
        sm_pair *p = s->pairs[i];
        n += p->fd >= 0 && !p->bleft && p->out_head < p->out_len;
    }
    if (!n)
        return;
    sm_pair **ps = calloc(n, sizeof *ps);
    struct pollfd *pf = calloc(n, sizeof *pf);
    unsigned char *sink = malloc(65536);
    n = 0;
    for (size_t i = 0; ps && i < s->npairs; i++) {
        sm_pair *p = s->pairs[i];
        if (p->fd >= 0 && !p->bleft && p->out_head < p->out_len)
            ps[n++] = p;
    }
    long long end = now_ms() + LINGER_MS;
    for (size_t left = ps && pf && sink ? n : 0; left && now_ms() < end;) {
        linger_round(ps, n, pf, sink, (int)(end - now_ms()));
        left = 0;
        for (size_t i = 0; i < n; i++)
            left += ps[i] != NULL;
    }
    free(ps), free(pf), free(sink);
}

int direct_progress(smartt_session *s)
{
    if (s->backed_pairs)
        for (size_t i = 0; i < s->npairs && s->backed_pairs; i++)
            if (s->pairs[i]->backed)
                pair_flush(s, s->pairs[i]);
    if (!s->live_pairs)
        return in_read(s);
    /* one epoll_wait says which sockets have bytes: no read that finds nothing */
    struct epoll_event ev[64];
    int n = epoll_wait(s->epfd, ev, 64, 0);
    for (int i = 0; i < n && !s->err; i++) /* the daemon's first: DirectPeer before its pair */
        if (ev[i].data.u64 == 0 && in_read(s))
            return s->err;
    for (int i = 0; i < n && !s->err; i++) {
        uint64_t k = ev[i].data.u64;
        if (k == 0 || k > s->npairs)
            continue;
        sm_pair *p = s->pairs[k - 1];
        if (p->fd < 0)
            continue;
        if (ev[i].events & EPOLLOUT)
            pair_flush(s, p);
        if (p->fd >= 0 && p->reading && !p->paused && (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
            pair_read(s, p);
        else if (p->fd >= 0 && !p->reading && (ev[i].events & (EPOLLHUP | EPOLLERR)))
            pair_end(s, p, "the receiving session is gone");
    }
    return s->err;
}

/* ---- frames ---- */

/* release_held sends what was held while the daemon was asked: to the pair p (NULL:
 * through the daemon), in order. */
static int release_held(smartt_session *s, sm_route *r, sm_pair *p)
{
    size_t off = 0, i = 0;
    int e = 0;
    for (; off < r->held_len && !e; i++) {
        uint64_t len = get_u64(r->held + off + 8);
        if (p) {
            if (s->version >= 2)
                outcome(s, SMARTT_EV_ACCEPTED, r->htags[i], NULL);
            e = queue_out(p, r->held + off, PAIR_HDR + (size_t)len);
            p->queued += PAIR_HDR + len;
            if (!e && p->npend == p->pend_cap) {
                size_t nc = p->pend_cap ? 2 * p->pend_cap : 16;
                struct pend *np = realloc(p->pend, nc * sizeof *np);
                if (np)
                    p->pend = np, p->pend_cap = nc;
                else
                    e = SMARTT_ENOMEM;
            }
            if (!e)
                p->pend[p->npend++] = (struct pend){p->queued, r->htags[i]}, s->st.sent++;
        } else {
            smartt_addr to;
            memcpy(to.addr, r->key, 16);
            to.port = get_u16(r->key + 16), to.endpoint = get_u32(r->key + 18);
            e = sm_relay(s, &to, r->held + off + PAIR_HDR, (size_t)len, r->htags[i]);
        }
        off += PAIR_HDR + (size_t)len;
    }
    r->held_len = r->nheld = 0;
    if (p && !e && p->out_head < p->out_len) {
        if (!p->backed)
            s->backed_pairs++, p->backed = 1;
        pair_flush(s, p);
    }
    return e;
}

static int on_direct_ok(smartt_session *s, uint32_t tag, const unsigned char *p)
{
    int st = p[0];
    uint64_t id = get_u64(p + 1);
    sm_route *r = NULL;
    for (size_t i = 0; i < s->routes_cap && !r; i++)
        if (s->routes[i].used && s->routes[i].state == R_ASKING && s->routes[i].tag == tag)
            r = &s->routes[i];
    sm_pair *pair = NULL;
    if (st == 0) {
        if (pair_by_id(s, id))
            return SMARTT_EPROTO; /* passed twice */
        int e = pair_new(s, id, &pair);
        if (e)
            return e;
    } else if (st == 1) {
        pair = pair_by_id(s, id);
    }
    if (!r)
        return 0; /* nobody asked with this tag: a new pair is kept all the same */
    if (pair && pair->fd >= 0 && !pair->wdead) {
        r->state = R_PAIR, r->pair = pair;
    } else {
        r->state = R_RELAY, r->left = RELAY_AGAIN, pair = NULL;
    }
    return release_held(s, r, pair);
}

static int on_direct_peer(smartt_session *s, const unsigned char *b)
{
    uint64_t id = get_u64(b);
    sm_pair *p = pair_by_id(s, id);
    if (!p) {
        int e = pair_new(s, id, &p);
        if (e)
            return e;
    }
    if (p->fd < 0 || p->reading)
        return 0; /* ended here already: its writer learns it from its writes */
    memcpy(p->from.addr, b + 8, 16);
    p->from.port = get_u16(b + 24);
    p->from.endpoint = get_u32(b + 26);
    p->ep = get_u32(b + 30);
    p->reading = 1;
    watch(s, p);
    return 0;
}

int direct_frame(smartt_session *s, int type, uint32_t tag, const unsigned char *p, uint32_t n)
{
    if (!s->direct)
        return SMARTT_EPROTO;
    if (type == F_DIRECTOK) {
        if (n != DIRECT_OK || tag == 0 || p[0] > 2)
            return SMARTT_EPROTO;
        return on_direct_ok(s, tag, p);
    }
    if (n != DIRECT_PEER || tag != 0)
        return SMARTT_EPROTO;
    return on_direct_peer(s, p);
}

/* ---- public ---- */

int smartt_poll_fd(const smartt_session *s)
{
    if (!s)
        return SMARTT_EINVAL;
    return s->epfd >= 0 ? s->epfd : s->fd;
}

int smartt_poll_events(const smartt_session *s)
{
    if (!s)
        return 0;
    return s->epfd >= 0 || !smartt_want_write(s) ? POLLIN : POLLIN | POLLOUT;
}

int smartt_direct_stats_get(const smartt_session *s, smartt_direct_stats *st)
{
    if (!s || !st)
        return SMARTT_EINVAL;
    *st = s->st;
    st->pairs_open = s->live_pairs;
    st->held = s->pair_held;
    return 0;
}
