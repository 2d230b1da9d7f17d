/* libsmartt: reading and checking the daemon's frames. Everything read is untrusted:
 * a frame that breaks the protocol makes the session fail with SMARTT_EPROTO. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

static void set_text(smartt_event *e, const unsigned char *p, size_t n)
{
    if (n >= sizeof e->text)
        n = sizeof e->text - 1;
    memcpy(e->text, p, n);
    e->text[n] = 0;
}

static void parse_from(smartt_event *e, const unsigned char *p)
{
    memcpy(e->from.addr, p, 16);
    e->from.port = get_u16(p + 16);
    e->from.endpoint = get_u32(p + 18);
    e->endpoint = get_u32(p + 22);
    e->size = get_u64(p + 26);
}

static int push(smartt_session *s, evq *q, const smartt_event *e)
{
    int r = evq_push(q, e);
    return r ? sm_fail(s, r) : 0;
}

/* cur_done queues the message being received once all its bytes are in. */
static int cur_done(smartt_session *s)
{
    if (s->cur_got < s->cur_size)
        return 0;
    s->cur_ev.data = s->cur_buf;
    s->cur_ev.own_ = s->cur_buf;
    s->cur_active = 0;
    s->cur_buf = NULL;
    s->received = 1;
    return push(s, &s->recv, &s->cur_ev);
}

static int on_recv(smartt_session *s, uint32_t tag, const unsigned char *p, uint32_t n)
{
    if (n != RECV_HDR || s->cur_active)
        return SMARTT_EPROTO;
    smartt_event e = {.type = SMARTT_EV_RECV, .tag = tag};
    parse_from(&e, p);
    if (e.size == 0 || e.size > MAX_RECV_SIZE)
        return SMARTT_EPROTO;
    s->cur_buf = malloc((size_t)e.size);
    if (!s->cur_buf)
        return SMARTT_ENOMEM;
    s->cur_active = 1, s->cur_tag = tag, s->cur_got = 0, s->cur_size = e.size;
    s->cur_ev = e;
    if (s->auto_state == AUTO_IDLE && s->auto_min > 0 && e.size >= (uint64_t)s->auto_min &&
        (s->caps & SMARTT_CAP_RING))
        auto_ring_start(s, e.size);
    return 0;
}

static int on_recvat(smartt_session *s, uint32_t tag, const unsigned char *p, uint32_t n)
{
    if (n != RECVAT_HDR || !s->ring)
        return SMARTT_EPROTO;
    smartt_event e = {.type = SMARTT_EV_RECV, .tag = tag, .in_ring = 1};
    parse_from(&e, p);
    uint64_t off = get_u64(p + RECV_HDR);
    if (e.size == 0 || e.size > s->ring_size || off > s->ring_size - e.size)
        return SMARTT_EPROTO;
    e.data = s->ring + off;
    s->received = 1;
    if (s->auto_state == AUTO_ON) { /* copied out: the caller owns what it receives */
        unsigned char *b = malloc((size_t)e.size);
        if (!b)
            return SMARTT_ENOMEM;
        memcpy(b, e.data, (size_t)e.size);
        e.data = b, e.own_ = b, e.in_ring = 0;
        s->rel[s->nrel++] = tag;
        if (s->nrel == MAX_RELEASE) {
            int r = out_releases(s);
            if (r)
                return r;
        }
    }
    return push(s, &s->recv, &e);
}

/* on_frame handles one whole frame (payload in p). */
static int on_frame(smartt_session *s, int type, uint32_t tag, const unsigned char *p, uint32_t n)
{
    smartt_event e = {.type = 0, .tag = tag};
    switch (type) {
    case F_DATA:
        if (!s->cur_active || tag != s->cur_tag || n == 0 || n > s->cur_size - s->cur_got)
            return SMARTT_EPROTO;
        memcpy(s->cur_buf + s->cur_got, p, n);
        s->cur_got += n;
        return cur_done(s);
    case F_RECV:
        return on_recv(s, tag, p, n);
    case F_RECVAT:
        return on_recvat(s, tag, p, n);
    case F_BOUND:
        if (n != 4)
            return SMARTT_EPROTO;
        e.type = SMARTT_EV_BOUND, e.endpoint = get_u32(p);
        s->endpoint = e.endpoint;
        break;
    case F_SENT:
        if (n != 32)
            return SMARTT_EPROTO;
        e.type = SMARTT_EV_SENT;
        e.elapsed_ns = get_u64(p), e.srtt_ns = get_u64(p + 8);
        e.window = get_u64(p + 16), e.retransmissions = get_u64(p + 24);
        break;
    case F_FAILED:
        e.type = SMARTT_EV_FAILED, e.status = SMARTT_EFAILED;
        set_text(&e, p, n);
        break;
    case F_ERROR:
        if (n < 2)
            return SMARTT_EPROTO;
        e.type = SMARTT_EV_ERROR, e.status = SMARTT_EDAEMON(get_u16(p));
        set_text(&e, p + 2, n - 2);
        if (tag == 0) { /* a notice; 1 and 11 are the daemon's last words */
            if (e.status == SMARTT_EDAEMON(1) || e.status == SMARTT_EDAEMON(11))
                s->last_words = e.status;
            return push(s, &s->recv, &e);
        }
        if (tag == s->ring_tag) { /* the ring was refused */
            munmap(s->ring, (size_t)s->ring_size);
            s->ring = NULL, s->ring_size = 0, s->ring_tag = 0;
            if (tag == s->auto_tag) { /* the automatic one: nobody waits for the answer */
                s->auto_state = AUTO_OFF, s->auto_tag = 0;
                return 0;
            }
        }
        break;
    case F_RINGOK:
        if (n != 8 || tag == 0 || tag != s->ring_tag)
            return SMARTT_EPROTO;
        if (tag == s->auto_tag) {
            s->auto_state = AUTO_ON, s->auto_size = get_u64(p), s->auto_tag = 0, s->ring_tag = 0;
            return 0;
        }
        e.type = SMARTT_EV_RING_OK, e.size = get_u64(p);
        s->ring_tag = 0;
        break;
    case F_ACCEPTED:
        if (s->version < 2 || n != 0)
            return SMARTT_EPROTO;
        e.type = SMARTT_EV_ACCEPTED;
        break;
    case F_DIRECTOK:
    case F_DIRECTPEER:
        return direct_frame(s, type, tag, p, n);
    case F_CANCELRES:
        if (s->version < 2 || n != 1 || p[0] > 2)
            return SMARTT_EPROTO;
        e.type = SMARTT_EV_CANCEL_RESULT, e.cancel = p[0];
        break;
    default:
        return SMARTT_EPROTO;
    }
    return push(s, &s->done, &e);
}

/* parse handles the whole frames in the input buffer; a Data payload that is not all
 * there yet is copied as far as it is, and the rest read straight into the message. */
static int parse(smartt_session *s)
{
    size_t off = 0;
    int r = 0;
    while (s->in_len - off >= HDR) {
        const unsigned char *h = s->in + off;
        uint32_t len = get_u32(h + 8), tag = get_u32(h + 4);
        if (h[1] || h[2] || h[3] || len > SMARTT_MAX_PAYLOAD) {
            r = SMARTT_EPROTO;
            break;
        }
        size_t have = s->in_len - off - HDR;
        if (h[0] == F_DATA && have < len && s->cur_active && tag == s->cur_tag && len &&
            len <= s->cur_size - s->cur_got) {
            memcpy(s->cur_buf + s->cur_got, h + HDR, have);
            s->cur_got += have;
            s->direct_left = len - have;
            off = s->in_len;
            break;
        }
        if (have < len) {
            if (HDR + (size_t)len > s->in_cap) { /* a large non-Data frame: grow */
                unsigned char *ni = realloc(s->in, HDR + (size_t)len);
                if (!ni) {
                    r = SMARTT_ENOMEM;
                    break;
                }
                s->in = ni, s->in_cap = HDR + (size_t)len;
            }
            break;
        }
        r = on_frame(s, h[0], tag, h + HDR, len);
        off += HDR + len;
        if (r)
            break;
    }
    if (off) {
        memmove(s->in, s->in + off, s->in_len - off);
        s->in_len -= off;
    }
    return r ? sm_fail(s, r) : 0;
}

int in_parse(smartt_session *s)
{
    return s->in_len ? parse(s) : 0;
}

/* in_read reads what the socket has (a bounded number of reads, so one busy session
 * cannot hold a progress engine for ever) and parses it. */
int in_read(smartt_session *s)
{
    for (int i = 0; i < 64 && !s->err; i++) {
        ssize_t n;
        if (s->direct_left) {
            struct iovec iov[2] = {{s->cur_buf + s->cur_got, s->direct_left},
                                   {s->in + s->in_len, s->in_cap - s->in_len}};
            n = sm_read(s, iov, 2);
            if (n > 0) {
                size_t a = (size_t)n < s->direct_left ? (size_t)n : s->direct_left;
                s->cur_got += a, s->direct_left -= a, s->in_len += (size_t)n - a;
                if (!s->direct_left && cur_done(s))
                    return s->err;
            }
        } else {
            size_t want = s->in_cap - s->in_len;
            struct iovec iov = {s->in + s->in_len, want};
            n = sm_read(s, &iov, 1);
            if (n > 0)
                s->in_len += (size_t)n;
            if (n > 0 && (size_t)n < want) { /* a short read: the socket is drained */
                parse(s);
                return s->err;
            }
        }
        if (n == 0)
            return sm_fail(s, s->last_words ? s->last_words : SMARTT_ECLOSED);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return sm_fail(s, errno == ECONNRESET ? SMARTT_ECLOSED : SMARTT_EIO);
        }
        if (!s->direct_left && parse(s))
            return s->err;
    }
    return s->err;
}

int smartt_progress(smartt_session *s)
{
    if (!s)
        return SMARTT_EINVAL;
    if (s->err)
        return s->err;
    int r = out_releases(s);
    if (!r)
        r = out_flush(s);
    if (!r)
        r = s->direct ? direct_progress(s) : in_read(s);
    direct_sync(s);
    if (r)
        return sm_fail(s, r);
    size_t n = s->done.n + s->recv.n;
    return n > 0x7fffffff ? 0x7fffffff : (int)n;
}

int smartt_poll_completion(smartt_session *s, smartt_event *ev)
{
    if (!s || !ev)
        return SMARTT_EINVAL;
    if (evq_pop(&s->done, ev) || sm_recv_pop(s, ev))
        return 1;
    return 0;
}

int smartt_poll_outcome(smartt_session *s, smartt_event *ev)
{
    if (!s || !ev)
        return SMARTT_EINVAL;
    return evq_pop(&s->done, ev);
}

int smartt_release(smartt_session *s, smartt_event *ev)
{
    if (!ev || ev->type != SMARTT_EV_RECV)
        return SMARTT_EINVAL;
    if (!ev->in_ring) {
        free(ev->own_);
        ev->own_ = NULL, ev->data = NULL;
        return 0;
    }
    if (!s)
        return SMARTT_EINVAL;
    ev->data = NULL, ev->in_ring = 0, ev->type = 0;
    if (s->err)
        return s->err;
    s->rel[s->nrel++] = ev->tag;
    if (s->nrel == MAX_RELEASE) {
        int r = out_releases(s);
        if (!r)
            r = out_flush(s);
        direct_sync(s);
        return r ? sm_fail(s, r) : 0;
    }
    return 0;
}
