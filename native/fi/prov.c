/* The smartt provider: its entry point, fi_getinfo, the fabric, domain, EQ and MRs. */
#include "sfi.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

void sfi_list_push(sfi_list *l, sfi_node *x)
{
    x->next = NULL;
    x->prev = l->tail;
    if (l->tail)
        l->tail->next = x;
    else
        l->head = x;
    l->tail = x;
    l->n++;
}

void sfi_list_remove(sfi_list *l, sfi_node *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        l->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        l->tail = x->prev;
    x->next = x->prev = NULL;
    l->n--;
}

/* sfi_err maps a libsmartt code to a negative FI_E* code. */
int sfi_err(int c)
{
    switch (c) {
    case SMARTT_OK: return 0;
    case SMARTT_EINVAL: return -FI_EINVAL;
    case SMARTT_ENOMEM: return -FI_ENOMEM;
    case SMARTT_ECONNECT: return -FI_ECONNREFUSED;
    case SMARTT_ECLOSED: return -FI_ECONNRESET;
    case SMARTT_EAGAIN: return -FI_EAGAIN;
    case SMARTT_ETIMEDOUT: return -FI_ETIMEDOUT;
    case SMARTT_ENOTSUP: return -FI_EOPNOTSUPP;
    case SMARTT_EFAILED: return -FI_EIO;
    case SMARTT_EBUSY: return -FI_EBUSY;
    case SMARTT_EDAEMON(4): return -FI_EMSGSIZE;
    case SMARTT_EDAEMON(5): return -FI_EAGAIN;
    case SMARTT_EDAEMON(10): return -FI_EADDRNOTAVAIL;
    default: return -FI_EIO;
    }
}

/* ---- the daemon's settings, asked once per fi_getinfo ---- */

/* sfi_unordered says whether the daemon delivers out of order (1), in order (0), or
 * cannot be asked (-1). */
static int sfi_unordered(void)
{
    char *body = NULL;
    int r = smartt_get(NULL, "/v1/config", &body, 2000);
    if (r != 200 || !body) {
        free(body);
        return -1;
    }
    const char *p = strstr(body, "\"unordered\"");
    int un = 0;
    if (p) {
        p += strlen("\"unordered\"");
        while (*p == ' ' || *p == ':')
            p++;
        un = strncmp(p, "true", 4) == 0;
    }
    free(body);
    return un;
}

/* ---- fi_getinfo ---- */

static int hints_ok(uint32_t version, const struct fi_info *h, uint64_t order)
{
    (void)version;
    if (!h)
        return 1;
    if (h->caps & ~SFI_CAPS)
        return 0;
    if (h->addr_format != FI_FORMAT_UNSPEC)
        return 0;
    if (h->ep_attr) {
        if (h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_RDM)
            return 0;
        if (h->ep_attr->max_msg_size > SFI_MAX_MSG)
            return 0;
        if (h->ep_attr->tx_ctx_cnt > 1 && h->ep_attr->tx_ctx_cnt != FI_SHARED_CONTEXT)
            return 0;
        if (h->ep_attr->rx_ctx_cnt > 1 && h->ep_attr->rx_ctx_cnt != FI_SHARED_CONTEXT)
            return 0;
    }
    if (h->tx_attr) {
        if (h->tx_attr->msg_order & ~order)
            return 0;
        if (h->tx_attr->inject_size > SFI_INJECT)
            return 0;
        if (h->tx_attr->caps & ~SFI_CAPS)
            return 0;
    }
    if (h->rx_attr && ((h->rx_attr->msg_order & ~order) || (h->rx_attr->caps & ~SFI_CAPS)))
        return 0;
    if (h->domain_attr) {
        if (h->domain_attr->name && strcmp(h->domain_attr->name, SFI_NAME))
            return 0;
        if (h->domain_attr->cq_data_size > SFI_CQ_DATA)
            return 0;
    }
    if (h->fabric_attr && h->fabric_attr->name && strcmp(h->fabric_attr->name, SFI_NAME))
        return 0;
    return 1;
}

static void fill_info(struct fi_info *fi, uint32_t version, const struct fi_info *h,
                      uint64_t order)
{
    uint64_t caps = SFI_CAPS;
    if (h && h->caps)
        caps = h->caps | (SFI_CAPS & (FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM));
    fi->caps = caps;
    fi->mode = 0;
    fi->addr_format = FI_FORMAT_UNSPEC;
    *fi->tx_attr = (struct fi_tx_attr){.caps = caps & ~(FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE),
                                       .msg_order = order, .inject_size = SFI_INJECT,
                                       .size = SFI_QSIZE, .iov_limit = SFI_IOV_MAX};
    *fi->rx_attr = (struct fi_rx_attr){.caps = caps & ~FI_SEND, .msg_order = order,
                                       .size = SFI_QSIZE, .iov_limit = SFI_IOV_MAX};
    if (h && h->tx_attr)
        fi->tx_attr->op_flags = h->tx_attr->op_flags & (FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                                        FI_DELIVERY_COMPLETE | FI_COMPLETION);
    if (h && h->rx_attr)
        fi->rx_attr->op_flags = h->rx_attr->op_flags & (FI_COMPLETION | FI_MULTI_RECV);
    fi->ep_attr->type = FI_EP_RDM;
    fi->ep_attr->protocol = FI_PROTO_UNSPEC;
    fi->ep_attr->max_msg_size = SFI_MAX_MSG;
    fi->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaull; /* 64 tag bits, as tcp;rxm says */
    fi->ep_attr->tx_ctx_cnt = 1;
    fi->ep_attr->rx_ctx_cnt = 1;
    struct fi_domain_attr *d = fi->domain_attr;
    d->name = strdup(SFI_NAME);
    d->threading = h && h->domain_attr && h->domain_attr->threading ? h->domain_attr->threading : FI_THREAD_SAFE;
    d->control_progress = FI_PROGRESS_MANUAL;
    d->data_progress = FI_PROGRESS_MANUAL;
    d->resource_mgmt = FI_RM_ENABLED;
    d->av_type = h && h->domain_attr && h->domain_attr->av_type ? h->domain_attr->av_type : FI_AV_UNSPEC;
    d->mr_mode = version < FI_VERSION(1, 5) ? FI_MR_SCALABLE : 0;
    d->mr_key_size = 8;
    d->cq_data_size = SFI_CQ_DATA;
    d->cq_cnt = 256;
    d->ep_cnt = 256;
    d->tx_ctx_cnt = 256;
    d->rx_ctx_cnt = 256;
    d->max_ep_tx_ctx = 1;
    d->max_ep_rx_ctx = 1;
    d->mr_iov_limit = 1;
    d->mr_cnt = 1 << 20;
    d->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
    fi->fabric_attr->name = strdup(SFI_NAME);
    fi->fabric_attr->prov_version = SFI_VERSION;
    fi->fabric_attr->api_version = SFI_API;
}

static int sfi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                       const struct fi_info *hints, struct fi_info **info)
{
    int un = sfi_unordered();
    uint64_t order = un == 1 ? 0 : FI_ORDER_SAS;
    if (!hints_ok(version, hints, order))
        return -FI_ENODATA;
    unsigned char name[SFI_ADDRLEN];
    int have = 0;
    if (node || service) {
        if (sfi_parse_name(name, node, service))
            return -FI_ENODATA;
        have = 1;
    }
    struct fi_info *fi = fi_allocinfo();
    if (!fi)
        return -FI_ENOMEM;
    fill_info(fi, version, hints, order);
    if (!fi->domain_attr->name || !fi->fabric_attr->name) {
        fi_freeinfo(fi);
        return -FI_ENOMEM;
    }
    if (have) {
        void *a = malloc(SFI_ADDRLEN);
        if (!a) {
            fi_freeinfo(fi);
            return -FI_ENOMEM;
        }
        memcpy(a, name, SFI_ADDRLEN);
        if (flags & FI_SOURCE)
            fi->src_addr = a, fi->src_addrlen = SFI_ADDRLEN;
        else
            fi->dest_addr = a, fi->dest_addrlen = SFI_ADDRLEN;
    }
    *info = fi;
    return 0;
}

/* ---- memory registration: bookkeeping only ---- */

static int mr_close(struct fid *fid)
{
    free(container_of(fid, sfi_mr, mr.fid));
    return 0;
}

static struct fi_ops mr_fi_ops = {
    .size = sizeof(struct fi_ops), .close = mr_close, .bind = sfi_no_bind,
    .control = sfi_no_control, .ops_open = sfi_no_ops_open,
};

static int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                      struct fid_mr **out)
{
    (void)flags;
    if (!attr || !out || fid->fclass != FI_CLASS_DOMAIN)
        return -FI_EINVAL;
    if (attr->iface != FI_HMEM_SYSTEM)
        return -FI_EOPNOTSUPP;
    sfi_domain *d = container_of(fid, sfi_domain, d.fid);
    sfi_mr *m = calloc(1, sizeof *m);
    if (!m)
        return -FI_ENOMEM;
    m->dom = d;
    m->mr.fid.fclass = FI_CLASS_MR;
    m->mr.fid.context = attr->context;
    m->mr.fid.ops = &mr_fi_ops;
    m->mr.mem_desc = m;
    pthread_mutex_lock(&d->lock);
    m->mr.key = attr->requested_key ? attr->requested_key : ++d->next_key;
    pthread_mutex_unlock(&d->lock);
    *out = &m->mr;
    return 0;
}

static int mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
                   uint64_t offset, uint64_t key, uint64_t flags, struct fid_mr **mr, void *ctx)
{
    struct fi_mr_attr a = {.mr_iov = iov, .iov_count = count, .access = access,
                           .offset = offset, .requested_key = key, .context = ctx};
    return mr_regattr(fid, &a, flags, mr);
}

static int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
                  uint64_t key, uint64_t flags, struct fid_mr **mr, void *ctx)
{
    struct iovec iov = {(void *)buf, len};
    return mr_regv(fid, &iov, 1, access, offset, key, flags, mr, ctx);
}

static struct fi_ops_mr dom_mr_ops = {
    .size = sizeof(struct fi_ops_mr), .reg = mr_reg, .regv = mr_regv, .regattr = mr_regattr,
};

/* ---- domain ---- */

static int dom_close(struct fid *fid)
{
    sfi_domain *d = container_of(fid, sfi_domain, d.fid);
    if (d->refs)
        return -FI_EBUSY;
    pthread_mutex_destroy(&d->lock);
    fi_freeinfo(d->info);
    free(d);
    return 0;
}

static struct fi_ops dom_fi_ops = {
    .size = sizeof(struct fi_ops), .close = dom_close, .bind = sfi_no_bind,
    .control = sfi_no_control, .ops_open = sfi_no_ops_open,
};

static int dom_scalable_ep(struct fid_domain *d, struct fi_info *i, struct fid_ep **e, void *c)
{
    (void)d, (void)i, (void)e, (void)c;
    return -FI_ENOSYS;
}

static int dom_poll_open(struct fid_domain *d, struct fi_poll_attr *a, struct fid_poll **p)
{
    (void)d, (void)a, (void)p;
    return -FI_ENOSYS;
}

static int dom_stx(struct fid_domain *d, struct fi_tx_attr *a, struct fid_stx **s, void *c)
{
    (void)d, (void)a, (void)s, (void)c;
    return -FI_ENOSYS;
}

static int dom_srx(struct fid_domain *d, struct fi_rx_attr *a, struct fid_ep **e, void *c)
{
    (void)d, (void)a, (void)e, (void)c;
    return -FI_ENOSYS;
}

static int dom_query_atomic(struct fid_domain *d, enum fi_datatype t, enum fi_op o,
                            struct fi_atomic_attr *a, uint64_t f)
{
    (void)d, (void)t, (void)o, (void)a, (void)f;
    return -FI_EOPNOTSUPP;
}

static int dom_query_coll(struct fid_domain *d, enum fi_collective_op o,
                          struct fi_collective_attr *a, uint64_t f)
{
    (void)d, (void)o, (void)a, (void)f;
    return -FI_EOPNOTSUPP;
}

static int dom_ep2(struct fid_domain *d, struct fi_info *i, struct fid_ep **e, uint64_t f, void *c)
{
    if (f)
        return -FI_EBADFLAGS;
    return sfi_ep_open(d, i, e, c);
}

static struct fi_ops_domain dom_ops = {
    .size = sizeof(struct fi_ops_domain), .av_open = sfi_av_open, .cq_open = sfi_cq_open,
    .endpoint = sfi_ep_open, .scalable_ep = dom_scalable_ep, .cntr_open = sfi_cntr_open,
    .poll_open = dom_poll_open, .stx_ctx = dom_stx, .srx_ctx = dom_srx,
    .query_atomic = dom_query_atomic, .query_collective = dom_query_coll, .endpoint2 = dom_ep2,
};

static int fab_domain(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **dom,
                      void *ctx)
{
    (void)fab;
    if (!info || !dom)
        return -FI_EINVAL;
    if (info->domain_attr && info->domain_attr->name && strcmp(info->domain_attr->name, SFI_NAME))
        return -FI_EINVAL;
    sfi_domain *d = calloc(1, sizeof *d);
    if (!d)
        return -FI_ENOMEM;
    d->info = fi_dupinfo(info);
    if (!d->info) {
        free(d);
        return -FI_ENOMEM;
    }
    pthread_mutex_init(&d->lock, NULL);
    d->d.fid.fclass = FI_CLASS_DOMAIN;
    d->d.fid.context = ctx;
    d->d.fid.ops = &dom_fi_ops;
    d->d.ops = &dom_ops;
    d->d.mr = &dom_mr_ops;
    *dom = &d->d;
    return 0;
}

static int fab_domain2(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **dom,
                       uint64_t flags, void *ctx)
{
    if (flags)
        return -FI_EBADFLAGS;
    return fab_domain(fab, info, dom, ctx);
}

static int fab_pep(struct fid_fabric *f, struct fi_info *i, struct fid_pep **p, void *c)
{
    (void)f, (void)i, (void)p, (void)c;
    return -FI_ENOSYS;
}

static int fab_wait_open(struct fid_fabric *f, struct fi_wait_attr *a, struct fid_wait **w)
{
    (void)f, (void)a, (void)w;
    return -FI_ENOSYS;
}

/* fab_trywait: -FI_EAGAIN if any CQ has completions (the app must read, not block). */
static int fab_trywait(struct fid_fabric *f, struct fid **fids, int count)
{
    (void)f;
    for (int i = 0; i < count; i++) {
        if (!fids[i])
            return -FI_EINVAL;
        if (fids[i]->fclass == FI_CLASS_CQ) {
            sfi_cq *cq = container_of(fids[i], sfi_cq, cq.fid);
            pthread_mutex_lock(&cq->dom->lock);
            for (int k = 0; k < cq->neps; k++)
                sfi_ep_progress(cq->eps[k]);
            int busy = cq->n || cq->errs.n;
            pthread_mutex_unlock(&cq->dom->lock);
            if (busy)
                return -FI_EAGAIN;
        } else if (fids[i]->fclass == FI_CLASS_EQ) {
            sfi_eq *eq = container_of(fids[i], sfi_eq, eq.fid);
            pthread_mutex_lock(&eq->lock);
            int busy = eq->evs.n != 0;
            pthread_mutex_unlock(&eq->lock);
            if (busy)
                return -FI_EAGAIN;
        } else {
            return -FI_EINVAL;
        }
    }
    return 0;
}

static int fab_close(struct fid *fid)
{
    free(container_of(fid, sfi_fabric, f.fid));
    return 0;
}

static struct fi_ops fab_fi_ops = {
    .size = sizeof(struct fi_ops), .close = fab_close, .bind = sfi_no_bind,
    .control = sfi_no_control, .ops_open = sfi_no_ops_open,
};

static struct fi_ops_fabric fab_ops = {
    .size = sizeof(struct fi_ops_fabric), .domain = fab_domain, .passive_ep = fab_pep,
    .eq_open = sfi_eq_open, .wait_open = fab_wait_open, .trywait = fab_trywait,
    .domain2 = fab_domain2,
};

int sfi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fab, void *ctx)
{
    if (!attr || !fab)
        return -FI_EINVAL;
    if (attr->name && strcmp(attr->name, SFI_NAME))
        return -FI_EINVAL;
    sfi_fabric *f = calloc(1, sizeof *f);
    if (!f)
        return -FI_ENOMEM;
    f->f.fid.fclass = FI_CLASS_FABRIC;
    f->f.fid.context = ctx;
    f->f.fid.ops = &fab_fi_ops;
    f->f.ops = &fab_ops;
    f->f.api_version = SFI_API;
    *fab = &f->f;
    return 0;
}

/* ---- event queue (no asynchronous events of our own; fi_eq_write works) ---- */

static int eq_close(struct fid *fid)
{
    sfi_eq *eq = container_of(fid, sfi_eq, eq.fid);
    while (eq->evs.head) {
        sfi_node *n = eq->evs.head;
        sfi_list_remove(&eq->evs, n);
        free(n);
    }
    close(eq->sigfd);
    pthread_mutex_destroy(&eq->lock);
    free(eq);
    return 0;
}

static int eq_control(struct fid *fid, int cmd, void *arg)
{
    sfi_eq *eq = container_of(fid, sfi_eq, eq.fid);
    if (cmd != FI_GETWAIT || !arg)
        return -FI_ENOSYS;
    *(int *)arg = eq->sigfd;
    return 0;
}

static struct fi_ops eq_fi_ops = {
    .size = sizeof(struct fi_ops), .close = eq_close, .bind = sfi_no_bind,
    .control = eq_control, .ops_open = sfi_no_ops_open,
};

static ssize_t eq_take(sfi_eq *eq, uint32_t *event, void *buf, size_t len, uint64_t flags, int err)
{
    pthread_mutex_lock(&eq->lock);
    sfi_eqev *e = (sfi_eqev *)eq->evs.head;
    ssize_t r;
    if (!e) {
        r = -FI_EAGAIN;
    } else if (e->err != err) {
        r = err ? -FI_EAGAIN : -FI_EAVAIL;
    } else if (len < e->len) {
        r = -FI_ETOOSMALL;
    } else {
        if (event)
            *event = e->event;
        memcpy(buf, e->buf, e->len);
        r = (ssize_t)e->len;
        if (!(flags & FI_PEEK)) {
            sfi_list_remove(&eq->evs, &e->node);
            free(e);
            uint64_t v;
            if (!eq->evs.n && read(eq->sigfd, &v, sizeof v) < 0) {
                /* nothing was signalled */
            }
        }
    }
    pthread_mutex_unlock(&eq->lock);
    return r;
}

static ssize_t eq_read(struct fid_eq *f, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
    return eq_take(container_of(f, sfi_eq, eq), event, buf, len, flags, 0);
}

static ssize_t eq_readerr(struct fid_eq *f, struct fi_eq_err_entry *buf, uint64_t flags)
{
    ssize_t r = eq_take(container_of(f, sfi_eq, eq), NULL, buf, sizeof *buf, flags, 1);
    return r;
}

static ssize_t eq_write(struct fid_eq *f, uint32_t event, const void *buf, size_t len, uint64_t flags)
{
    sfi_eq *eq = container_of(f, sfi_eq, eq);
    if (len > 4096 || (!buf && len))
        return -FI_EINVAL;
    sfi_eqev *e = calloc(1, sizeof *e + len);
    if (!e)
        return -FI_ENOMEM;
    e->event = event;
    (void)flags;
    e->len = len;
    if (len)
        memcpy(e->buf, buf, len);
    pthread_mutex_lock(&eq->lock);
    sfi_list_push(&eq->evs, &e->node);
    uint64_t one = 1;
    if (write(eq->sigfd, &one, sizeof one) < 0) {
        /* the counter is saturated: readable anyway */
    }
    pthread_mutex_unlock(&eq->lock);
    return (ssize_t)len;
}

static ssize_t eq_sread(struct fid_eq *f, uint32_t *event, void *buf, size_t len, int timeout,
                        uint64_t flags)
{
    sfi_eq *eq = container_of(f, sfi_eq, eq);
    for (;;) {
        ssize_t r = eq_read(f, event, buf, len, flags);
        if (r != -FI_EAGAIN)
            return r;
        struct pollfd p = {eq->sigfd, POLLIN, 0};
        int n = poll(&p, 1, timeout);
        if (n == 0)
            return -FI_EAGAIN;
        if (n < 0 && errno != EINTR)
            return -FI_EIO;
    }
}

static const char *eq_strerror(struct fid_eq *f, int prov_errno, const void *d, char *buf, size_t len)
{
    (void)f, (void)d;
    const char *s = smartt_strerror(-prov_errno);
    if (buf && len) {
        strncpy(buf, s, len - 1);
        buf[len - 1] = 0;
    }
    return s;
}

static struct fi_ops_eq eq_ops = {
    .size = sizeof(struct fi_ops_eq), .read = eq_read, .readerr = eq_readerr, .write = eq_write,
    .sread = eq_sread, .strerror = eq_strerror,
};

int sfi_eq_open(struct fid_fabric *fab, struct fi_eq_attr *attr, struct fid_eq **out, void *ctx)
{
    (void)fab;
    if (!attr || !out)
        return -FI_EINVAL;
    if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC && attr->wait_obj != FI_WAIT_FD)
        return -FI_ENOSYS;
    sfi_eq *eq = calloc(1, sizeof *eq);
    if (!eq)
        return -FI_ENOMEM;
    eq->sigfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (eq->sigfd < 0) {
        free(eq);
        return -FI_ENOMEM;
    }
    pthread_mutex_init(&eq->lock, NULL);
    eq->eq.fid.fclass = FI_CLASS_EQ;
    eq->eq.fid.context = ctx;
    eq->eq.fid.ops = &eq_fi_ops;
    eq->eq.ops = &eq_ops;
    *out = &eq->eq;
    return 0;
}

/* ---- the provider ---- */

static void sfi_cleanup(void) {}

struct fi_provider sfi_prov = {
    .version = SFI_VERSION,
    .fi_version = SFI_API,
    .name = SFI_NAME,
    .getinfo = sfi_getinfo,
    .fabric = sfi_fabric_open,
    .cleanup = sfi_cleanup,
};

FI_EXT_INI
{
    return &sfi_prov;
}
