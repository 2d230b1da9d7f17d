/* The smartt provider's RDM endpoint: one libsmartt session, a 16-byte envelope in
 * front of every message (flags, 4-byte CQ data, 64-bit tag), receive matching with
 * an unexpected queue, and completions mapped from the session's events. */
#include "sfi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UX_LIMIT_N 65536
#define UX_LIMIT_BYTES (512ull << 20)

static size_t env_size(const char *name, size_t def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    return *end || !x ? def : (size_t)x;
}

/* ---- completions ---- */

void sfi_tx_report(sfi_ep *ep, sfi_tx *tx, int err, int prov, const char *text)
{
    tx->reported = 1;
    if (tx->parent) { /* a segment: its message completes when all of them did */
        sfi_seg_child(ep, tx, err, prov, text);
        return;
    }
    if (err) {
        if (ep->tx_cq)
            sfi_cq_push_err(ep->tx_cq, tx->ctx, tx->flags, err, prov, 0, 0, tx->tag, 0, text);
        if (ep->send_cntr)
            ep->send_cntr->err++;
        return;
    }
    if (ep->tx_cq && tx->comp)
        sfi_cq_push(ep->tx_cq, tx->ctx, tx->flags, 0, NULL, 0, 0, FI_ADDR_NOTAVAIL);
    if (ep->send_cntr)
        ep->send_cntr->val++;
}

void sfi_tx_sent_wanted(sfi_ep *ep, const sfi_tx *tx)
{
    if ((tx->delivery || tx->mfd) && tx->stag)
        (void)smartt_want_sent(ep->s, tx->stag); /* a broken session fails the tx anyway */
}

static void tx_free(sfi_ep *ep, sfi_tx *tx)
{
    sfi_list_remove(&ep->tx, &tx->node);
    if (tx->mfd)
        tx->mfd->stag = 0; /* the daemon no longer reads it */
    if (tx->parent)
        sfi_seg_child_free(ep, tx);
    free(tx);
}

static sfi_tx *tx_find(sfi_ep *ep, uint32_t stag)
{
    for (sfi_node *n = ep->tx.head; n; n = n->next)
        if (((sfi_tx *)n)->stag == stag)
            return (sfi_tx *)n;
    return NULL;
}

void sfi_rx_report(sfi_ep *ep, sfi_rx *rx, uint64_t flags, size_t len, void *buf,
                   uint64_t data, uint64_t tag, fi_addr_t src, int always)
{
    if (ep->rx_cq && (always || !ep->rx_sel || (rx->flags & FI_COMPLETION)))
        sfi_cq_push(ep->rx_cq, rx->ctx, flags, len, buf, data, tag, src);
    if (ep->recv_cntr)
        ep->recv_cntr->val++;
}

void sfi_rx_report_err(sfi_ep *ep, void *ctx, uint64_t flags, int err, size_t len, size_t olen,
                       uint64_t tag, uint64_t data)
{
    if (ep->rx_cq)
        sfi_cq_push_err(ep->rx_cq, ctx, flags, err, 0, len, olen, tag, data, NULL);
    if (ep->recv_cntr)
        ep->recv_cntr->err++;
}

/* ---- matching ---- */

static int ux_from_ok(sfi_ep *ep, const sfi_ux *u, fi_addr_t src)
{
    if (src == FI_ADDR_UNSPEC || !(ep->caps & FI_DIRECTED_RECV))
        return 1;
    const unsigned char *n = sfi_av_get(ep->av, src);
    unsigned char from[SFI_ADDRLEN];
    sfi_name_from(from, &u->ev.from);
    return n && !memcmp(n, from, SFI_ADDRLEN);
}

/* ux_len is what a matched message brings: a segmented one's whole length. */
static size_t ux_len(const sfi_ux *u)
{
    return (u->flags & SFI_F_SEG) ? (size_t)u->total : u->len;
}

/* ux_cont: a later segment, never matched by itself. */
static int ux_cont(const sfi_ux *u)
{
    return (u->flags & SFI_F_SEG) && u->off;
}

static int tag_ok(uint64_t want, uint64_t ignore, uint64_t tag)
{
    return ((want ^ tag) & ~ignore) == 0;
}

size_t sfi_copy_in(const sfi_rx *rx, size_t off, const unsigned char *p, size_t len)
{
    size_t done = 0;
    for (size_t i = 0; i < rx->niov && done < len; i++) {
        if (off >= rx->iov[i].iov_len) {
            off -= rx->iov[i].iov_len;
            continue;
        }
        size_t k = rx->iov[i].iov_len - off;
        if (k > len - done)
            k = len - done;
        memcpy((char *)rx->iov[i].iov_base + off, p + done, k);
        done += k;
        off = 0;
    }
    return done;
}

static fi_addr_t src_of(sfi_ep *ep, const smartt_addr *from)
{
    unsigned char n[SFI_ADDRLEN];
    sfi_name_from(n, from);
    return sfi_av_find(ep->av, n);
}

/* deliver puts message u into rx and completes rx (multi-receive: a part of it).
 * It returns 1 if rx is finished. */
static int deliver(sfi_ep *ep, sfi_rx *rx, sfi_ux *u, sfi_list *ux)
{
    if (u->flags & SFI_F_SEG)
        return sfi_seg_deliver(ep, rx, u, ux);
    uint64_t fl = FI_RECV | ((u->flags & SFI_F_TAGGED) ? FI_TAGGED : FI_MSG) |
                  ((u->flags & SFI_F_DATA) ? FI_REMOTE_CQ_DATA : 0);
    fi_addr_t src = src_of(ep, &u->ev.from);
    if (rx->flags & FI_MULTI_RECV) {
        size_t room = rx->cap - rx->used;
        size_t n = u->len < room ? u->len : room;
        void *at = (char *)rx->iov[0].iov_base + rx->used;
        memcpy(at, u->payload, n);
        rx->used += n;
        int last = rx->cap - rx->used < ep->min_multi_recv;
        if (n < u->len)
            sfi_rx_report_err(ep, rx->ctx, fl | (last ? FI_MULTI_RECV : 0), FI_ETRUNC, n, u->len - n, u->tag, u->data);
        else
            sfi_rx_report(ep, rx, fl | (last ? FI_MULTI_RECV : 0), n, at, u->data, u->tag, src, 0);
        return last;
    }
    size_t n = sfi_copy_in(rx, 0, u->payload, u->len);
    if (n < u->len)
        sfi_rx_report_err(ep, rx->ctx, fl, FI_ETRUNC, n, u->len - n, u->tag, u->data);
    else
        sfi_rx_report(ep, rx, fl, n, rx->niov ? rx->iov[0].iov_base : NULL, u->data, u->tag, src, 0);
    return 1;
}

void sfi_ux_free(sfi_ep *ep, sfi_list *l, sfi_ux *u)
{
    sfi_list_remove(l, &u->node);
    ep->ux_bytes -= u->ev.size;
    if (u->copy)
        free(u->copy); /* a ring message, released when it was queued */
    else
        smartt_release(ep->s, &u->ev);
    free(u);
}

/* ring_maybe sets up the receive ring when the first large message arrives over the
 * socket: 4 such messages (SMARTT_FI_RING: a size of the user's), 4..64 MiB and at most
 * the daemon's. Messages in it are copied once, straight into the posted buffer. */
static void ring_maybe(sfi_ep *ep, const smartt_event *ev)
{
    if (ep->ring_state || ev->in_ring || ev->size < ep->ring_min)
        return;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), cap = smartt_max_ring(ep->s);
    uint64_t size = ep->ring_size;
    if (!size) {
        size = 4 * ev->size;
        size = size < (4u << 20) ? (4u << 20) : size > (64u << 20) ? (64u << 20) : size;
    }
    size = (size < cap ? size : cap) / page * page;
    if (!ep->ring_size && size < 2 * ev->size && (smartt_caps(ep->s) & SMARTT_CAP_RING))
        return; /* too large a message to size a ring by: wait for a smaller one */
    ep->ring_state = 3;
    if (!(smartt_caps(ep->s) & SMARTT_CAP_RING) || !size) {
        FI_INFO(&sfi_prov, FI_LOG_EP_DATA, "no receive ring: the daemon offers none\n");
        return;
    }
    uint32_t tag;
    int r = smartt_ring_start(ep->s, size, ep->ring_min, &tag);
    if (r == 0)
        ep->ring_state = 1, ep->ring_tag = tag;
    FI_INFO(&sfi_prov, FI_LOG_EP_DATA, "receive ring of %llu bytes: %s\n", (unsigned long long)size,
            smartt_strerror(r));
}

/* ux_queue keeps message m for a later receive; a ring message is copied out. */
static void ux_queue(sfi_ep *ep, const sfi_ux *m, smartt_event *ev, sfi_list *l)
{
    sfi_ux *u = malloc(sizeof *u);
    unsigned char *c = u && ev->in_ring ? malloc(m->len ? m->len : 1) : NULL;
    if (!u || (ev->in_ring && !c)) { /* cannot hold it: the message is lost, say so */
        FI_WARN(&sfi_prov, FI_LOG_EP_DATA, "out of memory: an unexpected message is lost\n");
        free(u);
        smartt_release(ep->s, ev);
        return;
    }
    *u = *m;
    if (c) {
        memcpy(c, m->payload, m->len);
        u->copy = c, u->payload = c;
        smartt_release(ep->s, ev);
    }
    sfi_list_push(l, &u->node);
    ep->ux_bytes += u->ev.size;
}

/* env_bad: d (n bytes) does not start with the provider's envelope. */
static int env_bad(const unsigned char *d, uint64_t n)
{
    return n < SFI_HDR || d[0] != SFI_MAGIC || (d[1] & ~15u) || d[2] || d[3] ||
           ((d[1] & SFI_F_ABORT) && !(d[1] & SFI_F_SEG));
}

/* env_parse fills m's flags, CQ data and tag from envelope d. */
static void env_parse(sfi_ux *m, const unsigned char *d)
{
    m->flags = d[1];
    m->data = (uint32_t)d[4] << 24 | (uint32_t)d[5] << 16 | (uint32_t)d[6] << 8 | d[7];
    m->tag = 0;
    for (int i = 0; i < 8; i++)
        m->tag = m->tag << 8 | d[8 + i];
}

/* ---- placement: pair messages read straight into posted receives ---- */

/* A posted receive a pair message is being read into, and that message's envelope. */
typedef struct sfi_place {
    sfi_node node;
    sfi_rx *rx;
    sfi_ux m;
} sfi_place;

/* place_cb is libsmartt's placer: a message starting on a pair goes straight into the
 * posted receive on_message would give it, when that is one buffer it fits in. */
static void *place_cb(void *ctx, const smartt_addr *from, uint32_t endpoint, uint64_t size,
                      const unsigned char *d, size_t nhead, size_t *skip)
{
    sfi_ep *ep = ctx;
    (void)endpoint;
    if (env_bad(d, nhead) || (d[1] & SFI_F_SEG))
        return NULL;
    sfi_ux m = {.len = (size_t)size - SFI_HDR};
    m.ev.from = *from;
    env_parse(&m, d);
    int tagged = (m.flags & SFI_F_TAGGED) != 0;
    sfi_list *posted = tagged ? &ep->rx_tag : &ep->rx_msg;
    for (sfi_node *n = posted->head; n; n = n->next) {
        sfi_rx *rx = (sfi_rx *)n;
        if ((tagged && !tag_ok(rx->tag, rx->ignore, m.tag)) || !ux_from_ok(ep, &m, rx->src))
            continue;
        if ((rx->flags & FI_MULTI_RECV) || rx->niov != 1 || rx->cap < m.len)
            return NULL; /* copied (or truncated) as usual */
        sfi_place *pl = malloc(sizeof *pl);
        if (!pl)
            return NULL;
        sfi_list_remove(posted, n);
        *pl = (sfi_place){.rx = rx, .m = m};
        sfi_list_push(&ep->placing, &pl->node);
        *skip = SFI_HDR;
        return rx->iov[0].iov_base;
    }
    return NULL;
}

static sfi_place *place_find(sfi_ep *ep, const void *buf)
{
    for (sfi_node *n = ep->placing.head; n; n = n->next)
        if (((sfi_place *)n)->rx->iov[0].iov_base == buf)
            return (sfi_place *)n;
    return NULL;
}

/* on_placed completes the receive a placed message was read into. */
static void on_placed(sfi_ep *ep, smartt_event *ev)
{
    sfi_place *pl = place_find(ep, ev->data);
    if (!pl)
        return; /* cannot be: libsmartt placed it through us */
    const sfi_ux *m = &pl->m;
    uint64_t fl = FI_RECV | ((m->flags & SFI_F_TAGGED) ? FI_TAGGED : FI_MSG) |
                  ((m->flags & SFI_F_DATA) ? FI_REMOTE_CQ_DATA : 0);
    sfi_rx_report(ep, pl->rx, fl, (size_t)ev->size, (void *)ev->data, m->data, m->tag,
                  src_of(ep, &ev->from), 0);
    sfi_list_remove(&ep->placing, &pl->node);
    free(pl->rx);
    free(pl);
}

static int post_rx(sfi_ep *ep, sfi_rx *rx);

/* cut_cb: the message placed in buf ended short (its sender went); its receive is
 * posted again where it was, after taking what matches it meanwhile. */
static void cut_cb(void *ctx, void *buf)
{
    sfi_ep *ep = ctx;
    sfi_place *pl = place_find(ep, buf);
    if (!pl)
        return;
    sfi_list_remove(&ep->placing, &pl->node);
    sfi_rx *rx = pl->rx;
    free(pl);
    if (post_rx(ep, rx))
        free(rx);
}

/* on_message matches a received message against the posted receives, or queues it. */
static void on_message(sfi_ep *ep, smartt_event *ev)
{
    const unsigned char *d = ev->data;
    if (ev->placed) {
        on_placed(ep, ev);
        return;
    }
    if (env_bad(d, ev->size)) {
        ep->bad_msgs++;
        FI_WARN(&sfi_prov, FI_LOG_EP_DATA, "discarding a message without the provider's envelope\n");
        smartt_release(ep->s, ev);
        return;
    }
    sfi_ux m = {.ev = *ev, .payload = d + SFI_HDR, .len = ev->size - SFI_HDR};
    env_parse(&m, d);
    if ((m.flags & SFI_F_SEG) && sfi_seg_parse(&m, d, ev->size)) {
        ep->bad_msgs++;
        FI_WARN(&sfi_prov, FI_LOG_EP_DATA, "discarding a malformed segment\n");
        smartt_release(ep->s, ev);
        return;
    }
    ring_maybe(ep, ev);
    int tagged = (m.flags & SFI_F_TAGGED) != 0;
    sfi_list *posted = tagged ? &ep->rx_tag : &ep->rx_msg, *ux = tagged ? &ep->ux_tag : &ep->ux_msg;
    if ((m.flags & SFI_F_SEG) && sfi_seg_on_message(ep, &m, ux)) {
        smartt_release(ep->s, ev);
        return;
    }
    for (sfi_node *n = ux_cont(&m) ? NULL : posted->head; n; n = n->next) {
        sfi_rx *rx = (sfi_rx *)n;
        if (tagged && !tag_ok(rx->tag, rx->ignore, m.tag))
            continue;
        if (!ux_from_ok(ep, &m, rx->src))
            continue;
        if (deliver(ep, rx, &m, ux)) {
            sfi_list_remove(posted, n);
            free(rx);
        }
        smartt_release(ep->s, ev);
        return;
    }
    ux_queue(ep, &m, ev, ux);
}

/* ---- progress ---- */

void sfi_ep_break(sfi_ep *ep, int code)
{
    if (ep->broken)
        return;
    ep->broken = code;
    FI_WARN(&sfi_prov, FI_LOG_EP_DATA, "smartt session lost: %s\n", smartt_strerror(code));
    while (ep->tx.head) {
        sfi_tx *tx = (sfi_tx *)ep->tx.head;
        if (!tx->reported)
            sfi_tx_report(ep, tx, FI_EIO, -code, smartt_strerror(code));
        tx_free(ep, tx);
    }
    sfi_seg_break(ep, code);
    while (ep->placing.head) {
        sfi_place *pl = (sfi_place *)ep->placing.head;
        sfi_list_remove(&ep->placing, &pl->node);
        sfi_rx_report_err(ep, pl->rx->ctx, FI_RECV | (pl->rx->flags & FI_TAGGED ? FI_TAGGED : FI_MSG),
                          FI_EIO, 0, 0, pl->rx->tag, 0);
        free(pl->rx);
        free(pl);
    }
    sfi_list *ls[2] = {&ep->rx_msg, &ep->rx_tag};
    for (int i = 0; i < 2; i++)
        while (ls[i]->head) {
            sfi_rx *rx = (sfi_rx *)ls[i]->head;
            sfi_list_remove(ls[i], &rx->node);
            sfi_rx_report_err(ep, rx->ctx, FI_RECV | (i ? FI_TAGGED : FI_MSG), FI_EIO, 0, 0, rx->tag, 0);
            free(rx);
        }
}

/* mfd_refused streams a message the daemon refused to take as a memfd (Error 9), and
 * every later one; 1 if it went. */
static int mfd_refused(sfi_ep *ep, sfi_tx *tx)
{
    uint32_t stag;
    ep->sendfd_min = SIZE_MAX;
    sfi_mfd *m = tx->mfd;
    int r = smartt_send_async(ep->s, &tx->to, m->m.data, tx->wire, &stag);
    m->stag = 0, tx->mfd = NULL;
    if (r)
        return 0;
    tx->stag = stag;
    return 1;
}

static void on_outcome(sfi_ep *ep, const smartt_event *ev)
{
    sfi_tx *tx = tx_find(ep, ev->tag);
    if (!tx)
        return;
    switch (ev->type) {
    case SMARTT_EV_ACCEPTED:
        tx->accepted = 1;
        if (!tx->delivery && !tx->reported && !tx->cancelling && !tx->borrowed)
            sfi_tx_report(ep, tx, 0, 0, NULL);
        return;
    case SMARTT_EV_CANCEL_RESULT:
        /* cancelled: Failed "cancelled" follows; else the message goes on */
        tx->cancelling = 0;
        if (ev->cancel != SMARTT_CANCELLED && tx->accepted && !tx->delivery && !tx->reported &&
            !tx->borrowed)
            sfi_tx_report(ep, tx, 0, 0, NULL);
        return;
    case SMARTT_EV_SENT:
        if (!tx->reported)
            sfi_tx_report(ep, tx, 0, 0, NULL);
        break;
    case SMARTT_EV_FAILED:
    case SMARTT_EV_ERROR: {
        if (ev->type == SMARTT_EV_ERROR && ev->status == SMARTT_EDAEMON(9) && tx->mfd && mfd_refused(ep, tx))
            return;
        int err = strcmp(ev->text, "cancelled") ? FI_EIO : FI_ECANCELED;
        if (ev->type == SMARTT_EV_ERROR && ev->status == SMARTT_EDAEMON(4))
            err = FI_EMSGSIZE;
        if (!tx->reported) {
            sfi_tx_report(ep, tx, err, -ev->status, ev->text);
        } else {
            ep->late_failures++;
            FI_WARN(&sfi_prov, FI_LOG_EP_DATA, "a send completed at transmit failed later: %s\n", ev->text);
        }
        break;
    }
    default:
        return;
    }
    tx_free(ep, tx);
}

/* sfi_ep_progress reads the session and turns its events into completions; with a
 * full unexpected queue it reads nothing more (the daemon holds messages back). */
void sfi_ep_progress(sfi_ep *ep)
{
    if (!ep->s || ep->broken)
        return;
    size_t ux = ep->ux_msg.n + ep->ux_tag.n;
    int full = ux >= ep->ux_limit_n || ep->ux_bytes >= ep->ux_limit_bytes;
    if (!full || smartt_want_write(ep->s)) {
        int r = smartt_progress(ep->s);
        if (r < 0) {
            /* deliver what came before the break, then fail the rest */
            smartt_event ev;
            while (smartt_poll_completion(ep->s, &ev) == 1) {
                if (ev.type == SMARTT_EV_RECV)
                    on_message(ep, &ev);
                else
                    on_outcome(ep, &ev);
            }
            sfi_ep_break(ep, r);
            return;
        }
    }
    smartt_event ev;
    for (;;) {
        ux = ep->ux_msg.n + ep->ux_tag.n;
        full = ux >= ep->ux_limit_n || ep->ux_bytes >= ep->ux_limit_bytes;
        int got = full ? smartt_poll_outcome(ep->s, &ev) : smartt_poll_completion(ep->s, &ev);
        if (got != 1)
            break;
        if (ev.type == SMARTT_EV_RECV)
            on_message(ep, &ev);
        else if (ev.tag && ev.tag == ep->ring_tag && ep->ring_state == 1) {
            ep->ring_state = ev.type == SMARTT_EV_RING_OK ? 2 : 3; /* refused: stay on the socket */
            FI_INFO(&sfi_prov, FI_LOG_EP_DATA, "receive ring: %s\n", ep->ring_state == 2 ? "on" : ev.text);
        }
        else if (ev.tag)
            on_outcome(ep, &ev);
        else
            FI_WARN(&sfi_prov, FI_LOG_EP_DATA, "daemon notice: %s\n", ev.text);
    }
    if (ep->segs.head && !ep->broken)
        sfi_seg_pump(ep);
    if (ep->asms.head)
        sfi_seg_expire(ep);
}

/* ---- sending ---- */

/* sfi_pack_hdr writes the 16-byte envelope at h. */
void sfi_pack_hdr(unsigned char *h, uint64_t flags, uint64_t tag, uint64_t data)
{
    h[0] = SFI_MAGIC;
    h[1] = (unsigned char)(((flags & FI_TAGGED) ? SFI_F_TAGGED : 0) | ((flags & FI_REMOTE_CQ_DATA) ? SFI_F_DATA : 0));
    h[2] = h[3] = 0;
    for (int i = 0; i < 4; i++)
        h[4 + i] = (unsigned char)(data >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        h[8 + i] = (unsigned char)(tag >> (56 - 8 * i));
}

/* gather copies bytes [off, off + len) of iov to dst. */
static void gather(unsigned char *dst, const struct iovec *iov, size_t niov, uint64_t off, size_t len)
{
    for (size_t i = 0; i < niov && len; i++) {
        if (off >= iov[i].iov_len) {
            off -= iov[i].iov_len;
            continue;
        }
        size_t k = iov[i].iov_len - (size_t)off;
        k = k < len ? k : len;
        memcpy(dst, (const char *)iov[i].iov_base + off, k);
        dst += k, len -= k, off = 0;
    }
}

/* mfd_get finds an idle memfd of at least need bytes, or opens one within the
 * endpoint's bounds (SFI_MFD_MAX, SFI_MFD_BYTES), closing an idle smaller one. */
static sfi_mfd *mfd_get(sfi_ep *ep, size_t need)
{
    sfi_mfd *best = NULL, *empty = NULL, *small = NULL;
    size_t mapped = 0;
    for (int i = 0; i < SFI_MFD_MAX; i++) {
        sfi_mfd *m = &ep->mfd[i];
        mapped += m->m.capacity;
        if (!m->m.capacity)
            empty = empty ? empty : m;
        else if (m->stag)
            continue;
        else if (m->m.capacity >= need && (!best || m->m.capacity < best->m.capacity))
            best = m;
        else if (m->m.capacity < need)
            small = m;
    }
    sfi_mfd *slot = empty ? empty : small;
    if (best || !slot)
        return best;
    size_t cap = (need + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
    if (mapped - slot->m.capacity + cap > SFI_MFD_BYTES)
        return NULL;
    if (slot->m.capacity)
        smartt_memfd_close(&slot->m);
    if (smartt_memfd_open(&slot->m, cap)) {
        memset(&slot->m, 0, sizeof slot->m);
        return NULL;
    }
    return slot;
}

/* sfi_send_buf sends hdr and bytes [off, off + len) of iov as one smartt message: from
 * one of the endpoint's memfds when it is large (one copy; the daemon sends from its
 * pages), else streamed through the socket. It fills tx's stag, to, mfd and wire. */
int sfi_send_buf(sfi_ep *ep, const smartt_addr *to, const unsigned char *hdr, size_t hlen,
                 const struct iovec *iov, size_t niov, uint64_t off, size_t len, sfi_tx *tx)
{
    size_t wire = hlen + len;
    tx->to = *to, tx->wire = wire;
    sfi_mfd *m = NULL;
    if (wire >= ep->sendfd_min && (smartt_caps(ep->s) & SMARTT_CAP_SENDFD))
        m = mfd_get(ep, wire);
    if (m) {
        memcpy(m->m.data, hdr, hlen);
        gather(m->m.data + hlen, iov, niov, off, len);
        int r = smartt_send_memfd(ep->s, to, &m->m, wire, &tx->stag);
        if (!r)
            m->stag = tx->stag, tx->mfd = m;
        return r;
    }
    if (ep->scratch_cap < wire) {
        size_t nc = wire < 65536 ? 65536 : wire;
        unsigned char *p = realloc(ep->scratch, nc);
        if (!p)
            return SMARTT_ENOMEM;
        ep->scratch = p, ep->scratch_cap = nc;
    }
    memcpy(ep->scratch, hdr, hlen);
    gather(ep->scratch + hlen, iov, niov, off, len);
    return smartt_send_async(ep->s, to, ep->scratch, wire, &tx->stag);
}

/* send_borrowed sends a large message over the direct pair to `to` from the caller's
 * buffers (libsmartt writes what the socket does not take from them later: the send
 * completes at SENT); SMARTT_ENOTSUP when `to` has no pair now. */
static int send_borrowed(sfi_ep *ep, const smartt_addr *to, const unsigned char *hdr,
                         const struct iovec *iov, size_t niov, sfi_tx *tx)
{
    struct iovec v[SFI_IOV_MAX + 1] = {{tx->hdr, SFI_HDR}};
    memcpy(tx->hdr, hdr, SFI_HDR);
    size_t n = 1;
    for (size_t i = 0; i < niov; i++)
        if (iov[i].iov_len)
            v[n++] = iov[i];
    return smartt_sendv_direct(ep->s, to, v, (int)n, &tx->stag, &tx->borrowed);
}

/* send_ready checks that ep may send to dest now (back-pressure: -FI_EAGAIN). */
static ssize_t send_ready(sfi_ep *ep, fi_addr_t dest, smartt_addr *to)
{
    const unsigned char *name = sfi_av_get(ep->av, dest);
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    if (ep->broken)
        return sfi_err(ep->broken);
    if (!name)
        return -FI_EINVAL;
    if (ep->tx.n >= SFI_QSIZE * 4 || smartt_want_write(ep->s)) {
        sfi_ep_progress(ep); /* the socket or the daemon is full */
        if (ep->tx.n >= SFI_QSIZE * 4 || smartt_want_write(ep->s))
            return -FI_EAGAIN;
    }
    sfi_name_to(to, name);
    return 0;
}

/* ep_send sends one message; nocomp: an fi_inject call (no completion, ever). A message
 * larger than a segment goes as several (seg.c). */
static ssize_t ep_send(sfi_ep *ep, const struct iovec *iov, size_t niov, fi_addr_t dest,
                       uint64_t tag, uint64_t data, uint64_t flags, void *ctx, int nocomp)
{
    size_t total = 0;
    if (niov > SFI_IOV_MAX)
        return -FI_EINVAL;
    for (size_t i = 0; i < niov; i++) {
        if (!iov[i].iov_base && iov[i].iov_len)
            return -FI_EINVAL;
        total += iov[i].iov_len;
    }
    if (total > SFI_MAX_MSG || ((flags & FI_INJECT) && total > SFI_INJECT))
        return -FI_EMSGSIZE;
    int comp = !nocomp && (!ep->tx_sel || (flags & FI_COMPLETION));
    int delivery = ep->delivery_all || (flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE));
    smartt_addr to;
    pthread_mutex_lock(&ep->dom->lock);
    ssize_t r = send_ready(ep, dest, &to);
    if (!r && total > ep->seg_max)
        r = sfi_seg_send(ep, iov, niov, &to, tag, data, flags, ctx, comp, delivery);
    if (r || total > ep->seg_max) {
        pthread_mutex_unlock(&ep->dom->lock);
        return r;
    }
    unsigned char h[SFI_HDR];
    sfi_pack_hdr(h, flags, tag, data);
    sfi_tx *tx = calloc(1, sizeof *tx);
    int sr = tx ? SMARTT_ENOTSUP : SMARTT_ENOMEM;
    if (tx && !nocomp && !(flags & FI_INJECT) && total >= SFI_BORROW_MIN)
        sr = send_borrowed(ep, &to, h, iov, niov, tx);
    if (sr == SMARTT_ENOTSUP)
        sr = sfi_send_buf(ep, &to, h, SFI_HDR, iov, niov, 0, total, tx);
    if (sr) {
        free(tx);
        /* EAGAIN: the direct path asks the daemon about a new peer, or its pair is full */
        if (sr != SMARTT_ENOMEM && sr != SMARTT_EINVAL && sr != SMARTT_EAGAIN)
            sfi_ep_break(ep, sr);
        pthread_mutex_unlock(&ep->dom->lock);
        return sfi_err(sr);
    }
    tx->ctx = ctx;
    tx->tag = tag;
    tx->len = total;
    tx->flags = FI_SEND | ((flags & FI_TAGGED) ? FI_TAGGED : FI_MSG);
    tx->comp = comp;
    tx->delivery = delivery;
    sfi_list_push(&ep->tx, &tx->node);
    sfi_tx_sent_wanted(ep, tx);
    /* no Accepted on version 1: written is transmitted (a memfd's bytes are ours) */
    if (smartt_version(ep->s) < 2 && !tx->delivery)
        sfi_tx_report(ep, tx, 0, 0, NULL);
    pthread_mutex_unlock(&ep->dom->lock);
    return 0;
}

static uint64_t tx_flags(sfi_ep *ep, uint64_t extra)
{
    return ep->tx_op_flags | extra;
}

#define EP(f) container_of(f, sfi_ep, ep)

static ssize_t m_send(struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t d, void *ctx)
{
    (void)desc;
    struct iovec v = {(void *)buf, len};
    return ep_send(EP(f), &v, 1, d, 0, 0, tx_flags(EP(f), 0), ctx, 0);
}
static ssize_t m_sendv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t n, fi_addr_t d, void *ctx)
{
    (void)desc;
    return ep_send(EP(f), iov, n, d, 0, 0, tx_flags(EP(f), 0), ctx, 0);
}
static ssize_t m_sendmsg(struct fid_ep *f, const struct fi_msg *m, uint64_t flags)
{
    if (!m)
        return -FI_EINVAL;
    return ep_send(EP(f), m->msg_iov, m->iov_count, m->addr, 0, m->data, flags & ~FI_TAGGED, m->context, 0);
}
static ssize_t m_inject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t d)
{
    struct iovec v = {(void *)buf, len};
    return ep_send(EP(f), &v, 1, d, 0, 0, FI_INJECT, NULL, 1);
}
static ssize_t m_senddata(struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data,
                          fi_addr_t d, void *ctx)
{
    (void)desc;
    struct iovec v = {(void *)buf, len};
    return ep_send(EP(f), &v, 1, d, 0, data, tx_flags(EP(f), FI_REMOTE_CQ_DATA), ctx, 0);
}
static ssize_t m_injectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t d)
{
    struct iovec v = {(void *)buf, len};
    return ep_send(EP(f), &v, 1, d, 0, data, FI_INJECT | FI_REMOTE_CQ_DATA, NULL, 1);
}

static ssize_t t_send(struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t d,
                      uint64_t tag, void *ctx)
{
    (void)desc;
    struct iovec v = {(void *)buf, len};
    return ep_send(EP(f), &v, 1, d, tag, 0, tx_flags(EP(f), FI_TAGGED), ctx, 0);
}
static ssize_t t_sendv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t n, fi_addr_t d,
                       uint64_t tag, void *ctx)
{
    (void)desc;
    return ep_send(EP(f), iov, n, d, tag, 0, tx_flags(EP(f), FI_TAGGED), ctx, 0);
}
static ssize_t t_sendmsg(struct fid_ep *f, const struct fi_msg_tagged *m, uint64_t flags)
{
    if (!m)
        return -FI_EINVAL;
    return ep_send(EP(f), m->msg_iov, m->iov_count, m->addr, m->tag, m->data, flags | FI_TAGGED, m->context, 0);
}
static ssize_t t_inject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t d, uint64_t tag)
{
    struct iovec v = {(void *)buf, len};
    return ep_send(EP(f), &v, 1, d, tag, 0, FI_INJECT | FI_TAGGED, NULL, 1);
}
static ssize_t t_senddata(struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data,
                          fi_addr_t d, uint64_t tag, void *ctx)
{
    (void)desc;
    struct iovec v = {(void *)buf, len};
    return ep_send(EP(f), &v, 1, d, tag, data, tx_flags(EP(f), FI_TAGGED | FI_REMOTE_CQ_DATA), ctx, 0);
}
static ssize_t t_injectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data,
                            fi_addr_t d, uint64_t tag)
{
    struct iovec v = {(void *)buf, len};
    return ep_send(EP(f), &v, 1, d, tag, data, FI_INJECT | FI_TAGGED | FI_REMOTE_CQ_DATA, NULL, 1);
}

/* ---- receiving ---- */

static sfi_ux *ux_match(sfi_ep *ep, sfi_list *l, int tagged, uint64_t tag, uint64_t ignore, fi_addr_t src)
{
    for (sfi_node *n = l->head; n; n = n->next) {
        sfi_ux *u = (sfi_ux *)n;
        if (u->claimed || ux_cont(u) || (tagged && !tag_ok(tag, ignore, u->tag)) || !ux_from_ok(ep, u, src))
            continue;
        return u;
    }
    return NULL;
}

/* peek_claim handles FI_PEEK, FI_CLAIM and FI_DISCARD (tagged receives). */
static ssize_t peek_claim(sfi_ep *ep, sfi_rx *rx, uint64_t flags)
{
    sfi_ux *u = NULL;
    struct fi_context *fc = rx->ctx;
    uint64_t fl = FI_RECV | FI_TAGGED;
    if ((flags & FI_CLAIM) && !(flags & FI_PEEK)) {
        if (!fc)
            return -FI_EINVAL;
        for (sfi_node *n = ep->ux_tag.head; n; n = n->next)
            if ((void *)n == fc->internal[0] && ((sfi_ux *)n)->claimed)
                u = (sfi_ux *)n;
        if (!u)
            return -FI_EINVAL;
    } else {
        sfi_ep_progress(ep);
        u = ux_match(ep, &ep->ux_tag, 1, rx->tag, rx->ignore, rx->src);
        if (!u) {
            sfi_rx_report_err(ep, rx->ctx, fl, FI_ENOMSG, 0, 0, rx->tag, 0);
            return 0;
        }
        fl |= (u->flags & SFI_F_DATA) ? FI_REMOTE_CQ_DATA : 0;
        if (!(flags & (FI_CLAIM | FI_DISCARD))) {
            sfi_rx_report(ep, rx, fl, ux_len(u), NULL, u->data, u->tag, src_of(ep, &u->ev.from), 1);
            return 0;
        }
        if (flags & FI_CLAIM) {
            if (!fc)
                return -FI_EINVAL;
            u->claimed = 1;
            fc->internal[0] = u;
            if (!(flags & FI_DISCARD)) {
                sfi_rx_report(ep, rx, fl, ux_len(u), NULL, u->data, u->tag, src_of(ep, &u->ev.from), 1);
                return 0;
            }
        }
    }
    if (flags & FI_DISCARD) {
        sfi_rx_report(ep, rx, fl, 0, NULL, u->data, u->tag, src_of(ep, &u->ev.from), 1);
        if (u->flags & SFI_F_SEG) {
            rx->flags |= FI_DISCARD;
            sfi_seg_deliver(ep, rx, u, &ep->ux_tag);
        }
    } else {
        rx->flags |= FI_COMPLETION;
        deliver(ep, rx, u, &ep->ux_tag);
    }
    sfi_ux_free(ep, &ep->ux_tag, u);
    return 0;
}

static ssize_t ep_recv(sfi_ep *ep, const struct iovec *iov, size_t niov, fi_addr_t src, uint64_t tag,
                       uint64_t ignore, uint64_t flags, void *ctx)
{
    if (niov > SFI_IOV_MAX || ((flags & FI_MULTI_RECV) && niov != 1))
        return -FI_EINVAL;
    sfi_rx *rx = calloc(1, sizeof *rx);
    if (!rx)
        return -FI_ENOMEM;
    rx->ctx = ctx, rx->flags = flags, rx->tag = tag, rx->ignore = ignore, rx->src = src;
    rx->niov = niov;
    for (size_t i = 0; i < niov; i++) {
        rx->iov[i] = iov[i];
        rx->cap += iov[i].iov_len;
    }
    sfi_domain *d = ep->dom;
    pthread_mutex_lock(&d->lock);
    ssize_t r = 0;
    if (!ep->enabled)
        r = -FI_EOPBADSTATE;
    else if (ep->broken)
        r = sfi_err(ep->broken);
    else if (src != FI_ADDR_UNSPEC && (ep->caps & FI_DIRECTED_RECV) && !sfi_av_get(ep->av, src))
        r = -FI_EINVAL;
    if (r) {
        pthread_mutex_unlock(&d->lock);
        free(rx);
        return r;
    }
    int tagged = (flags & FI_TAGGED) != 0;
    if (tagged && (flags & (FI_PEEK | FI_CLAIM))) {
        r = peek_claim(ep, rx, flags);
        pthread_mutex_unlock(&d->lock);
        free(rx);
        return r;
    }
    rx->seq = ep->rx_seq++;
    if (post_rx(ep, rx))
        free(rx);
    pthread_mutex_unlock(&d->lock);
    return 0;
}

/* post_rx gives rx the unexpected messages that match it, in arrival order, and posts
 * it (in post order) unless they finished it: then 1 (the caller frees it). */
static int post_rx(sfi_ep *ep, sfi_rx *rx)
{
    int tagged = (rx->flags & FI_TAGGED) != 0;
    sfi_list *ux = tagged ? &ep->ux_tag : &ep->ux_msg;
    for (;;) {
        sfi_ux *u = ux_match(ep, ux, tagged, rx->tag, rx->ignore, rx->src);
        if (!u)
            break;
        int done = deliver(ep, rx, u, ux);
        sfi_ux_free(ep, ux, u);
        if (done)
            return 1;
    }
    sfi_list *l = tagged ? &ep->rx_tag : &ep->rx_msg;
    sfi_node *at = l->tail; /* the last receive posted before rx */
    while (at && ((sfi_rx *)at)->seq > rx->seq)
        at = at->prev;
    if (at == l->tail) {
        sfi_list_push(l, &rx->node);
        return 0;
    }
    sfi_node *next = at ? at->next : l->head; /* not NULL: at is not the tail */
    rx->node.prev = at, rx->node.next = next;
    next->prev = &rx->node;
    if (at)
        at->next = &rx->node;
    else
        l->head = &rx->node;
    l->n++;
    return 0;
}

static ssize_t m_recv(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, void *ctx)
{
    (void)desc;
    struct iovec v = {buf, len};
    return ep_recv(EP(f), &v, 1, src, 0, 0, EP(f)->rx_op_flags & ~FI_TAGGED, ctx);
}
static ssize_t m_recvv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t n, fi_addr_t src, void *ctx)
{
    (void)desc;
    return ep_recv(EP(f), iov, n, src, 0, 0, EP(f)->rx_op_flags & ~FI_TAGGED, ctx);
}
static ssize_t m_recvmsg(struct fid_ep *f, const struct fi_msg *m, uint64_t flags)
{
    if (!m)
        return -FI_EINVAL;
    return ep_recv(EP(f), m->msg_iov, m->iov_count, m->addr, 0, 0, flags & ~FI_TAGGED, m->context);
}
static ssize_t t_recv(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src,
                      uint64_t tag, uint64_t ignore, void *ctx)
{
    (void)desc;
    struct iovec v = {buf, len};
    return ep_recv(EP(f), &v, 1, src, tag, ignore, (EP(f)->rx_op_flags & ~FI_MULTI_RECV) | FI_TAGGED, ctx);
}
static ssize_t t_recvv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t n, fi_addr_t src,
                       uint64_t tag, uint64_t ignore, void *ctx)
{
    (void)desc;
    return ep_recv(EP(f), iov, n, src, tag, ignore, (EP(f)->rx_op_flags & ~FI_MULTI_RECV) | FI_TAGGED, ctx);
}
static ssize_t t_recvmsg(struct fid_ep *f, const struct fi_msg_tagged *m, uint64_t flags)
{
    if (!m)
        return -FI_EINVAL;
    return ep_recv(EP(f), m->msg_iov, m->iov_count, m->addr, m->tag, m->ignore,
                   (flags & ~FI_MULTI_RECV) | FI_TAGGED, m->context);
}

static struct fi_ops_msg msg_ops = {
    .size = sizeof(struct fi_ops_msg), .recv = m_recv, .recvv = m_recvv, .recvmsg = m_recvmsg,
    .send = m_send, .sendv = m_sendv, .sendmsg = m_sendmsg, .inject = m_inject,
    .senddata = m_senddata, .injectdata = m_injectdata,
};

static struct fi_ops_tagged tagged_ops = {
    .size = sizeof(struct fi_ops_tagged), .recv = t_recv, .recvv = t_recvv, .recvmsg = t_recvmsg,
    .send = t_send, .sendv = t_sendv, .sendmsg = t_sendmsg, .inject = t_inject,
    .senddata = t_senddata, .injectdata = t_injectdata,
};

/* ---- endpoint control ---- */

static ssize_t ep_cancel(fid_t fid, void *ctx)
{
    sfi_ep *ep = container_of(fid, sfi_ep, ep.fid);
    pthread_mutex_lock(&ep->dom->lock);
    ssize_t r = -FI_ENOENT;
    sfi_list *ls[2] = {&ep->rx_msg, &ep->rx_tag};
    for (int i = 0; i < 2 && r; i++)
        for (sfi_node *n = ls[i]->head; n; n = n->next) {
            sfi_rx *rx = (sfi_rx *)n;
            if (rx->ctx != ctx)
                continue;
            sfi_list_remove(ls[i], n);
            sfi_rx_report_err(ep, ctx, FI_RECV | (i ? FI_TAGGED : FI_MSG), FI_ECANCELED, 0, 0, rx->tag, 0);
            free(rx);
            r = 0;
            break;
        }
    for (sfi_node *n = ep->tx.head; n && r; n = n->next) {
        sfi_tx *tx = (sfi_tx *)n;
        if (tx->ctx != ctx || tx->reported || tx->parent || !ep->s || ep->broken)
            continue;
        int c = smartt_cancel(ep->s, tx->stag); /* a Failed "cancelled" may follow */
        r = c == SMARTT_ENOTSUP ? -FI_ENOENT : sfi_err(c);
        tx->cancelling = !c;
    }
    pthread_mutex_unlock(&ep->dom->lock);
    return r;
}

static int ep_getopt(fid_t fid, int level, int name, void *val, size_t *len)
{
    sfi_ep *ep = container_of(fid, sfi_ep, ep.fid);
    if (level != FI_OPT_ENDPOINT)
        return -FI_ENOPROTOOPT;
    if (name == FI_OPT_MIN_MULTI_RECV) {
        if (!val || !len || *len < sizeof(size_t))
            return -FI_EINVAL;
        *(size_t *)val = ep->min_multi_recv;
        *len = sizeof(size_t);
        return 0;
    }
    return -FI_ENOPROTOOPT;
}

static int ep_setopt(fid_t fid, int level, int name, const void *val, size_t len)
{
    sfi_ep *ep = container_of(fid, sfi_ep, ep.fid);
    if (level != FI_OPT_ENDPOINT)
        return -FI_ENOPROTOOPT;
    if (name == FI_OPT_MIN_MULTI_RECV) {
        if (!val || len != sizeof(size_t))
            return -FI_EINVAL;
        ep->min_multi_recv = *(const size_t *)val;
        return 0;
    }
    return -FI_ENOPROTOOPT;
}

static int ep_ctx(struct fid_ep *sep, int i, struct fi_tx_attr *a, struct fid_ep **e, void *c)
{
    (void)sep, (void)i, (void)a, (void)e, (void)c;
    return -FI_ENOSYS;
}

static int ep_rctx(struct fid_ep *sep, int i, struct fi_rx_attr *a, struct fid_ep **e, void *c)
{
    (void)sep, (void)i, (void)a, (void)e, (void)c;
    return -FI_ENOSYS;
}

static ssize_t ep_size_left(struct fid_ep *f)
{
    (void)f;
    return SFI_QSIZE;
}

static struct fi_ops_ep ep_ops = {
    .size = sizeof(struct fi_ops_ep), .cancel = ep_cancel, .getopt = ep_getopt,
    .setopt = ep_setopt, .tx_ctx = ep_ctx, .rx_ctx = ep_rctx, .rx_size_left = ep_size_left,
    .tx_size_left = ep_size_left,
};

int sfi_getname(fid_t fid, void *addr, size_t *len)
{
    if (!len || fid->fclass != FI_CLASS_EP)
        return -FI_EINVAL;
    sfi_ep *ep = container_of(fid, sfi_ep, ep.fid);
    size_t have = *len;
    *len = SFI_ADDRLEN;
    if (have < SFI_ADDRLEN || !addr)
        return -FI_ETOOSMALL;
    memcpy(addr, ep->name, SFI_ADDRLEN);
    return 0;
}

static int ep_bind(struct fid *fid, struct fid *b, uint64_t flags)
{
    sfi_ep *ep = container_of(fid, sfi_ep, ep.fid);
    if (!b)
        return -FI_EINVAL;
    int r = 0;
    pthread_mutex_lock(&ep->dom->lock);
    if (ep->enabled && b->fclass != FI_CLASS_MR) {
        r = -FI_EOPBADSTATE;
    } else if (b->fclass == FI_CLASS_AV) {
        sfi_av *av = container_of(b, sfi_av, av.fid);
        if (ep->av)
            r = -FI_EINVAL;
        else
            ep->av = av, av->refs++;
    } else if (b->fclass == FI_CLASS_CQ) {
        sfi_cq *cq = container_of(b, sfi_cq, cq.fid);
        if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION))
            r = -FI_EBADFLAGS;
        else if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq))
            r = -FI_EINVAL;
        else if (!(r = sfi_cq_add_ep(cq, ep))) {
            if (flags & FI_TRANSMIT)
                ep->tx_cq = cq, ep->tx_sel = (flags & FI_SELECTIVE_COMPLETION) != 0;
            if (flags & FI_RECV)
                ep->rx_cq = cq, ep->rx_sel = (flags & FI_SELECTIVE_COMPLETION) != 0;
        }
    } else if (b->fclass == FI_CLASS_CNTR) {
        sfi_cntr *c = container_of(b, sfi_cntr, c.fid);
        if (flags & ~(FI_SEND | FI_RECV))
            r = flags & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE) ? -FI_ENOSYS : -FI_EBADFLAGS;
        else if (((flags & FI_SEND) && ep->send_cntr) || ((flags & FI_RECV) && ep->recv_cntr))
            r = -FI_EINVAL;
        else if (!(r = sfi_cntr_add_ep(c, ep))) {
            if (flags & FI_SEND)
                ep->send_cntr = c;
            if (flags & FI_RECV)
                ep->recv_cntr = c;
        }
    } else if (b->fclass == FI_CLASS_EQ || b->fclass == FI_CLASS_MR) {
        r = 0; /* no asynchronous events; MRs are bookkeeping */
    } else {
        r = -FI_EINVAL;
    }
    pthread_mutex_unlock(&ep->dom->lock);
    return r;
}

static int ep_control(struct fid *fid, int cmd, void *arg)
{
    sfi_ep *ep = container_of(fid, sfi_ep, ep.fid);
    int r = 0;
    pthread_mutex_lock(&ep->dom->lock);
    switch (cmd) {
    case FI_ENABLE:
        if (!ep->av || (!ep->tx_cq && !ep->send_cntr) || (!ep->rx_cq && !ep->recv_cntr))
            r = -FI_ENOCQ;
        if (!ep->av)
            r = -FI_ENOAV;
        if (!r)
            ep->enabled = 1;
        break;
    case FI_GETOPSFLAG:
    case FI_SETOPSFLAG: {
        uint64_t *f = arg;
        if (!f || !(*f & (FI_TRANSMIT | FI_RECV)) || ((*f & FI_TRANSMIT) && (*f & FI_RECV))) {
            r = -FI_EINVAL;
            break;
        }
        uint64_t *p = (*f & FI_TRANSMIT) ? &ep->tx_op_flags : &ep->rx_op_flags;
        uint64_t dir = *f & (FI_TRANSMIT | FI_RECV);
        if (cmd == FI_GETOPSFLAG)
            *f = *p | dir;
        else
            *p = *f & ~(FI_TRANSMIT | FI_RECV);
        break;
    }
    default:
        r = -FI_ENOSYS;
    }
    pthread_mutex_unlock(&ep->dom->lock);
    return r;
}

static void free_lists(sfi_ep *ep)
{
    sfi_list *rl[2] = {&ep->rx_msg, &ep->rx_tag};
    for (int i = 0; i < 2; i++)
        while (rl[i]->head) {
            sfi_node *n = rl[i]->head;
            sfi_list_remove(rl[i], n);
            free(n);
        }
    while (ep->placing.head) {
        sfi_place *pl = (sfi_place *)ep->placing.head;
        sfi_list_remove(&ep->placing, &pl->node);
        free(pl->rx);
        free(pl);
    }
    sfi_list *ul[2] = {&ep->ux_msg, &ep->ux_tag};
    for (int i = 0; i < 2; i++)
        while (ul[i]->head)
            sfi_ux_free(ep, ul[i], (sfi_ux *)ul[i]->head);
    while (ep->tx.head)
        tx_free(ep, (sfi_tx *)ep->tx.head);
    sfi_seg_free_all(ep);
    for (int i = 0; i < SFI_MFD_MAX; i++)
        if (ep->mfd[i].m.capacity)
            smartt_memfd_close(&ep->mfd[i].m);
}

static int ep_close(struct fid *fid)
{
    sfi_ep *ep = container_of(fid, sfi_ep, ep.fid);
    sfi_domain *d = ep->dom;
    pthread_mutex_lock(&d->lock);
    if (ep->tx_cq)
        sfi_cq_del_ep(ep->tx_cq, ep);
    if (ep->rx_cq && ep->rx_cq != ep->tx_cq)
        sfi_cq_del_ep(ep->rx_cq, ep);
    if (ep->send_cntr)
        sfi_cntr_del_ep(ep->send_cntr, ep);
    if (ep->recv_cntr && ep->recv_cntr != ep->send_cntr)
        sfi_cntr_del_ep(ep->recv_cntr, ep);
    if (ep->av)
        ep->av->refs--;
    free_lists(ep);
    if (ep->s)
        smartt_close(ep->s);
    d->refs--;
    pthread_mutex_unlock(&d->lock);
    if (ep->late_failures || ep->bad_msgs)
        FI_INFO(&sfi_prov, FI_LOG_EP_CTRL, "%llu late send failures, %llu foreign messages\n",
                (unsigned long long)ep->late_failures, (unsigned long long)ep->bad_msgs);
    free(ep->scratch);
    free(ep);
    return 0;
}

static struct fi_ops ep_fi_ops = {
    .size = sizeof(struct fi_ops), .close = ep_close, .bind = ep_bind,
    .control = ep_control, .ops_open = sfi_no_ops_open,
};

/* ep_session opens the endpoint's session on $SMARTT_SOCKET (or the default socket)
 * and binds the endpoint that info's source address names (0: the daemon picks). */
static int ep_session(sfi_ep *ep, const struct fi_info *info)
{
    char err[200] = "";
    /* the endpoint sets up its own ring and memfds: messages in them are not copied again;
     * lazy Sent frames: a send completes at its Accepted frame, so a Sent frame nobody
     * waits for rides with the next frame instead of waking the rank on its own */
    /* the direct path to endpoints of the same daemon unless SMARTT_FI_DIRECT=0 */
    const char *d = getenv("SMARTT_FI_DIRECT");
    smartt_options o = {.no_lazy_sent = 0, .errbuf = err, .errlen = sizeof err, .auto_ring = -1,
                        .sendfd_threshold = -1, .direct = !(d && strcmp(d, "0") == 0)};
    int r = smartt_open(&ep->s, NULL, &o);
    if (r) {
        FI_WARN(&sfi_prov, FI_LOG_EP_CTRL, "cannot open a session on %s: %s %s\n",
                smartt_default_socket(), smartt_strerror(r), err);
        return sfi_err(r);
    }
    uint32_t want = 0, got = 0;
    if (info->src_addr && info->src_addrlen == SFI_ADDRLEN) {
        smartt_addr a;
        sfi_name_to(&a, info->src_addr);
        want = a.endpoint;
    }
    r = smartt_bind(ep->s, want, &got, 10000);
    if (r) {
        FI_WARN(&sfi_prov, FI_LOG_EP_CTRL, "bind: %s\n", smartt_strerror(r));
        return r == SMARTT_EDAEMON(3) ? -FI_EADDRINUSE : sfi_err(r);
    }
    if (o.direct) {
        smartt_placer pl = {.place = place_cb, .cut = cut_cb, .ctx = ep, .min_size = SFI_PLACE_MIN};
        smartt_set_placer(ep->s, &pl);
    }
    return sfi_local_name(ep->name, got);
}

int sfi_ep_open(struct fid_domain *dom, struct fi_info *info, struct fid_ep **out, void *ctx)
{
    if (!info || !out)
        return -FI_EINVAL;
    if (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
        return -FI_EINVAL;
    sfi_domain *d = container_of(dom, sfi_domain, d);
    sfi_ep *ep = calloc(1, sizeof *ep);
    if (!ep)
        return -FI_ENOMEM;
    ep->dom = d;
    ep->caps = info->caps ? info->caps : SFI_CAPS;
    ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
    ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
    ep->min_multi_recv = 64;
    const char *dv = getenv("SMARTT_FI_DELIVERY");
    ep->delivery_all = dv && !strcmp(dv, "1");
    ep->ux_limit_n = env_size("SMARTT_FI_UX_MAX", UX_LIMIT_N);
    ep->ux_limit_bytes = env_size("SMARTT_FI_UX_BYTES", UX_LIMIT_BYTES);
    const char *rv = getenv("SMARTT_FI_RING");
    ep->ring_state = rv && !strcmp(rv, "0") ? 3 : 0;
    ep->ring_size = env_size("SMARTT_FI_RING", 0);
    ep->ring_min = 64u << 10;
    const char *fv = getenv("SMARTT_FI_SENDFD");
    ep->sendfd_min = fv && !strcmp(fv, "0") ? SIZE_MAX : env_size("SMARTT_FI_SENDFD", 64u << 10);
    ep->seg_max = env_size("SMARTT_FI_SEGMENT", SFI_SEG_DEFAULT);
    if (ep->seg_max < 4096 || ep->seg_max > (1u << 30) - SFI_SEGHDR)
        ep->seg_max = SFI_SEG_DEFAULT;
    ep->seg_timeout_ms = (long long)env_size("SMARTT_FI_SEG_TIMEOUT", 30000);
    int r = ep_session(ep, info);
    if (r) {
        if (ep->s)
            smartt_close(ep->s);
        free(ep);
        return r;
    }
    ep->ep.fid.fclass = FI_CLASS_EP;
    ep->ep.fid.context = ctx;
    ep->ep.fid.ops = &ep_fi_ops;
    ep->ep.ops = &ep_ops;
    ep->ep.cm = &sfi_cm_ops;
    ep->ep.msg = &msg_ops;
    ep->ep.tagged = &tagged_ops;
    ep->ep.rma = &sfi_rma_ops;
    ep->ep.atomic = &sfi_atomic_ops;
    ep->ep.collective = &sfi_coll_ops;
    pthread_mutex_lock(&d->lock);
    d->refs++;
    pthread_mutex_unlock(&d->lock);
    *out = &ep->ep;
    return 0;
}
