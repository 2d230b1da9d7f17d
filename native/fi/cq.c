/* The smartt provider's completion queues and counters. Reading one drives the
 * progress of the endpoints bound to it (FI_PROGRESS_MANUAL). */
#include "sfi.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* env_num reads a decimal environment variable in [0, max] (else def). */
static long env_num(const char *name, long def, long max)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < 0 || x > max ? def : x;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sfi_cq_push(sfi_cq *cq, void *ctx, uint64_t flags, size_t len, void *buf, uint64_t data,
                 uint64_t tag, fi_addr_t src)
{
    if (cq->n == cq->cap) { /* grow: completions are never dropped */
        size_t nc = cq->cap * 2;
        sfi_comp *r = malloc(nc * sizeof *r);
        if (!r) {
            FI_WARN(&sfi_prov, FI_LOG_CQ, "out of memory: a completion is lost\n");
            return;
        }
        for (size_t i = 0; i < cq->n; i++)
            r[i] = cq->ring[(cq->head + i) % cq->cap];
        free(cq->ring);
        cq->ring = r, cq->cap = nc, cq->head = 0;
    }
    sfi_comp *c = &cq->ring[(cq->head + cq->n) % cq->cap];
    c->e = (struct fi_cq_tagged_entry){ctx, flags, len, buf, data, tag};
    c->src = src;
    cq->n++;
}

void sfi_cq_push_err(sfi_cq *cq, void *ctx, uint64_t flags, int err, int prov_errno, size_t len,
                     size_t olen, uint64_t tag, uint64_t data, const char *text)
{
    sfi_cqerr *e = calloc(1, sizeof *e);
    if (!e) {
        FI_WARN(&sfi_prov, FI_LOG_CQ, "out of memory: an error completion is lost\n");
        return;
    }
    e->e.op_context = ctx;
    e->e.flags = flags;
    e->e.len = len;
    e->e.olen = olen;
    e->e.tag = tag;
    e->e.data = data;
    e->e.err = err;
    e->e.prov_errno = prov_errno;
    if (text && *text) {
        strncpy(cq->errtext, text, sizeof cq->errtext - 1);
        cq->errtext[sizeof cq->errtext - 1] = 0;
    }
    sfi_list_push(&cq->errs, &e->node);
}

int sfi_cq_add_ep(sfi_cq *cq, sfi_ep *ep)
{
    for (int i = 0; i < cq->neps; i++)
        if (cq->eps[i] == ep)
            return 0;
    if (cq->neps == SFI_MAX_EPS)
        return -FI_ENOSPC;
    cq->eps[cq->neps++] = ep;
    cq->refs++;
    if (cq->epfd >= 0 && ep->s) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ep};
        epoll_ctl(cq->epfd, EPOLL_CTL_ADD, smartt_poll_fd(ep->s), &ev);
    }
    return 0;
}

void sfi_cq_del_ep(sfi_cq *cq, sfi_ep *ep)
{
    for (int i = 0; i < cq->neps; i++) {
        if (cq->eps[i] != ep)
            continue;
        cq->eps[i] = cq->eps[--cq->neps];
        cq->refs--;
        if (cq->epfd >= 0 && ep->s)
            epoll_ctl(cq->epfd, EPOLL_CTL_DEL, smartt_poll_fd(ep->s), NULL);
        return;
    }
}

static void cq_progress(sfi_cq *cq)
{
    for (int i = 0; i < cq->neps; i++)
        sfi_ep_progress(cq->eps[i]);
}

static void copy_out(const sfi_cq *cq, void *buf, size_t i, const sfi_comp *c)
{
    switch (cq->format) {
    case FI_CQ_FORMAT_MSG: {
        struct fi_cq_msg_entry *m = (struct fi_cq_msg_entry *)buf + i;
        *m = (struct fi_cq_msg_entry){c->e.op_context, c->e.flags, c->e.len};
        break;
    }
    case FI_CQ_FORMAT_DATA: {
        struct fi_cq_data_entry *m = (struct fi_cq_data_entry *)buf + i;
        *m = (struct fi_cq_data_entry){c->e.op_context, c->e.flags, c->e.len, c->e.buf, c->e.data};
        break;
    }
    case FI_CQ_FORMAT_TAGGED:
        ((struct fi_cq_tagged_entry *)buf)[i] = c->e;
        break;
    default:
        ((struct fi_cq_entry *)buf)[i].op_context = c->e.op_context;
    }
}

static ssize_t cq_take(sfi_cq *cq, void *buf, size_t count, fi_addr_t *src)
{
    if (cq->errs.n)
        return -FI_EAVAIL;
    if (!cq->n)
        return -FI_EAGAIN;
    size_t k = 0;
    while (k < count && cq->n) {
        const sfi_comp *c = &cq->ring[cq->head];
        copy_out(cq, buf, k, c);
        if (src)
            src[k] = c->src;
        cq->head = (cq->head + 1) % cq->cap;
        cq->n--;
        k++;
    }
    return (ssize_t)k;
}

/* cq_pollfds fills p (room for SFI_MAX_EPS) with the sockets of the CQ's live
 * endpoints, each waiting for input and for output when it has bytes to write. */
static nfds_t cq_pollfds(sfi_cq *cq, struct pollfd *p)
{
    nfds_t n = 0;
    pthread_mutex_lock(&cq->dom->lock);
    for (int i = 0; i < cq->neps; i++) {
        sfi_ep *ep = cq->eps[i];
        if (!ep->s || ep->broken)
            continue;
        p[n].fd = smartt_poll_fd(ep->s); /* the daemon's socket and the direct path's pairs */
        p[n].events = (short)smartt_poll_events(ep->s);
        p[n++].revents = 0;
    }
    pthread_mutex_unlock(&cq->dom->lock);
    return n;
}

/* cq_idle gives the core away after a run of empty reads (SMARTT_FI_IDLE_SPIN,
 * SMARTT_FI_IDLE_US): yields it, or sleeps in poll() until a session has bytes. */
static void cq_idle(sfi_cq *cq)
{
    if (!cq->idle_us) {
        sched_yield();
        return;
    }
    struct pollfd p[SFI_MAX_EPS];
    nfds_t n = cq_pollfds(cq, p);
    struct timespec ts = {cq->idle_us / 1000000, (cq->idle_us % 1000000) * 1000};
    ppoll(p, n, &ts, NULL);
}

static ssize_t cq_readfrom(struct fid_cq *f, void *buf, size_t count, fi_addr_t *src)
{
    sfi_cq *cq = container_of(f, sfi_cq, cq);
    if (!buf && count)
        return -FI_EINVAL;
    pthread_mutex_lock(&cq->dom->lock);
    if (!cq->n && !cq->errs.n)
        cq_progress(cq);
    int empty = !cq->n && !cq->errs.n;
    ssize_t r = count ? cq_take(cq, buf, count, src) : (cq->errs.n ? -FI_EAVAIL : -FI_EAGAIN);
    int idle = empty && cq->idle_spin && ++cq->idle >= cq->idle_spin;
    if (!empty || idle)
        cq->idle = 0;
    pthread_mutex_unlock(&cq->dom->lock);
    if (idle)
        cq_idle(cq);
    return r;
}

static ssize_t cq_read(struct fid_cq *f, void *buf, size_t count)
{
    return cq_readfrom(f, buf, count, NULL);
}

static ssize_t cq_readerr(struct fid_cq *f, struct fi_cq_err_entry *buf, uint64_t flags)
{
    sfi_cq *cq = container_of(f, sfi_cq, cq);
    (void)flags;
    if (!buf)
        return -FI_EINVAL;
    pthread_mutex_lock(&cq->dom->lock);
    sfi_cqerr *e = (sfi_cqerr *)cq->errs.head;
    ssize_t r = -FI_EAGAIN;
    if (e) {
        sfi_list_remove(&cq->errs, &e->node);
        void *keep = buf->err_data; /* the caller's; the provider writes no error data */
        *buf = e->e;
        buf->err_data = keep;
        buf->err_data_size = 0;
        free(e);
        r = 1;
    }
    pthread_mutex_unlock(&cq->dom->lock);
    return r;
}

/* cq_wait blocks up to ms on the sockets of the CQ's endpoints and its signal. */
static void cq_wait(sfi_cq *cq, int ms)
{
    struct pollfd p[SFI_MAX_EPS + 1];
    nfds_t n = cq_pollfds(cq, p);
    p[n].fd = cq->sigfd;
    p[n].events = POLLIN;
    p[n++].revents = 0;
    if (poll(p, (nfds_t)n, ms) > 0 && (p[n - 1].revents & POLLIN)) {
        uint64_t v;
        if (read(cq->sigfd, &v, sizeof v) < 0) {
            /* raced with another reader */
        }
    }
}

static ssize_t cq_sreadfrom(struct fid_cq *f, void *buf, size_t count, fi_addr_t *src,
                            const void *cond, int timeout)
{
    (void)cond;
    sfi_cq *cq = container_of(f, sfi_cq, cq);
    if (cq->wait_obj == FI_WAIT_NONE)
        return -FI_ENOSYS;
    long long dl = timeout < 0 ? -1 : now_ms() + timeout;
    for (;;) {
        ssize_t r = cq_readfrom(f, buf, count, src);
        if (r != -FI_EAGAIN)
            return r;
        int left = dl < 0 ? 100 : (int)(dl - now_ms());
        if (dl >= 0 && left <= 0)
            return -FI_EAGAIN;
        cq_wait(cq, left > 100 ? 100 : left);
    }
}

static ssize_t cq_sread(struct fid_cq *f, void *buf, size_t count, const void *cond, int timeout)
{
    return cq_sreadfrom(f, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *f)
{
    sfi_cq *cq = container_of(f, sfi_cq, cq);
    uint64_t one = 1;
    return write(cq->sigfd, &one, sizeof one) < 0 ? -FI_EIO : 0;
}

static const char *cq_strerror(struct fid_cq *f, int prov_errno, const void *d, char *buf, size_t len)
{
    sfi_cq *cq = container_of(f, sfi_cq, cq);
    (void)d;
    const char *s = cq->errtext[0] ? cq->errtext : smartt_strerror(-prov_errno);
    if (buf && len) {
        strncpy(buf, s, len - 1);
        buf[len - 1] = 0;
        return buf;
    }
    return s;
}

static struct fi_ops_cq cq_ops = {
    .size = sizeof(struct fi_ops_cq), .read = cq_read, .readfrom = cq_readfrom,
    .readerr = cq_readerr, .sread = cq_sread, .sreadfrom = cq_sreadfrom,
    .signal = cq_signal, .strerror = cq_strerror,
};

static int cq_close(struct fid *fid)
{
    sfi_cq *cq = container_of(fid, sfi_cq, cq.fid);
    if (cq->refs)
        return -FI_EBUSY;
    while (cq->errs.head) {
        sfi_node *n = cq->errs.head;
        sfi_list_remove(&cq->errs, n);
        free(n);
    }
    pthread_mutex_lock(&cq->dom->lock);
    cq->dom->refs--;
    pthread_mutex_unlock(&cq->dom->lock);
    if (cq->epfd >= 0)
        close(cq->epfd);
    close(cq->sigfd);
    free(cq->ring);
    free(cq);
    return 0;
}

static int cq_control(struct fid *fid, int cmd, void *arg)
{
    sfi_cq *cq = container_of(fid, sfi_cq, cq.fid);
    if (cmd != FI_GETWAIT)
        return -FI_ENOSYS;
    if (cq->epfd < 0 || !arg)
        return -FI_ENODATA;
    *(int *)arg = cq->epfd;
    return 0;
}

static struct fi_ops cq_fi_ops = {
    .size = sizeof(struct fi_ops), .close = cq_close, .bind = sfi_no_bind,
    .control = cq_control, .ops_open = sfi_no_ops_open,
};

int sfi_cq_open(struct fid_domain *d, struct fi_cq_attr *attr, struct fid_cq **out, void *ctx)
{
    if (!attr || !out)
        return -FI_EINVAL;
    if (attr->format > FI_CQ_FORMAT_TAGGED)
        return -FI_ENOSYS;
    if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC &&
        attr->wait_obj != FI_WAIT_FD)
        return -FI_ENOSYS;
    if (attr->flags & FI_AFFINITY)
        return -FI_ENOSYS;
    sfi_domain *dom = container_of(d, sfi_domain, d);
    sfi_cq *cq = calloc(1, sizeof *cq);
    if (!cq)
        return -FI_ENOMEM;
    cq->dom = dom;
    cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
    cq->wait_obj = attr->wait_obj;
    cq->idle_spin = (unsigned)env_num("SMARTT_FI_IDLE_SPIN", 64, 1u << 30);
    cq->idle_us = env_num("SMARTT_FI_IDLE_US", 0, 1000);
    cq->cap = attr->size ? attr->size : 1024;
    cq->ring = malloc(cq->cap * sizeof *cq->ring);
    cq->sigfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    cq->epfd = attr->wait_obj == FI_WAIT_FD ? epoll_create1(EPOLL_CLOEXEC) : -1;
    if (!cq->ring || cq->sigfd < 0 || (attr->wait_obj == FI_WAIT_FD && cq->epfd < 0)) {
        free(cq->ring);
        if (cq->sigfd >= 0)
            close(cq->sigfd);
        if (cq->epfd >= 0)
            close(cq->epfd);
        free(cq);
        return -FI_ENOMEM;
    }
    if (cq->epfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(cq->epfd, EPOLL_CTL_ADD, cq->sigfd, &ev);
    }
    cq->cq.fid.fclass = FI_CLASS_CQ;
    cq->cq.fid.context = ctx;
    cq->cq.fid.ops = &cq_fi_ops;
    cq->cq.ops = &cq_ops;
    pthread_mutex_lock(&dom->lock);
    dom->refs++;
    pthread_mutex_unlock(&dom->lock);
    *out = &cq->cq;
    return 0;
}

/* ---- counters ---- */

int sfi_cntr_add_ep(sfi_cntr *c, sfi_ep *ep)
{
    for (int i = 0; i < c->neps; i++)
        if (c->eps[i] == ep)
            return 0;
    if (c->neps == SFI_MAX_EPS)
        return -FI_ENOSPC;
    c->eps[c->neps++] = ep;
    c->refs++;
    return 0;
}

void sfi_cntr_del_ep(sfi_cntr *c, sfi_ep *ep)
{
    for (int i = 0; i < c->neps; i++)
        if (c->eps[i] == ep) {
            c->eps[i] = c->eps[--c->neps];
            c->refs--;
            return;
        }
}

static uint64_t cntr_get(struct fid_cntr *f, int err)
{
    sfi_cntr *c = container_of(f, sfi_cntr, c);
    pthread_mutex_lock(&c->dom->lock);
    for (int i = 0; i < c->neps; i++)
        sfi_ep_progress(c->eps[i]);
    uint64_t v = err ? c->err : c->val;
    pthread_mutex_unlock(&c->dom->lock);
    return v;
}

static uint64_t cntr_read(struct fid_cntr *f) { return cntr_get(f, 0); }
static uint64_t cntr_readerr(struct fid_cntr *f) { return cntr_get(f, 1); }

static int cntr_mod(struct fid_cntr *f, uint64_t v, int err, int add)
{
    sfi_cntr *c = container_of(f, sfi_cntr, c);
    pthread_mutex_lock(&c->dom->lock);
    uint64_t *p = err ? &c->err : &c->val;
    *p = add ? *p + v : v;
    pthread_mutex_unlock(&c->dom->lock);
    return 0;
}

static int cntr_add(struct fid_cntr *f, uint64_t v) { return cntr_mod(f, v, 0, 1); }
static int cntr_set(struct fid_cntr *f, uint64_t v) { return cntr_mod(f, v, 0, 0); }
static int cntr_adderr(struct fid_cntr *f, uint64_t v) { return cntr_mod(f, v, 1, 1); }
static int cntr_seterr(struct fid_cntr *f, uint64_t v) { return cntr_mod(f, v, 1, 0); }

static int cntr_wait(struct fid_cntr *f, uint64_t threshold, int timeout)
{
    sfi_cntr *c = container_of(f, sfi_cntr, c);
    long long dl = timeout < 0 ? -1 : now_ms() + timeout;
    uint64_t err0 = cntr_readerr(f);
    for (;;) {
        if (cntr_read(f) >= threshold)
            return 0;
        if (cntr_readerr(f) != err0)
            return -FI_EAVAIL;
        if (dl >= 0 && now_ms() >= dl)
            return -FI_ETIMEDOUT;
        struct pollfd p[SFI_MAX_EPS];
        int n = 0;
        pthread_mutex_lock(&c->dom->lock);
        for (int i = 0; i < c->neps; i++)
            if (c->eps[i]->s && !c->eps[i]->broken)
                p[n].fd = smartt_poll_fd(c->eps[i]->s), p[n].events = POLLIN, p[n++].revents = 0;
        pthread_mutex_unlock(&c->dom->lock);
        if (poll(p, (nfds_t)n, 10) < 0 && errno != EINTR)
            return -FI_EIO;
    }
}

static struct fi_ops_cntr cntr_ops = {
    .size = sizeof(struct fi_ops_cntr), .read = cntr_read, .readerr = cntr_readerr,
    .add = cntr_add, .set = cntr_set, .wait = cntr_wait, .adderr = cntr_adderr,
    .seterr = cntr_seterr,
};

static int cntr_close(struct fid *fid)
{
    sfi_cntr *c = container_of(fid, sfi_cntr, c.fid);
    if (c->refs)
        return -FI_EBUSY;
    pthread_mutex_lock(&c->dom->lock);
    c->dom->refs--;
    pthread_mutex_unlock(&c->dom->lock);
    free(c);
    return 0;
}

static struct fi_ops cntr_fi_ops = {
    .size = sizeof(struct fi_ops), .close = cntr_close, .bind = sfi_no_bind,
    .control = sfi_no_control, .ops_open = sfi_no_ops_open,
};

int sfi_cntr_open(struct fid_domain *d, struct fi_cntr_attr *attr, struct fid_cntr **out, void *ctx)
{
    if (!out)
        return -FI_EINVAL;
    if (attr && attr->events != FI_CNTR_EVENTS_COMP)
        return -FI_ENOSYS;
    if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC)
        return -FI_ENOSYS;
    sfi_domain *dom = container_of(d, sfi_domain, d);
    sfi_cntr *c = calloc(1, sizeof *c);
    if (!c)
        return -FI_ENOMEM;
    c->dom = dom;
    c->c.fid.fclass = FI_CLASS_CNTR;
    c->c.fid.context = ctx;
    c->c.fid.ops = &cntr_fi_ops;
    c->c.ops = &cntr_ops;
    pthread_mutex_lock(&dom->lock);
    dom->refs++;
    pthread_mutex_unlock(&dom->lock);
    *out = &c->c;
    return 0;
}
