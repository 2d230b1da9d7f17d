/* libsmartt: sessions, requests and the blocking layer. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static void free_session(smartt_session *s)
{
    direct_linger(s); /* their messages were accepted: write them, as a socket's close */
    direct_free(s);   /* then its peers learn at once that the session ended */
    if (s->fd >= 0)
        close(s->fd);
    for (size_t i = 0; i < s->nfds; i++)
        close(s->fds[i].fd);
    if (s->ring)
        munmap(s->ring, (size_t)s->ring_size);
    evq_free(&s->done);
    evq_free(&s->recv);
    smartt_memfd_close(&s->big);
    free(s->cur_buf);
    free(s->fds);
    free(s->out);
    free(s->in);
    free(s->socket_path);
    free(s);
}

/* try_open connects and upgrades with proto; 1 when the daemon answered 426. */
static int try_open(smartt_session *s, const char *proto, const smartt_options *o, int tmo)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = sock_connect(s->socket_path, tmo);
    if (s->fd < 0) {
        int r = s->fd;
        s->fd = -1;
        return r;
    }
    int buf = 4 << 20; /* as the Go client: fewer wake-ups per streamed message */
    setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    return http_upgrade(s, proto, tmo, !(o && o->no_lazy_sent), o ? o->errbuf : NULL,
                        o ? o->errlen : 0);
}

int smartt_open(smartt_session **out, const char *socket_path, const smartt_options *o)
{
    if (!out || (o && (o->max_version < 0 || o->max_version > 2)))
        return SMARTT_EINVAL;
    *out = NULL;
    if (o && o->errbuf && o->errlen)
        o->errbuf[0] = 0;
    smartt_session *s = calloc(1, sizeof *s);
    if (!s)
        return SMARTT_ENOMEM;
    s->fd = -1;
    s->epfd = -1;
    s->big.fd = -1;
    s->want_direct = o && o->direct;
    s->pair_budget = o && o->direct_recv_max > 0 ? (uint64_t)o->direct_recv_max : PAIR_BUDGET;
    s->fd_threshold = o && o->sendfd_threshold ? o->sendfd_threshold : 4ll << 20;
    s->auto_min = o && o->auto_ring ? o->auto_ring : AUTO_RING;
    s->socket_path = strdup(socket_path ? socket_path : smartt_default_socket());
    s->in = malloc(INBUF_MIN);
    s->in_cap = INBUF_MIN;
    if (!s->socket_path || !s->in) {
        free_session(s);
        return SMARTT_ENOMEM;
    }
    int tmo = o && o->timeout_ms > 0 ? o->timeout_ms : 10000;
    int v2 = !o || o->max_version != 1;
    int r = try_open(s, v2 ? "smartt-msg/2, smartt-msg/1" : "smartt-msg/1", o, tmo);
    if (r == 1 && v2) /* a v1 daemon refuses the list: ask for 1 alone */
        r = try_open(s, "smartt-msg/1", o, tmo);
    if (r == 1)
        r = SMARTT_EVERSION;
    if (!r)
        r = direct_setup(s);
    if (!r)
        r = in_parse(s);
    if (r) {
        free_session(s);
        return r;
    }
    *out = s;
    return 0;
}

void smartt_close(smartt_session *s)
{
    if (s)
        free_session(s);
}

unsigned smartt_caps(const smartt_session *s) { return s ? s->caps : 0; }
int smartt_version(const smartt_session *s) { return s ? s->version : SMARTT_EINVAL; }
uint64_t smartt_max_ring(const smartt_session *s) { return s ? s->max_ring : 0; }
uint32_t smartt_endpoint(const smartt_session *s) { return s ? s->endpoint : 0; }
int smartt_fd(const smartt_session *s) { return s ? s->fd : SMARTT_EINVAL; }
int smartt_want_write(const smartt_session *s)
{
    return s && (s->out_head < s->out_len || s->backed_pairs);
}

/* sm_request queues one small frame and writes what it can. */
int sm_request(smartt_session *s, int type, uint32_t tag, const void *p, size_t n, int fd)
{
    if (s->err)
        return s->err;
    int r = out_releases(s);
    if (!r && fd >= 0)
        r = out_add_fd(s, fd);
    if (!r)
        r = out_frame(s, type, tag, p, n);
    if (!r)
        r = out_flush(s);
    direct_sync(s);
    return r ? sm_fail(s, r) : 0;
}

int smartt_bind_start(smartt_session *s, uint32_t endpoint, uint32_t *tag)
{
    if (!s)
        return SMARTT_EINVAL;
    unsigned char p[4];
    put_u32(p, endpoint);
    uint32_t t = sm_tag(s);
    int r = sm_request(s, F_BIND, t, p, 4, -1);
    if (!r && tag)
        *tag = t;
    return r;
}

static void send_hdr(unsigned char *p, const smartt_addr *to, uint64_t size)
{
    memcpy(p, to->addr, 16);
    put_u16(p + 16, to->port);
    put_u32(p + 18, to->endpoint);
    put_u64(p + 22, size);
}

/* send_frames writes a Send frame and its Data frames from buf; blocking: straight
 * from buf, waiting for the socket; else what the socket does not take is copied. */
static int send_frames(smartt_session *s, const smartt_addr *to, const void *buf, size_t len,
                       uint32_t *tag, int blocking, int timeout_ms)
{
    if (!s || !to || (!buf && len) || len == 0 || len > MAX_RECV_SIZE)
        return SMARTT_EINVAL;
    if (s->err)
        return s->err;
    size_t chunks = (len + SMARTT_MAX_PAYLOAD - 1) / SMARTT_MAX_PAYLOAD;
    unsigned char stack[HDR * 2 + SEND_HDR + HDR + 4 * MAX_RELEASE + HDR * 8];
    struct iovec siov[2 + 2 * 8];
    int small = chunks <= 8;
    unsigned char *h = small ? stack : malloc(HDR * 2 + SEND_HDR + 4 * MAX_RELEASE + HDR * chunks);
    struct iovec *iov = small ? siov : malloc(sizeof *iov * (2 + 2 * chunks));
    int r = SMARTT_ENOMEM;
    if (!h || !iov)
        goto out;
    uint32_t t = tag && *tag ? *tag : sm_tag(s); /* a held message keeps its tag */
    int n = 0;
    size_t hp = 0;
    if (s->nrel) { /* pending ring releases go first, in the same write */
        put_hdr(h, F_RELEASE, 0, (uint32_t)(4 * s->nrel));
        for (size_t i = 0; i < s->nrel; i++)
            put_u32(h + HDR + 4 * i, s->rel[i]);
        iov[n++] = (struct iovec){h, HDR + 4 * s->nrel};
        hp = HDR + 4 * s->nrel;
        s->nrel = 0;
    }
    put_hdr(h + hp, F_SEND, t, SEND_HDR);
    send_hdr(h + hp + HDR, to, len);
    unsigned char *dh = h + hp + HDR + SEND_HDR;
    iov[n++] = (struct iovec){h + hp, HDR + SEND_HDR};
    for (size_t i = 0; i < chunks; i++) {
        size_t off = i * SMARTT_MAX_PAYLOAD;
        size_t cl = len - off < SMARTT_MAX_PAYLOAD ? len - off : SMARTT_MAX_PAYLOAD;
        put_hdr(dh + HDR * i, F_DATA, t, (uint32_t)cl);
        iov[n++] = (struct iovec){dh + HDR * i, HDR};
        iov[n++] = (struct iovec){(char *)buf + off, cl};
    }
    if (s->out_head < s->out_len || s->nfds) { /* behind queued bytes: copy */
        r = 0;
        for (int i = 0; i < n && !r; i++)
            r = out_append(s, iov[i].iov_base, iov[i].iov_len);
        if (!r)
            r = out_flush(s);
        if (r)
            r = sm_fail(s, r);
        if (!r && blocking)
            while (!r && s->out_head < s->out_len)
                r = wait_io(s, timeout_ms, 1) == SMARTT_ETIMEDOUT ? SMARTT_ETIMEDOUT : s->err;
    } else {
        r = write_iov(s, iov, n, blocking, timeout_ms);
    }
    if (!r && tag)
        *tag = t;
out:
    if (!small) {
        free(h);
        free(iov);
    }
    return r;
}

/* route picks the way to `to`: 0 through the daemon, 1 the pair *pp, or an error
 * (SMARTT_EAGAIN: ask again after progress). */
static int route(smartt_session *s, const smartt_addr *to, sm_pair **pp, sm_route **rp)
{
    if (s->err)
        return s->err;
    return direct_route(s, to, pp, rp);
}

/* sm_relay sends a held message through the daemon with its tag. */
int sm_relay(smartt_session *s, const smartt_addr *to, const void *buf, size_t len, uint32_t tag)
{
    return send_frames(s, to, buf, len, &tag, 0, 0);
}

int smartt_send_async(smartt_session *s, const smartt_addr *to, const void *buf, size_t len,
                      uint32_t *tag)
{
    sm_pair *p = NULL;
    sm_route *rt = NULL;
    if (!s || !to || !buf || len == 0 || len > MAX_RECV_SIZE)
        return SMARTT_EINVAL;
    if (tag)
        *tag = 0;
    int r = route(s, to, &p, &rt);
    if (r == 1)
        return direct_send(s, p, buf, len, tag);
    if (r == 2)
        return direct_hold(s, rt, buf, len, tag);
    if (r < 0)
        return r;
    int e = send_frames(s, to, buf, len, tag, 0, 0);
    if (!e && r == 3)
        e = direct_ask(s, rt);
    direct_sync(s);
    return e;
}

/* send_mapped writes a memfd's message to a pair or holds it (the pair takes bytes, not
 * memfds). */
static int send_mapped(smartt_session *s, sm_pair *p, sm_route *rt, int memfd, uint64_t size,
                       uint32_t *tag)
{
    size_t len = (size_t)size + SMARTT_HEADROOM;
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, memfd, 0);
    if (m == MAP_FAILED)
        return SMARTT_ESYS;
    unsigned char *d = (unsigned char *)m + SMARTT_HEADROOM;
    int r = p ? direct_send(s, p, d, (size_t)size, tag) : direct_hold(s, rt, d, (size_t)size, tag);
    munmap(m, len);
    return r;
}

/* relay_fd passes a memfd's message to the daemon (SendFD). */
static int relay_fd(smartt_session *s, const smartt_addr *to, int memfd, uint64_t size,
                    uint32_t *tag)
{
    if (!(s->caps & SMARTT_CAP_SENDFD))
        return SMARTT_ENOTSUP;
    unsigned char p[SEND_HDR];
    send_hdr(p, to, size);
    uint32_t t = sm_tag(s);
    int r = sm_request(s, F_SENDFD, t, p, SEND_HDR, memfd);
    if (!r && tag)
        *tag = t;
    return r;
}

int smartt_send_fd_async(smartt_session *s, const smartt_addr *to, int memfd, uint64_t size,
                         uint32_t *tag)
{
    if (!s || !to || memfd < 0 || size == 0 || size > MAX_RECV_SIZE)
        return SMARTT_EINVAL;
    sm_pair *pair = NULL;
    sm_route *rp = NULL;
    int rt = route(s, to, &pair, &rp);
    if (rt == 1 || rt == 2)
        return send_mapped(s, rt == 1 ? pair : NULL, rp, memfd, size, tag);
    if (rt < 0)
        return rt;
    int r = relay_fd(s, to, memfd, size, tag);
    if (!r && rt == 3)
        r = direct_ask(s, rp);
    return r;
}

int smartt_send_memfd(smartt_session *s, const smartt_addr *to, const smartt_memfd *m,
                      size_t len, uint32_t *tag)
{
    if (!s || !to || !m || m->fd < 0 || len == 0 || len > m->capacity)
        return SMARTT_EINVAL;
    sm_pair *pair = NULL;
    sm_route *rp = NULL;
    int rt = route(s, to, &pair, &rp);
    if (rt == 1) /* the pair takes the bytes from the mapping we have: no mmap per message */
        return direct_send(s, pair, m->data, len, tag);
    if (rt == 2)
        return direct_hold(s, rp, m->data, len, tag);
    if (rt < 0)
        return rt;
    int r = relay_fd(s, to, m->fd, len, tag);
    if (!r && rt == 3)
        r = direct_ask(s, rp);
    return r;
}

int smartt_want_sent(smartt_session *s, uint32_t tag)
{
    if (!s || !tag)
        return SMARTT_EINVAL;
    if (!(s->caps & SMARTT_CAP_LAZY_SENT))
        return 0;
    for (size_t i = 0; s->direct && i < s->done.n; i++) { /* a pair's message: done here */
        const smartt_event *e = &s->done.ev[(s->done.head + i) % s->done.cap];
        if (e->tag == tag && (e->type == SMARTT_EV_SENT || e->type == SMARTT_EV_FAILED))
            return 0;
    }
    return sm_request(s, F_WANTSENT, tag, NULL, 0, -1);
}

int smartt_cancel(smartt_session *s, uint32_t tag)
{
    if (!s || !tag)
        return SMARTT_EINVAL;
    if (!(s->caps & SMARTT_CAP_CANCEL))
        return SMARTT_ENOTSUP;
    return sm_request(s, F_CANCEL, tag, NULL, 0, -1);
}

int smartt_memfd_open(smartt_memfd *m, size_t capacity)
{
    if (!m || capacity == 0 || capacity > MAX_RECV_SIZE)
        return SMARTT_EINVAL;
    memset(m, 0, sizeof *m);
    m->fd = -1;
    int fd = memfd_create("smartt-send", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return SMARTT_ESYS;
    size_t len = capacity + SMARTT_HEADROOM;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)len) == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return SMARTT_ESYS;
    }
    m->fd = fd, m->map_ = p, m->maplen_ = len;
    m->data = (unsigned char *)p + SMARTT_HEADROOM;
    m->capacity = capacity;
    return 0;
}

void smartt_memfd_close(smartt_memfd *m)
{
    if (!m || m->fd < 0)
        return;
    munmap(m->map_, m->maplen_);
    close(m->fd);
    m->fd = -1, m->data = NULL, m->map_ = NULL;
}

int smartt_ring_start(smartt_session *s, uint64_t size, uint64_t min_message, uint32_t *tag)
{
    long page = sysconf(_SC_PAGESIZE);
    if (!s || size == 0 || size % (uint64_t)page || size > (1ull << 30))
        return SMARTT_EINVAL;
    if (!(s->caps & SMARTT_CAP_RING))
        return SMARTT_ENOTSUP;
    if (s->ring || s->ring_tag)
        return SMARTT_EINVAL;
    if (s->auto_state == AUTO_IDLE)
        s->auto_state = AUTO_OFF; /* a ring of the caller's: no automatic one */
    int fd = memfd_create("smartt-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return SMARTT_ESYS;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0 && fallocate(fd, 0, 0, (off_t)size) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0)
        p = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return SMARTT_ESYS;
    }
    unsigned char pl[16];
    put_u64(pl, size);
    put_u64(pl + 8, min_message);
    uint32_t t = sm_tag(s);
    s->ring = p, s->ring_size = size, s->ring_tag = t;
    int r = sm_request(s, F_RECVRING, t, pl, min_message ? 16 : 8, fd);
    close(fd); /* the queue holds its own copy until it is sent */
    if (!r && tag)
        *tag = t;
    return r;
}

/* take removes the awaited event from its queue. */
static int take(smartt_session *s, evq *q, uint32_t tag, unsigned mask, smartt_event *ev)
{
    return q == &s->recv ? sm_recv_pop(s, ev) : evq_take(q, tag, mask, ev);
}

int smartt_wait(smartt_session *s, uint32_t tag, unsigned mask, smartt_event *ev, int timeout_ms)
{
    if (!s || !ev)
        return SMARTT_EINVAL;
    long long dl = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    evq *q = tag == 0 && (mask & (1u << SMARTT_EV_RECV)) ? &s->recv : &s->done;
    for (;;) {
        if (take(s, q, tag, mask, ev))
            return 0;
        if (s->err)
            return s->err;
        long long left = dl < 0 ? -1 : dl - now_ms();
        int late = dl >= 0 && left <= 0;
        int r = out_releases(s);
        if (!r)
            r = out_flush(s);
        if (r)
            return sm_fail(s, r);
        /* poll first, then progress: no read that finds nothing */
        r = wait_io(s, late ? 0 : (int)left, 0);
        if (r < 0 && r != SMARTT_ETIMEDOUT) /* what came before the break is still answered */
            return take(s, q, tag, mask, ev) ? 0 : r;
        if (late)
            return take(s, q, tag, mask, ev) ? 0 : SMARTT_ETIMEDOUT;
    }
}

int smartt_bind(smartt_session *s, uint32_t endpoint, uint32_t *bound, int timeout_ms)
{
    uint32_t tag;
    int r = smartt_bind_start(s, endpoint, &tag);
    smartt_event ev;
    if (!r)
        r = smartt_wait(s, tag, 1u << SMARTT_EV_BOUND | 1u << SMARTT_EV_ERROR, &ev, timeout_ms);
    if (!r && ev.type == SMARTT_EV_ERROR)
        r = ev.status;
    if (!r && bound)
        *bound = ev.endpoint;
    return r;
}

/* send_big copies a large message into the session's memfd and sends it from there;
 * SMARTT_ENOTSUP when it cannot (the caller streams the message). */
static int send_big(smartt_session *s, const smartt_addr *to, const void *buf, size_t len,
                    uint32_t *tag)
{
    if (!(s->caps & SMARTT_CAP_SENDFD) || s->fd_threshold < 0 || len < (uint64_t)s->fd_threshold)
        return SMARTT_ENOTSUP;
    if (s->big.fd < 0 || s->big.capacity < len) {
        smartt_memfd_close(&s->big);
        size_t cap = (len + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
        if (smartt_memfd_open(&s->big, cap > MAX_RECV_SIZE ? len : cap)) {
            s->big.fd = -1;
            return SMARTT_ENOTSUP; /* no memfd to be had: stream */
        }
    }
    memcpy(s->big.data, buf, len);
    return relay_fd(s, to, s->big.fd, len, tag);
}

int smartt_send(smartt_session *s, const smartt_addr *to, const void *buf, size_t len,
                smartt_event *out, int timeout_ms)
{
    uint32_t tag;
    smartt_event ev;
    if (!s || !to || !buf || len == 0 || len > MAX_RECV_SIZE)
        return SMARTT_EINVAL;
    long long dl = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    sm_pair *p = NULL;
    sm_route *rp = NULL;
    int rt;
    tag = 0;
    while ((rt = route(s, to, &p, &rp)) == SMARTT_EAGAIN) { /* holding, or the pair is full */
        int left = dl < 0 ? -1 : (int)(dl - now_ms());
        if (dl >= 0 && left <= 0)
            return SMARTT_ETIMEDOUT;
        int w = wait_io(s, left, 0);
        if (w < 0 && w != SMARTT_ETIMEDOUT)
            return w;
    }
    if (rt < 0)
        return rt;
    int relay = rt == 0 || rt == 3;
    int r = rt == 1   ? direct_send(s, p, buf, len, &tag)
            : rt == 2 ? direct_hold(s, rp, buf, len, &tag)
                      : send_big(s, to, buf, len, &tag);
    int big = relay && r != SMARTT_ENOTSUP;
    if (relay && !big)
        r = send_frames(s, to, buf, len, &tag, 1, timeout_ms);
    if (!r && rt == 3)
        r = direct_ask(s, rp);
    if (!r && s->received && relay)
        r = smartt_want_sent(s, tag);
    unsigned mask = 1u << SMARTT_EV_SENT | 1u << SMARTT_EV_FAILED | 1u << SMARTT_EV_ERROR;
    if (!r)
        r = smartt_wait(s, tag, mask, &ev, timeout_ms);
    if (r == SMARTT_ETIMEDOUT && big)
        smartt_memfd_close(&s->big); /* still in flight: the next big send takes a new one */
    if (!r && ev.type == SMARTT_EV_ERROR && ev.status == SMARTT_EDAEMON(9)) {
        s->fd_threshold = -1; /* the daemon refuses our memfds: stream from now on */
        return smartt_send(s, to, buf, len, out, timeout_ms);
    }
    if (!r) {
        smartt_event a;
        while (evq_take(&s->done, tag, 1u << SMARTT_EV_ACCEPTED, &a))
            ;
        if (out)
            *out = ev;
        r = ev.status;
    }
    return r;
}

int smartt_recv(smartt_session *s, smartt_event *ev, int timeout_ms)
{
    int r = smartt_wait(s, 0, 1u << SMARTT_EV_RECV, ev, timeout_ms);
    if (!r && ev->type == SMARTT_EV_ERROR)
        return ev->status;
    return r;
}

int smartt_ring_enable(smartt_session *s, uint64_t size, uint64_t min_message, int timeout_ms)
{
    uint32_t tag;
    smartt_event ev;
    int r = smartt_ring_start(s, size, min_message, &tag);
    if (!r)
        r = smartt_wait(s, tag, 1u << SMARTT_EV_RING_OK | 1u << SMARTT_EV_ERROR, &ev, timeout_ms);
    if (!r && ev.type == SMARTT_EV_ERROR)
        r = ev.status; /* the parser unmapped the ring */
    return r;
}

uint64_t smartt_ring_auto(const smartt_session *s)
{
    return s && s->auto_state == AUTO_ON ? s->auto_size : 0;
}

/* auto_ring_start sets up the automatic ring for messages of size bytes if it is worth
 * it (a reader's call, from parse.c); at most once per session. */
void auto_ring_start(smartt_session *s, uint64_t size)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t cap = s->max_ring < MAX_AUTO_RING ? s->max_ring : MAX_AUTO_RING;
    uint64_t ring = (size * AUTO_RING_MSGS + page - 1) / page * page;
    cap = cap / page * page;
    s->auto_state = AUTO_OFF;
    if (2 * size > cap || s->ring || s->ring_tag)
        return;
    uint32_t tag;
    if (smartt_ring_start(s, ring < cap ? ring : cap, AUTO_RING_MIN, &tag) == 0)
        s->auto_state = AUTO_TRYING, s->auto_tag = tag;
}
