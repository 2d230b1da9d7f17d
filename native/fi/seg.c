/* Messages larger than a segment (SMARTT_FI_SEGMENT, default 64 MiB; the daemon takes
 * at most api.max_message bytes in one message): the sender cuts them into smartt
 * messages whose 40-byte envelope carries an id, the whole length and the offset, sent
 * SFI_SEG_INFLIGHT at a time from the caller's buffers; the receiver matches the first
 * segment like any message and writes the others into the same posted buffer. A gap
 * (a segment lost or failed), an abort from the sender or a broken session ends the
 * receive with an error completion, never a partial success. */
#include "sfi.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const unsigned char *p)
{
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* seg_hdr writes a segment's envelope. */
static void seg_hdr(unsigned char *h, const sfi_seg *g, unsigned extra, uint64_t off)
{
    sfi_pack_hdr(h, g->flags, g->tag, g->data);
    h[1] |= (unsigned char)(SFI_F_SEG | extra);
    put32(h + 16, g->id);
    put32(h + 20, 0);
    put64(h + 24, g->total);
    put64(h + 32, off);
}

/* ---- sending ---- */

/* seg_gc frees a message whose outcome is reported and whose segments all ended. */
static int seg_gc(sfi_ep *ep, sfi_seg *g)
{
    if (!g->reported || g->kids || (!g->failed && g->off < g->total))
        return 0;
    sfi_list_remove(&ep->segs, &g->node);
    free(g);
    return 1;
}

static uint64_t seg_cqflags(const sfi_seg *g)
{
    return FI_SEND | ((g->flags & FI_TAGGED) ? FI_TAGGED : FI_MSG);
}

/* seg_fail reports the message failed (once) and tells the receiver to give it up. */
static void seg_fail(sfi_ep *ep, sfi_seg *g, int err, int prov, const char *text)
{
    int started = g->off > 0;
    g->failed = 1;
    if (!g->reported) {
        g->reported = 1;
        if (ep->tx_cq)
            sfi_cq_push_err(ep->tx_cq, g->ctx, seg_cqflags(g), err, prov, 0, 0, g->tag, 0, text);
        if (ep->send_cntr)
            ep->send_cntr->err++;
    }
    if (!started || ep->broken)
        return;
    unsigned char h[SFI_SEGHDR];
    seg_hdr(h, g, SFI_F_ABORT, g->off);
    sfi_tx *tx = calloc(1, sizeof *tx);
    if (tx && !sfi_send_buf(ep, &g->to, h, sizeof h, NULL, 0, 0, 0, tx)) {
        tx->reported = 1; /* best effort: its outcome is nobody's */
        sfi_list_push(&ep->tx, &tx->node);
    } else {
        free(tx);
    }
}

/* pump sends g's next segments while fewer than SFI_SEG_INFLIGHT are outstanding. */
static void pump(sfi_ep *ep, sfi_seg *g)
{
    while (!g->failed && g->off < g->total && g->kids < SFI_SEG_INFLIGHT && !smartt_want_write(ep->s)) {
        uint64_t left = g->total - g->off;
        size_t len = left < ep->seg_max ? (size_t)left : ep->seg_max;
        unsigned char h[SFI_SEGHDR];
        seg_hdr(h, g, 0, g->off);
        sfi_tx *tx = calloc(1, sizeof *tx);
        int r = tx ? sfi_send_buf(ep, &g->to, h, sizeof h, g->iov, g->niov, g->off, len, tx) : SMARTT_ENOMEM;
        if (r == SMARTT_EAGAIN) { /* the direct path's back-pressure: the next progress */
            free(tx);
            break;
        }
        if (r) {
            free(tx);
            seg_fail(ep, g, -sfi_err(r), -r, smartt_strerror(r));
            break;
        }
        tx->parent = g;
        tx->len = len;
        tx->flags = seg_cqflags(g);
        tx->delivery = g->delivery;
        sfi_list_push(&ep->tx, &tx->node);
        sfi_tx_sent_wanted(ep, tx);
        g->kids++;
        g->off += len;
        g->nsent++;
        if (smartt_version(ep->s) < 2 && !tx->delivery)
            sfi_tx_report(ep, tx, 0, 0, NULL);
    }
    seg_gc(ep, g);
}

ssize_t sfi_seg_send(sfi_ep *ep, const struct iovec *iov, size_t niov, const smartt_addr *to,
                     uint64_t tag, uint64_t data, uint64_t flags, void *ctx, int comp, int delivery)
{
    sfi_seg *g = calloc(1, sizeof *g);
    if (!g)
        return -FI_ENOMEM;
    g->ctx = ctx, g->flags = flags, g->tag = tag, g->data = data;
    g->comp = comp, g->delivery = delivery, g->to = *to;
    g->niov = niov;
    for (size_t i = 0; i < niov; i++) {
        g->iov[i] = iov[i];
        g->total += iov[i].iov_len;
    }
    if (++ep->seg_next == 0)
        ep->seg_next = 1;
    g->id = ep->seg_next;
    sfi_list_push(&ep->segs, &g->node);
    pump(ep, g);
    return 0;
}

void sfi_seg_pump(sfi_ep *ep)
{
    for (sfi_node *n = ep->segs.head, *next; n; n = next) {
        next = n->next;
        pump(ep, (sfi_seg *)n);
    }
}

/* sfi_seg_child takes a segment's outcome (the level the message asked for). */
void sfi_seg_child(sfi_ep *ep, sfi_tx *tx, int err, int prov, const char *text)
{
    sfi_seg *g = tx->parent;
    if (err) {
        seg_fail(ep, g, err, prov, text);
        return;
    }
    g->acked++;
    if (g->reported || g->failed || g->off < g->total || g->acked < g->nsent)
        return;
    g->reported = 1;
    if (ep->tx_cq && g->comp)
        sfi_cq_push(ep->tx_cq, g->ctx, seg_cqflags(g), 0, NULL, 0, 0, FI_ADDR_NOTAVAIL);
    if (ep->send_cntr)
        ep->send_cntr->val++;
}

/* sfi_seg_child_free: a segment ended (its final outcome, or the session's end). */
void sfi_seg_child_free(sfi_ep *ep, sfi_tx *tx)
{
    sfi_seg *g = tx->parent;
    tx->parent = NULL;
    g->kids--;
    seg_gc(ep, g);
}

/* ---- receiving ---- */

int sfi_seg_parse(sfi_ux *u, const unsigned char *d, size_t size)
{
    if (size < SFI_SEGHDR || get32(d + 20))
        return -1;
    u->id = get32(d + 16);
    u->total = get64(d + 24);
    u->off = get64(d + 32);
    u->payload = d + SFI_SEGHDR;
    u->len = size - SFI_SEGHDR;
    if (u->flags & SFI_F_ABORT)
        return u->len ? -1 : 0;
    return !u->len || u->off > u->total || u->len > u->total - u->off ? -1 : 0;
}

static sfi_asm *asm_find(sfi_ep *ep, const unsigned char from[SFI_ADDRLEN], uint32_t id)
{
    for (sfi_node *n = ep->asms.head; n; n = n->next) {
        sfi_asm *a = (sfi_asm *)n;
        if (a->id == id && !memcmp(a->from, from, SFI_ADDRLEN))
            return a;
    }
    return NULL;
}

static void asm_fail(sfi_ep *ep, sfi_asm *a, int err)
{
    if (a->has_rx && !a->failed)
        sfi_rx_report_err(ep, a->rx.ctx, a->fl, err, 0, 0, a->tag, a->data);
    a->failed = 1;
}

/* asm_feed writes one segment into a's buffer; the last one completes the receive. */
static void asm_feed(sfi_ep *ep, sfi_asm *a, uint64_t off, const unsigned char *p, size_t len)
{
    a->last_ms = mono_ms();
    if (!a->failed && off != a->got)
        asm_fail(ep, a, FI_EIO); /* a segment is missing: never a partial success */
    if (!a->failed) {
        if (a->has_rx && off < a->rx.cap)
            sfi_copy_in(&a->rx, (size_t)off, p, len);
        a->got = off + len;
    }
    if (off + len < a->total)
        return;
    if (!a->failed && a->has_rx) {
        if (a->total > a->rx.cap)
            sfi_rx_report_err(ep, a->rx.ctx, a->fl, FI_ETRUNC, a->rx.cap, a->total - a->rx.cap, a->tag, a->data);
        else
            sfi_rx_report(ep, &a->rx, a->fl, (size_t)a->total, a->rx.niov ? a->rx.iov[0].iov_base : NULL,
                          a->data, a->tag, a->src, 0);
    }
    sfi_list_remove(&ep->asms, &a->node);
    free(a);
}

/* drop_queued frees the queued segments of message (from, id). */
static void drop_queued(sfi_ep *ep, sfi_list *ux, const unsigned char from[SFI_ADDRLEN], uint32_t id)
{
    for (sfi_node *n = ux->head, *next; n; n = next) {
        next = n->next;
        sfi_ux *x = (sfi_ux *)n;
        unsigned char f[SFI_ADDRLEN];
        sfi_name_from(f, &x->ev.from);
        if ((x->flags & SFI_F_SEG) && x->id == id && !memcmp(f, from, SFI_ADDRLEN))
            sfi_ux_free(ep, ux, x);
    }
}

/* sfi_seg_on_message takes a later segment or an abort of a message being received
 * (1: done with it); 0: match it (a first segment) or queue it. */
int sfi_seg_on_message(sfi_ep *ep, sfi_ux *m, sfi_list *ux)
{
    unsigned char from[SFI_ADDRLEN];
    sfi_name_from(from, &m->ev.from);
    sfi_asm *a = asm_find(ep, from, m->id);
    if (m->flags & SFI_F_ABORT) {
        if (a) {
            asm_fail(ep, a, FI_EIO);
            sfi_list_remove(&ep->asms, &a->node);
            free(a);
        }
        drop_queued(ep, ux, from, m->id);
        return 1;
    }
    if (!m->off || !a)
        return 0;
    asm_feed(ep, a, m->off, m->payload, m->len);
    return 1;
}

/* sfi_seg_deliver starts receiving the message whose first segment u matched rx
 * (FI_DISCARD in rx->flags: drop it), with the segments queued behind u. It returns 1
 * if rx is used up (the caller frees it: the assembly keeps a copy). */
int sfi_seg_deliver(sfi_ep *ep, sfi_rx *rx, sfi_ux *u, sfi_list *ux)
{
    sfi_asm *a = calloc(1, sizeof *a);
    int multi = (rx->flags & FI_MULTI_RECV) != 0;
    uint64_t fl = FI_RECV | ((u->flags & SFI_F_TAGGED) ? FI_TAGGED : FI_MSG) |
                  ((u->flags & SFI_F_DATA) ? FI_REMOTE_CQ_DATA : 0);
    if (!a || multi) { /* a multi-receive buffer takes no segmented message */
        sfi_rx_report_err(ep, rx->ctx, fl, a ? FI_EMSGSIZE : FI_ENOMEM, 0, (size_t)u->total, u->tag, u->data);
        if (!a)
            return !multi;
    }
    sfi_name_from(a->from, &u->ev.from);
    a->id = u->id, a->total = u->total, a->fl = fl, a->tag = u->tag, a->data = u->data;
    a->src = sfi_av_find(ep->av, a->from);
    a->has_rx = !multi && !(rx->flags & FI_DISCARD);
    a->rx = *rx;
    sfi_list_push(&ep->asms, &a->node);
    asm_feed(ep, a, 0, u->payload, u->len);
    for (sfi_node *n = ux->head, *next; n; n = next) { /* segments that came first */
        next = n->next;
        sfi_ux *x = (sfi_ux *)n;
        if (x == u || !(x->flags & SFI_F_SEG) || !x->off || x->id != u->id)
            continue;
        unsigned char f[SFI_ADDRLEN];
        sfi_name_from(f, &x->ev.from);
        if (memcmp(f, a->from, SFI_ADDRLEN))
            continue;
        sfi_asm *b = asm_find(ep, f, x->id);
        if (!b)
            break;
        asm_feed(ep, b, x->off, x->payload, x->len);
        sfi_ux_free(ep, ux, x);
    }
    return !multi;
}

void sfi_seg_break(sfi_ep *ep, int code)
{
    while (ep->segs.head) {
        sfi_seg *g = (sfi_seg *)ep->segs.head;
        if (!g->reported)
            seg_fail(ep, g, FI_EIO, -code, smartt_strerror(code));
        sfi_list_remove(&ep->segs, &g->node);
        free(g);
    }
    while (ep->asms.head) {
        sfi_asm *a = (sfi_asm *)ep->asms.head;
        asm_fail(ep, a, FI_EIO);
        sfi_list_remove(&ep->asms, &a->node);
        free(a);
    }
}

/* sfi_seg_expire fails the segmented receives whose sender went silent (it died, or
 * its segments failed and its abort was lost): nothing waits for ever. */
void sfi_seg_expire(sfi_ep *ep)
{
    long long now = mono_ms();
    for (sfi_node *n = ep->asms.head, *next; n; n = next) {
        next = n->next;
        sfi_asm *a = (sfi_asm *)n;
        if (now - a->last_ms < ep->seg_timeout_ms)
            continue;
        asm_fail(ep, a, FI_ETIMEDOUT);
        sfi_list_remove(&ep->asms, &a->node);
        free(a);
    }
}

void sfi_seg_free_all(sfi_ep *ep)
{
    sfi_list *ls[2] = {&ep->segs, &ep->asms};
    for (int i = 0; i < 2; i++)
        while (ls[i]->head) {
            sfi_node *n = ls[i]->head;
            sfi_list_remove(ls[i], n);
            free(n);
        }
}
