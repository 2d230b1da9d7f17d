/* libsmartt internals: the session's state, shared by the source files. */
#ifndef SMARTT_INTERNAL_H
#define SMARTT_INTERNAL_H

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "smartt.h"

enum {
    F_BIND = 0x01, F_SEND = 0x02, F_DATA = 0x03, F_SENDFD = 0x04, F_RECVRING = 0x05,
    F_RELEASE = 0x06, F_WANTSENT = 0x07, F_CANCEL = 0x08,
    F_BOUND = 0x81, F_SENT = 0x82, F_FAILED = 0x83, F_RECV = 0x84, F_ERROR = 0x85,
    F_RINGOK = 0x86, F_RECVAT = 0x87, F_ACCEPTED = 0x88, F_CANCELRES = 0x89,
    F_DIRECT = 0x09, F_DIRECTOK = 0x8a, F_DIRECTPEER = 0x8b
};

#define HDR 12
#define SEND_HDR 30
#define RECV_HDR 34
#define RECVAT_HDR 42
#define MAX_RELEASE 64
#define MAX_RECV_SIZE (1ull << 30) /* the daemon's api.max_message bound */
#define INBUF_MIN (256u << 10)
#define AUTO_RING (1ll << 20)      /* default smartt_options.auto_ring */
#define AUTO_RING_MIN (64u << 10)  /* smaller messages keep coming over the socket */
#define AUTO_RING_MSGS 4
#define MAX_AUTO_RING (64ull << 20)
enum { AUTO_IDLE, AUTO_TRYING, AUTO_ON, AUTO_OFF };

/* The direct path (direct.c). */
#define DIRECT_REQ 22          /* Direct: address 16, port 2, endpoint 4 */
#define DIRECT_OK 9            /* DirectOK: status 1, pair 8 */
#define DIRECT_PEER 34         /* DirectPeer: pair 8, from 22, our endpoint 4 */
#define PAIR_HDR 16            /* a message on a pair: type 1, 7 zero bytes, size u64 */
#define MAX_PAIRS 1024         /* the daemon's bound per session */
#define PAIR_QMAX (1u << 20)   /* bytes queued for a pair beyond which sends wait */
#define PAIR_INBUF (64u << 10)
#define PAIR_READS 16          /* reads of one pair per progress */
#define PAIR_BUDGET (256ull << 20) /* smartt_options.direct_recv_max's default */
#define LINGER_MS 5000         /* smartt_close writes what pairs hold for up to this long */
#define RELAY_AGAIN 4096       /* relayed messages before asking again after a refusal */
#define MAX_FDS_IN 64          /* received descriptors not yet claimed by a frame */
#define MAX_ROUTES 65536
#define ASK_WAIT_MS 50          /* how long a send waits for the daemon's answer */
typedef struct sm_pair sm_pair;
enum { R_NONE, R_ASKING, R_PAIR, R_RELAY };
typedef struct sm_route {
    unsigned char key[DIRECT_REQ];
    int used, state;
    uint32_t tag;  /* R_ASKING: the Direct request's */
    uint32_t left; /* R_RELAY: messages before asking again */
    sm_pair *pair; /* R_PAIR */
    /* R_ASKING: messages sent meanwhile, each PAIR_HDR and its bytes, and their tags */
    unsigned char *held;
    size_t held_len, held_cap, nheld, htags_cap;
    uint32_t *htags;
} sm_route;

/* An event queue: a growable ring of events. */
typedef struct evq {
    smartt_event *ev;
    size_t cap, head, n;
} evq;

/* A descriptor to pass with the queued byte at stream offset off. */
typedef struct outfd {
    uint64_t off;
    int fd;
} outfd;

struct smartt_session {
    int fd;
    int err;      /* first fatal error; sticky */
    int version;  /* 1 or 2 */
    unsigned caps;
    uint64_t max_ring;
    uint32_t next_tag;
    uint32_t endpoint;
    int received; /* a message was received (lazy Sent: WantSent pays) */
    int last_words; /* the status of the last tag-0 Error: the session's error at EOF */
    char *socket_path;
    long long fd_threshold; /* smartt_send's memfd threshold; < 0: never */
    smartt_memfd big;       /* smartt_send's memfd (fd -1 until needed) */

    /* Output: bytes queued for the socket; out_base is the stream offset of out[0]. */
    unsigned char *out;
    size_t out_len, out_cap, out_head;
    uint64_t out_base;
    outfd *fds;
    size_t nfds, fds_cap;
    uint32_t rel[MAX_RELEASE];
    size_t nrel;

    /* Input. */
    unsigned char *in;
    size_t in_len, in_cap;
    /* The message being received over the socket. */
    int cur_active;
    uint32_t cur_tag;
    unsigned char *cur_buf;
    uint64_t cur_got, cur_size;
    size_t direct_left; /* bytes of the current Data payload still to read into cur_buf */
    smartt_event cur_ev;

    /* Receive ring. */
    unsigned char *ring;
    uint64_t ring_size;
    uint32_t ring_tag; /* the pending RecvRing request */
    /* The automatic ring (smartt_options.auto_ring). */
    long long auto_min; /* threshold; < 0: never */
    int auto_state;     /* AUTO_IDLE ... */
    uint32_t auto_tag;  /* its RecvRing request */
    uint64_t auto_size; /* its size once the daemon took it */

    evq done; /* replies and outcomes */
    evq recv; /* received messages and tag-0 errors */

    /* The direct path (direct.c); epfd -1 without it. */
    int want_direct, direct, epfd, out_armed;
    int fds_in[MAX_FDS_IN];
    size_t nfds_in;
    sm_pair **pairs; /* every pair ever granted (dead ones keep their id) */
    size_t npairs, pairs_cap, live_pairs, backed_pairs;
    sm_route *routes;
    size_t routes_cap, nroutes;
    smartt_direct_stats st;
    /* The receive budget: pair messages from their header until taken (sm_recv_pop). */
    uint64_t pair_held, pair_budget;
    size_t paused_pairs;
    struct heldmsg { const void *data; uint64_t size; } *hq; /* queued pair messages, in order */
    size_t hq_cap, hq_head, hq_n;
    smartt_placer placer; /* place NULL: none */
};

int evq_push(evq *q, const smartt_event *e);
int evq_pop(evq *q, smartt_event *e);
int evq_take(evq *q, uint32_t tag, unsigned mask, smartt_event *e);
void evq_free(evq *q);

uint32_t sm_tag(smartt_session *s);
int sm_fail(smartt_session *s, int err);
void put_hdr(unsigned char *p, int type, uint32_t tag, uint32_t len);
void put_u16(unsigned char *p, uint16_t v);
void put_u32(unsigned char *p, uint32_t v);
void put_u64(unsigned char *p, uint64_t v);
uint16_t get_u16(const unsigned char *p);
uint32_t get_u32(const unsigned char *p);
uint64_t get_u64(const unsigned char *p);

/* Output. */
int out_append(smartt_session *s, const void *p, size_t n);
int out_add_fd(smartt_session *s, int fd); /* dup'd; passed with the next appended byte */
int out_flush(smartt_session *s);          /* non-blocking */
int out_frame(smartt_session *s, int type, uint32_t tag, const void *payload, size_t n);
int out_releases(smartt_session *s);       /* queues the pending Release frame */
int write_iov(smartt_session *s, struct iovec *iov, int n, int blocking, int timeout_ms);

/* Input. */
int in_read(smartt_session *s);
int in_parse(smartt_session *s);           /* frames that came with the Upgrade response */            /* non-blocking read and parse */
int wait_io(smartt_session *s, int timeout_ms, int want_write);
long long now_ms(void);

void auto_ring_start(smartt_session *s, uint64_t size); /* session.c */

int http_upgrade(smartt_session *s, const char *proto, int timeout_ms, int lazy,
                 char *errbuf, size_t errlen);
int sock_connect(const char *path, int timeout_ms);
int sm_request(smartt_session *s, int type, uint32_t tag, const void *p, size_t n, int fd);

/* direct.c */
ssize_t sm_read(smartt_session *s, struct iovec *iov, int n); /* recvmsg, keeping descriptors */
int direct_setup(smartt_session *s);
void direct_free(smartt_session *s);
void direct_linger(smartt_session *s); /* writes what pairs hold before they close */
int direct_frame(smartt_session *s, int type, uint32_t tag, const unsigned char *p, uint32_t n);
int direct_progress(smartt_session *s);
int sm_recv_pop(smartt_session *s, smartt_event *ev); /* evq_pop of s->recv, uncharging */
void direct_sync(smartt_session *s); /* the daemon socket's EPOLLOUT follows its queue */
/* direct_route: 0 through the daemon; 3 through the daemon, then direct_ask(*rp); 1 the
 * pair *pp; 2 hold it in *rp (direct_hold) while the daemon is asked; SMARTT_EAGAIN when
 * the pair or the held messages reach PAIR_QMAX. */
int direct_route(smartt_session *s, const smartt_addr *to, sm_pair **pp, sm_route **rp);
int direct_ask(smartt_session *s, sm_route *r);
int direct_hold(smartt_session *s, sm_route *r, const void *buf, size_t len, uint32_t *tag);
int sm_relay(smartt_session *s, const smartt_addr *to, const void *buf, size_t len, uint32_t tag);
int direct_send(smartt_session *s, sm_pair *p, const void *buf, size_t len, uint32_t *tag);

#endif
