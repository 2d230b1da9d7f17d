/* libsmartt: the session's byte queues, its frame parser and progress. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void put_u16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }
void put_u32(unsigned char *p, uint32_t v) { put_u16(p, (uint16_t)(v >> 16)); put_u16(p + 2, (uint16_t)v); }
void put_u64(unsigned char *p, uint64_t v) { put_u32(p, (uint32_t)(v >> 32)); put_u32(p + 4, (uint32_t)v); }
uint16_t get_u16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }
uint32_t get_u32(const unsigned char *p) { return ((uint32_t)get_u16(p) << 16) | get_u16(p + 2); }
uint64_t get_u64(const unsigned char *p) { return ((uint64_t)get_u32(p) << 32) | get_u32(p + 4); }

void put_hdr(unsigned char *p, int type, uint32_t tag, uint32_t len)
{
    p[0] = (unsigned char)type;
    p[1] = p[2] = p[3] = 0;
    put_u32(p + 4, tag);
    put_u32(p + 8, len);
}

long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint32_t sm_tag(smartt_session *s)
{
    if (++s->next_tag == 0)
        s->next_tag = 1;
    return s->next_tag;
}

int sm_fail(smartt_session *s, int err)
{
    if (!s->err)
        s->err = err;
    return s->err;
}

/* ---- event queues ---- */

int evq_push(evq *q, const smartt_event *e)
{
    if (q->n == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 64;
        smartt_event *ne = malloc(nc * sizeof *ne);
        if (!ne)
            return SMARTT_ENOMEM;
        for (size_t i = 0; i < q->n; i++)
            ne[i] = q->ev[(q->head + i) % q->cap];
        free(q->ev);
        q->ev = ne, q->cap = nc, q->head = 0;
    }
    q->ev[(q->head + q->n) % q->cap] = *e;
    q->n++;
    return 0;
}

int evq_pop(evq *q, smartt_event *e)
{
    if (!q->n)
        return 0;
    *e = q->ev[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    return 1;
}

/* evq_take removes the oldest event with tag and a type in mask. */
int evq_take(evq *q, uint32_t tag, unsigned mask, smartt_event *e)
{
    for (size_t i = 0; i < q->n; i++) {
        smartt_event *x = &q->ev[(q->head + i) % q->cap];
        if (x->tag != tag || !(mask & (1u << x->type)))
            continue;
        *e = *x;
        for (size_t j = i; j + 1 < q->n; j++)
            q->ev[(q->head + j) % q->cap] = q->ev[(q->head + j + 1) % q->cap];
        q->n--;
        return 1;
    }
    return 0;
}

void evq_free(evq *q)
{
    smartt_event e;
    while (evq_pop(q, &e))
        if (e.type == SMARTT_EV_RECV && !e.in_ring)
            free(e.own_);
    free(q->ev);
    q->ev = NULL;
}

/* ---- output ---- */

int out_append(smartt_session *s, const void *p, size_t n)
{
    if (s->out_head && s->out_head == s->out_len) { /* drained: restart at 0 */
        s->out_base += s->out_head;
        s->out_head = s->out_len = 0;
    }
    if (s->out_len + n > s->out_cap) {
        if (s->out_head) { /* compact first */
            memmove(s->out, s->out + s->out_head, s->out_len - s->out_head);
            s->out_base += s->out_head;
            s->out_len -= s->out_head;
            s->out_head = 0;
        }
        size_t nc = s->out_cap ? s->out_cap : 4096;
        while (nc < s->out_len + n)
            nc *= 2;
        if (nc != s->out_cap) {
            unsigned char *no = realloc(s->out, nc);
            if (!no)
                return SMARTT_ENOMEM;
            s->out = no, s->out_cap = nc;
        }
    }
    memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
    return 0;
}

int out_add_fd(smartt_session *s, int fd)
{
    if (s->nfds == s->fds_cap) {
        size_t nc = s->fds_cap ? s->fds_cap * 2 : 8;
        outfd *nf = realloc(s->fds, nc * sizeof *nf);
        if (!nf)
            return SMARTT_ENOMEM;
        s->fds = nf, s->fds_cap = nc;
    }
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0)
        return SMARTT_ESYS;
    s->fds[s->nfds].off = s->out_base + s->out_len;
    s->fds[s->nfds].fd = d;
    s->nfds++;
    return 0;
}

int out_frame(smartt_session *s, int type, uint32_t tag, const void *payload, size_t n)
{
    unsigned char h[HDR];
    put_hdr(h, type, tag, (uint32_t)n);
    int r = out_append(s, h, HDR);
    if (!r && n)
        r = out_append(s, payload, n);
    return r;
}

int out_releases(smartt_session *s)
{
    if (!s->nrel)
        return 0;
    unsigned char p[4 * MAX_RELEASE];
    for (size_t i = 0; i < s->nrel; i++)
        put_u32(p + 4 * i, s->rel[i]);
    int r = out_frame(s, F_RELEASE, 0, p, 4 * s->nrel);
    if (!r)
        s->nrel = 0;
    return r;
}

/* send_some writes bytes [off, end) of the queue, with descriptor fd if >= 0. */
static ssize_t send_some(smartt_session *s, size_t end, int fd)
{
    struct iovec iov = {s->out + s->out_head, end - s->out_head};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } c;
    if (fd >= 0) {
        memset(&c, 0, sizeof c);
        m.msg_control = c.buf;
        m.msg_controllen = sizeof c.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    return sendmsg(s->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* out_flush writes what the socket takes now; a descriptor goes with the first byte
 * of its frame, which starts a sendmsg of its own. */
int out_flush(smartt_session *s)
{
    while (s->out_head < s->out_len) {
        uint64_t pos = s->out_base + s->out_head;
        size_t end = s->out_len;
        int fd = -1;
        if (s->nfds && s->fds[0].off == pos) {
            fd = s->fds[0].fd;
            if (s->nfds > 1)
                end = (size_t)(s->fds[1].off - s->out_base);
        } else if (s->nfds) {
            end = (size_t)(s->fds[0].off - s->out_base);
        }
        ssize_t n = send_some(s, end, fd);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            return sm_fail(s, errno == EPIPE || errno == ECONNRESET ? SMARTT_ECLOSED : SMARTT_EIO);
        }
        if (fd >= 0) {
            close(fd);
            memmove(s->fds, s->fds + 1, (s->nfds - 1) * sizeof *s->fds);
            s->nfds--;
        }
        s->out_head += (size_t)n;
    }
    return 0;
}

/* write_iov writes the frames in iov straight from the caller's memory: blocking, it
 * waits for the socket (reading meanwhile); else what the socket does not take now
 * is copied into the queue. The queue must be empty. */
int write_iov(smartt_session *s, struct iovec *iov, int n, int blocking, int timeout_ms)
{
    long long dl = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)(n < IOV_MAX ? n : IOV_MAX)};
        ssize_t w = sendmsg(s->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return sm_fail(s, errno == EPIPE || errno == ECONNRESET ? SMARTT_ECLOSED : SMARTT_EIO);
        size_t left = w < 0 ? 0 : (size_t)w;
        while (n > 0 && left >= iov->iov_len)
            left -= iov->iov_len, iov++, n--;
        if (n > 0 && left) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
        if (n == 0 || w > 0)
            continue;
        if (!blocking) {
            for (int i = 0; i < n; i++) {
                int r = out_append(s, iov[i].iov_base, iov[i].iov_len);
                if (r)
                    return sm_fail(s, r); /* the stream would be cut: fatal */
            }
            return 0;
        }
        int left_ms = dl < 0 ? -1 : (int)(dl - now_ms());
        if (dl >= 0 && left_ms <= 0)
            return sm_fail(s, SMARTT_ETIMEDOUT); /* a frame may be cut */
        int r = wait_io(s, left_ms, 1);
        if (r < 0 && r != SMARTT_ETIMEDOUT)
            return r;
    }
    return 0;
}

/* wait_io polls the socket (for writing too if want_write or bytes are queued) and
 * runs progress; SMARTT_ETIMEDOUT when nothing came. */
int wait_io(smartt_session *s, int timeout_ms, int want_write)
{
    struct pollfd p[2] = {{s->fd, POLLIN, 0}, {s->epfd, POLLIN, 0}};
    if (want_write || s->out_head < s->out_len)
        p[0].events |= POLLOUT;
    int r = poll(p, s->epfd >= 0 ? 2 : 1, timeout_ms);
    if (r < 0 && errno != EINTR)
        return sm_fail(s, SMARTT_EIO);
    if (r <= 0)
        return SMARTT_ETIMEDOUT;
    r = smartt_progress(s);
    return r < 0 ? r : 0;
}
