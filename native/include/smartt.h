/* libsmartt: the C client of the smarttd API (docs/api.md, docs/c.md).
 *
 * One session is one Unix-socket connection to a daemon, upgraded to the framed
 * messaging protocol (smartt-msg/2 when the daemon speaks it, else smartt-msg/1).
 * The library has no global state. Thread safety, per call:
 *   - calls marked [any thread] may be made from any thread at any time;
 *   - every other call takes a session and must not run concurrently with another
 *     call on the same session (serialize with a lock of your own); different
 *     sessions are independent.
 * Every call that can fail returns a negative SMARTT_E* code (smartt_strerror).
 *
 * Non-blocking use (progress engines): the session's socket, smartt_fd(), is
 * non-blocking. Start requests with the *_start / *_async calls, poll() the fd for
 * POLLIN (and POLLOUT while smartt_want_write() is true), call smartt_progress(),
 * then drain events with smartt_poll_completion(). Blocking use: smartt_bind,
 * smartt_send, smartt_recv, smartt_wait with a timeout in milliseconds (-1: none).
 */
#ifndef SMARTT_H
#define SMARTT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SMARTT_DEFAULT_SOCKET "/run/smartt/smarttd.sock"
#define SMARTT_MAX_PAYLOAD (1u << 20) /* largest frame payload */
#define SMARTT_HEADROOM 12            /* bytes before a message in a SendFD memfd */

/* Error codes (all negative). */
#define SMARTT_OK 0
#define SMARTT_EINVAL (-1)    /* invalid argument */
#define SMARTT_ENOMEM (-2)    /* out of memory */
#define SMARTT_ECONNECT (-3)  /* cannot connect to the daemon's socket */
#define SMARTT_EIO (-4)       /* socket error (errno tells) */
#define SMARTT_ECLOSED (-5)   /* the daemon closed the session */
#define SMARTT_EPROTO (-6)    /* the daemon sent malformed data; the session is unusable */
#define SMARTT_EVERSION (-7)  /* the daemon speaks no protocol version this library does */
#define SMARTT_EHTTP (-8)     /* the daemon refused the HTTP request */
#define SMARTT_EAGAIN (-9)    /* nothing ready yet */
#define SMARTT_ETIMEDOUT (-10)
#define SMARTT_ENOTSUP (-11)  /* not supported by this daemon (version or session) */
#define SMARTT_EFAILED (-12)  /* the message failed (a Failed frame; text says why) */
#define SMARTT_EBUSY (-13)    /* the daemon has no session slot free (HTTP 503) */
#define SMARTT_ESYS (-14)     /* a system call failed (errno tells) */
/* A daemon Error frame with code c (1..65535) is SMARTT_EDAEMON(c). */
#define SMARTT_EDAEMON_BASE 100
#define SMARTT_EDAEMON(c) (-(SMARTT_EDAEMON_BASE + (int)(c)))
#define SMARTT_DAEMON_CODE(e) (-(e) - SMARTT_EDAEMON_BASE) /* for e <= -101 */

/* smartt_strerror describes a code. [any thread] */
const char *smartt_strerror(int code);

/* The daemon's socket: $SMARTT_SOCKET if set and not empty, else
 * SMARTT_DEFAULT_SOCKET (as the smartt CLI finds it). [any thread] */
const char *smartt_default_socket(void);

/* A destination or source: address (16 bytes, IPv4-mapped for IPv4), UDP port and
 * endpoint. */
typedef struct smartt_addr {
    uint8_t addr[16];
    uint16_t port;
    uint32_t endpoint;
} smartt_addr;

/* smartt_addr_parse fills a from "HOST:PORT" ("127.0.0.2:23600", "[::1]:23600")
 * and endpoint. [any thread] */
int smartt_addr_parse(smartt_addr *a, const char *hostport, uint32_t endpoint);
/* smartt_addr_format writes "HOST:PORT/ENDPOINT" into buf. [any thread] */
int smartt_addr_format(const smartt_addr *a, char *buf, size_t len);

typedef struct smartt_session smartt_session;

/* Options of smartt_open; zero values are the defaults. */
typedef struct smartt_options {
    int timeout_ms;   /* connect and Upgrade (0: 10 s) */
    int max_version;  /* highest protocol version to offer (0: the newest, 2) */
    int no_lazy_sent; /* 1: do not ask for lazy Sent frames */
    char *errbuf;     /* if set, the daemon's refusal text goes here */
    size_t errlen;
    long long sendfd_threshold; /* smartt_send passes messages of at least this many
                                 * bytes through a memfd of the session's (0: 4 MiB;
                                 * negative: never) */
    long long auto_ring; /* the automatic receive ring: set up when a message of at least
                          * this many bytes first arrives over the socket (0: 1 MiB;
                          * negative: never); it holds 4 such messages (at most 64 MiB
                          * and the daemon's max), messages of 64 KiB and more then come
                          * through it and are copied out (in_ring stays 0) */
    int direct;       /* 1: offer the direct path (docs/api.md "Direct path"): messages to
                       * an endpoint bound by another session of the same daemon that also
                       * has it go over a Unix socket pair between the two clients, not
                       * through the daemon. Then smartt_send_async and the other sends may
                       * answer SMARTT_EAGAIN (the daemon is being asked about a new
                       * destination, or its pair holds PAIR_QMAX (1 MiB) unwritten bytes:
                       * call smartt_progress and send again), a message over a pair is
                       * ACCEPTED and SENT once written to it (FAILED if its receiver's
                       * session ended), and a progress engine polls smartt_poll_fd(), not
                       * smartt_fd() */
    long long direct_recv_max; /* bytes of messages read from pairs and not yet taken
                                * by the application (0: 256 MiB); a pair's next message
                                * beyond it waits in the pair, its sender held back
                                * (never dropped), unless nothing is held */
} smartt_options;

/* smartt_open connects to socket_path (NULL: smartt_default_socket()) and opens a
 * messaging session. opt may be NULL. [any thread: creates a session] */
int smartt_open(smartt_session **out, const char *socket_path, const smartt_options *opt);
/* smartt_close ends the session and frees it; outcomes not yet read are lost,
 * received ring messages are unmapped (release socket messages first, or free them
 * with smartt_release(NULL, ev)). */
void smartt_close(smartt_session *s);

/* Capabilities of the session. */
#define SMARTT_CAP_SENDFD 1u    /* SendFD (sealed memfds) */
#define SMARTT_CAP_RING 2u      /* receive ring */
#define SMARTT_CAP_LAZY_SENT 4u /* lazy Sent frames */
#define SMARTT_CAP_CANCEL 8u    /* Cancel (protocol 2) */
#define SMARTT_CAP_ACCEPTED 16u /* Accepted events (protocol 2) */
#define SMARTT_CAP_DIRECT 32u   /* the direct path (smartt_options.direct, protocol 2) */
unsigned smartt_caps(const smartt_session *s);
int smartt_version(const smartt_session *s);          /* 1 or 2 */
uint64_t smartt_max_ring(const smartt_session *s);    /* the daemon's Smartt-Recv-Ring */
uint32_t smartt_endpoint(const smartt_session *s);    /* bound endpoint, 0 if none */
uint64_t smartt_ring_auto(const smartt_session *s);   /* the automatic ring's size, 0 if none */

/* Non-blocking core. */
int smartt_fd(const smartt_session *s);         /* poll it for POLLIN */
int smartt_want_write(const smartt_session *s); /* 1: bytes queued, poll for POLLOUT too */
/* smartt_poll_fd is the one descriptor a progress engine polls, for the events
 * smartt_poll_events() names: smartt_fd() without the direct path; with it, an epoll
 * descriptor that is readable when the daemon's socket or a pair has input, or room for
 * bytes queued for it (smartt_want_write() also counts bytes queued for pairs). */
int smartt_poll_fd(const smartt_session *s);
int smartt_poll_events(const smartt_session *s); /* POLLIN, or POLLIN|POLLOUT */

/* Direct path counters (zero without it). */
typedef struct smartt_direct_stats {
    uint64_t pairs;        /* pairs the daemon handed to this session */
    uint64_t pairs_open;   /* of which still open */
    uint64_t sent, received; /* messages written to / read from pairs */
    uint64_t failed;       /* messages failed because their pair ended */
    uint64_t bad;          /* pairs ended by a malformed header or an oversized message */
    uint64_t cut;          /* pairs that ended in the middle of a message (dropped unread) */
    uint64_t held;         /* bytes of pair messages read or being read, not yet taken */
    uint64_t waits;        /* times a pair's next message waited for direct_recv_max */
    uint64_t placed;       /* messages read straight into the placer's buffers */
} smartt_direct_stats;
int smartt_direct_stats_get(const smartt_session *s, smartt_direct_stats *st);

/* A placer receives pair messages straight into buffers of the application's (one copy
 * fewer): when a message of at least min_size bytes starts on a pair and no received
 * message waits in the session's queue, place gets its sender, size and first nhead
 * bytes (at least the smaller of size and SMARTT_PLACE_HEAD) and returns a buffer for
 * the bytes from *skip (<= nhead, < size) on, or NULL to have it read as usual. The
 * message then arrives as a RECV event with placed set and data that buffer; if its
 * pair ends first, cut(ctx, buf) gives the buffer back (its bytes undefined). The
 * callbacks run inside smartt_progress and may not call into the session. */
#define SMARTT_PLACE_HEAD 64
typedef struct smartt_placer {
    void *(*place)(void *ctx, const smartt_addr *from, uint32_t endpoint, uint64_t size,
                   const unsigned char *head, size_t nhead, size_t *skip);
    void (*cut)(void *ctx, void *buf);
    void *ctx;
    uint64_t min_size;
} smartt_placer;
/* smartt_set_placer sets (NULL: clears) the session's placer. */
int smartt_set_placer(smartt_session *s, const smartt_placer *p);
/* smartt_progress writes and reads what it can without blocking and queues the
 * events; it returns the number of queued events or a negative error (the session is
 * then broken: every later call returns the same error). */
int smartt_progress(smartt_session *s);

enum smartt_event_type {
    SMARTT_EV_BOUND = 1,     /* tag: Bind's; endpoint */
    SMARTT_EV_SENT,          /* every byte acknowledged by the peer daemon (v2: delivered) */
    SMARTT_EV_FAILED,        /* the message failed; status SMARTT_EFAILED, text */
    SMARTT_EV_ACCEPTED,      /* v2: the daemon has the bytes (inject-complete) */
    SMARTT_EV_RECV,          /* a received message: from, endpoint, size, data */
    SMARTT_EV_ERROR,         /* status SMARTT_EDAEMON(code), text; tag 0: not a reply */
    SMARTT_EV_RING_OK,       /* the ring is mapped; size */
    SMARTT_EV_CANCEL_RESULT  /* cancel: 0 cancelled, 1 in flight, 2 unknown or done */
};
#define SMARTT_CANCELLED 0
#define SMARTT_CANCEL_IN_FLIGHT 1
#define SMARTT_CANCEL_UNKNOWN 2

typedef struct smartt_event {
    int type;
    uint32_t tag;     /* the request's tag (RECV: the daemon's sequence number; 0 over a pair) */
    int status;       /* 0, or the error of FAILED/ERROR */
    uint32_t endpoint; /* BOUND: bound endpoint; RECV: our endpoint */
    uint32_t cancel;  /* CANCEL_RESULT */
    uint64_t elapsed_ns, srtt_ns, window, retransmissions; /* SENT */
    smartt_addr from; /* RECV: the sender */
    uint64_t size;    /* RECV: bytes at data; RING_OK: ring size */
    const unsigned char *data; /* RECV: the message, valid until smartt_release */
    int in_ring;      /* RECV: data is in the receive ring (read-only) */
    int placed;       /* RECV: data is the placer's buffer, holding the message from the
                       * byte the placer skipped to (size counts those bytes) */
    char text[192];   /* FAILED/ERROR text, truncated */
    void *own_;       /* the library's */
} smartt_event;

/* smartt_poll_completion takes the oldest queued event: 1 if it filled ev, 0 if
 * none is queued (it does not read the socket: call smartt_progress). Outcomes
 * and replies come before received messages. */
int smartt_poll_completion(smartt_session *s, smartt_event *ev);
/* smartt_poll_outcome is smartt_poll_completion without received messages: replies and
 * outcomes only (RECV events stay queued for smartt_recv). */
int smartt_poll_outcome(smartt_session *s, smartt_event *ev);
/* smartt_release gives back a RECV event's data (frees it, or releases its ring
 * space; ring releases are batched and sent with the next write or progress).
 * s may be NULL for a socket message. Other events need no release. */
int smartt_release(smartt_session *s, smartt_event *ev);

/* Requests. *tag (may be NULL) gets the request's tag; the outcome arrives as an
 * event with that tag. */
int smartt_bind_start(smartt_session *s, uint32_t endpoint, uint32_t *tag);
/* The message is copied or written before the call returns: buf is reusable at once.
 * It ends in exactly one SENT, FAILED or ERROR event (v2: after an ACCEPTED one). */
int smartt_send_async(smartt_session *s, const smartt_addr *to, const void *buf,
                      size_t len, uint32_t *tag);
/* smartt_sendv_direct sends the message gathered from iov (at most SMARTT_IOV_MAX
 * entries) over the direct pair to `to`, SMARTT_ENOTSUP when there is none now (send
 * it another way; nothing was sent) and SMARTT_EAGAIN while the pair holds PAIR_QMAX
 * unwritten bytes. What the pair's socket does not take at once is borrowed, not
 * copied, when nothing else waits for the pair: then *borrowed is 1 and the buffers
 * must stay as they are until the message's SENT or FAILED event; else it is copied
 * (*borrowed 0). Large messages to a peer of the same daemon thus cost no copy in user
 * space. */
#define SMARTT_IOV_MAX 16
int smartt_sendv_direct(smartt_session *s, const smartt_addr *to, const struct iovec *iov,
                        int niov, uint32_t *tag, int *borrowed);
/* Sends size bytes at offset SMARTT_HEADROOM of a memfd sealed against shrinking and
 * growing, passed with SCM_RIGHTS (zero copy). Do not write into it until the
 * message's outcome arrived. SMARTT_ENOTSUP without SMARTT_CAP_SENDFD. */
int smartt_send_fd_async(smartt_session *s, const smartt_addr *to, int memfd,
                         uint64_t size, uint32_t *tag);
/* Asks for the outcome of a message held as a lazy Sent frame (optional). */
int smartt_want_sent(smartt_session *s, uint32_t tag);
/* v2: cancels message tag; a CANCEL_RESULT event answers. SMARTT_ENOTSUP on v1. */
int smartt_cancel(smartt_session *s, uint32_t tag);
/* Sets up a receive ring of size bytes (a page multiple); messages smaller than
 * min_message (0: all) keep coming over the socket. RING_OK or ERROR answers. */
int smartt_ring_start(smartt_session *s, uint64_t size, uint64_t min_message, uint32_t *tag);

/* A sealed memfd for zero-copy sends: write the message at data (capacity bytes),
 * then smartt_send_memfd. Reusable once the message's outcome arrived. */
typedef struct smartt_memfd {
    int fd;
    unsigned char *data;
    size_t capacity;
    void *map_;
    size_t maplen_;
} smartt_memfd;
int smartt_memfd_open(smartt_memfd *m, size_t capacity); /* [any thread] */
void smartt_memfd_close(smartt_memfd *m);                /* [any thread] */
int smartt_send_memfd(smartt_session *s, const smartt_addr *to, const smartt_memfd *m,
                      size_t len, uint32_t *tag);

/* Blocking layer. timeout_ms -1 waits for ever. While waiting, other events are
 * queued for smartt_poll_completion / smartt_recv. */
/* smartt_wait waits for the next event with tag whose type is in mask (bit 1 << type). */
int smartt_wait(smartt_session *s, uint32_t tag, unsigned mask, smartt_event *ev, int timeout_ms);
int smartt_bind(smartt_session *s, uint32_t endpoint, uint32_t *bound, int timeout_ms);
/* Sends and waits for SENT (0), FAILED (SMARTT_EFAILED) or ERROR (SMARTT_EDAEMON);
 * ev (may be NULL) gets the outcome. A message of at least the session's
 * sendfd_threshold (4 MiB) goes through a sealed memfd the session keeps (one copy in
 * user space instead of the socket's two kernel copies; streamed if the daemon takes
 * no memfds or refuses it). */
int smartt_send(smartt_session *s, const smartt_addr *to, const void *buf, size_t len,
                smartt_event *ev, int timeout_ms);
/* Waits for a received message (or a tag-0 Error, returned as its status). */
int smartt_recv(smartt_session *s, smartt_event *ev, int timeout_ms);
int smartt_ring_enable(smartt_session *s, uint64_t size, uint64_t min_message, int timeout_ms);

/* Control (HTTP GET on a fresh connection). *body gets a malloc'd NUL-terminated JSON
 * text (free() it); returns the HTTP status (200) or a negative error. [any thread] */
int smartt_get(const char *socket_path, const char *path, char **body, int timeout_ms);
int smartt_status_json(smartt_session *s, char **body);   /* GET /v1/status */
int smartt_counters_json(smartt_session *s, char **body); /* GET /v1/counters */

#ifdef __cplusplus
}
#endif
#endif
