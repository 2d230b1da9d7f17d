/* The smartt libfabric provider's internals: one RDM endpoint is one libsmartt
 * session; everything a domain owns is serialized by the domain's lock. */
#ifndef SFI_H
#define SFI_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>

#include "smartt.h"

#define SFI_NAME "smartt"
#define SFI_VERSION FI_VERSION(1, 0)
#define SFI_API FI_VERSION(1, 17)
#define SFI_ADDRLEN 24          /* address 16, port 2, zero 2, endpoint 4 (big-endian) */
#define SFI_HDR 16              /* the envelope in front of every message */
#define SFI_MAGIC 0xf1
#define SFI_IOV_MAX 8
#define SFI_INJECT 4096
#define SFI_BORROW_MIN (64u << 10) /* sends from this size go over a pair uncopied */
#define SFI_PLACE_MIN (32u << 10)  /* pair messages from this size go straight into receives */
#define SFI_SEGHDR 40           /* a segment's envelope: SFI_HDR, id, total, offset */
#define SFI_MAX_MSG (1ull << 40) /* larger than a segment: sent as several (seg.c) */
#define SFI_SEG_DEFAULT ((1u << 30) - SFI_SEGHDR) /* api.max_message's default, less the envelope */
#define SFI_SEG_INFLIGHT 2      /* segments of one message handed to the daemon at once */
#define SFI_MFD_MAX 8           /* memfds an endpoint keeps for large sends */
#define SFI_MFD_BYTES (256u << 20)
#define SFI_QSIZE 4096
#define SFI_CQ_DATA 4
#define SFI_MAX_EPS 64          /* endpoints bound to one CQ or counter */

#define SFI_CAPS (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | \
                  FI_MULTI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM)

/* envelope flags */
#define SFI_F_TAGGED 1u
#define SFI_F_DATA 2u
#define SFI_F_SEG 4u   /* a segment: the envelope is SFI_SEGHDR bytes */
#define SFI_F_ABORT 8u /* with SFI_F_SEG: the sender gave the message up */

extern struct fi_provider sfi_prov;

/* A doubly linked FIFO. */
typedef struct sfi_node {
    struct sfi_node *next, *prev;
} sfi_node;
typedef struct sfi_list {
    sfi_node *head, *tail;
    size_t n;
} sfi_list;
void sfi_list_push(sfi_list *l, sfi_node *x);
void sfi_list_remove(sfi_list *l, sfi_node *x);

typedef struct sfi_fabric {
    struct fid_fabric f;
} sfi_fabric;

struct sfi_ep;

typedef struct sfi_domain {
    struct fid_domain d;
    pthread_mutex_t lock;
    int refs;
    uint64_t next_key;
    struct fi_info *info;
} sfi_domain;

typedef struct sfi_av {
    struct fid_av av;
    sfi_domain *dom;
    int refs;
    int type;
    unsigned char (*tab)[SFI_ADDRLEN];
    unsigned char *valid;
    size_t n, cap;
    uint32_t *hash; /* open addressing: index + 1 of each entry ever inserted; 0 empty */
    size_t hcap;    /* a power of two, at least twice n */
} sfi_av;

/* A completion as every format needs it. */
typedef struct sfi_comp {
    struct fi_cq_tagged_entry e;
    fi_addr_t src;
} sfi_comp;

typedef struct sfi_cqerr {
    sfi_node node;
    struct fi_cq_err_entry e;
} sfi_cqerr;

typedef struct sfi_cq {
    struct fid_cq cq;
    sfi_domain *dom;
    int refs;
    int format;
    int wait_obj;
    sfi_comp *ring;
    size_t cap, head, n;
    sfi_list errs;
    struct sfi_ep *eps[SFI_MAX_EPS];
    int neps;
    int epfd, sigfd;
    char errtext[200];
    /* reads that find nothing: after idle_spin in a row, yield the core (idle_us 0) or
     * wait up to idle_us for the sockets, so busy-polling ranks leave the daemons CPU */
    unsigned idle, idle_spin;
    long idle_us;
} sfi_cq;

typedef struct sfi_cntr {
    struct fid_cntr c;
    sfi_domain *dom;
    int refs;
    uint64_t val, err;
    struct sfi_ep *eps[SFI_MAX_EPS];
    int neps;
} sfi_cntr;

typedef struct sfi_eqev {
    sfi_node node;
    uint32_t event;
    int err;
    size_t len;
    unsigned char buf[];
} sfi_eqev;

typedef struct sfi_eq {
    struct fid_eq eq;
    pthread_mutex_t lock;
    sfi_list evs;
    int sigfd;
} sfi_eq;

typedef struct sfi_mr {
    struct fid_mr mr;
    sfi_domain *dom;
} sfi_mr;

/* A posted receive. */
typedef struct sfi_rx {
    sfi_node node;
    void *ctx;
    uint64_t flags; /* FI_TAGGED, FI_MULTI_RECV, FI_COMPLETION */
    uint64_t tag, ignore;
    fi_addr_t src;
    struct iovec iov[SFI_IOV_MAX];
    size_t niov, cap, used;
    uint64_t seq; /* post order: a placement given back goes back in its place */
} sfi_rx;

/* An unexpected message: the libsmartt event is held until it is matched (a ring
 * message is copied out at once, so the ring never waits for the application). */
typedef struct sfi_ux {
    sfi_node node;
    smartt_event ev;
    uint64_t tag;
    uint32_t data;
    unsigned flags;
    int claimed;
    const unsigned char *payload;
    size_t len;
    unsigned char *copy; /* the copied-out payload of a ring message (ev released) */
    /* segments (SFI_F_SEG): a head (off 0) matches, later ones (cont) never do */
    uint32_t id;
    uint64_t total, off;
} sfi_ux;

/* A segmented message being received into a posted receive (rx: a copy of it). */
typedef struct sfi_asm {
    sfi_node node;
    unsigned char from[SFI_ADDRLEN];
    uint32_t id;
    int has_rx, failed;
    sfi_rx rx;
    uint64_t got, total, fl, tag, data;
    fi_addr_t src;
    long long last_ms; /* when its last segment came */
} sfi_asm;

/* A message larger than a segment being sent: its segments are outstanding sfi_tx
 * entries (parent set) sent SFI_SEG_INFLIGHT at a time from the caller's buffers. */
typedef struct sfi_seg {
    sfi_node node;
    void *ctx;
    uint64_t flags, tag, data;
    int comp, delivery, reported, failed;
    struct iovec iov[SFI_IOV_MAX];
    size_t niov;
    uint64_t total, off;
    int kids;                /* segments not ended yet */
    uint64_t nsent, acked;   /* segments handed over, and completed at the level asked */
    uint32_t id;
    smartt_addr to;
} sfi_seg;

/* A memfd for sends of at least sendfd_min bytes, busy until its message's outcome. */
typedef struct sfi_mfd {
    smartt_memfd m;
    uint32_t stag; /* 0: idle */
} sfi_mfd;

/* An outstanding send. */
typedef struct sfi_tx {
    sfi_node node;
    uint32_t stag;
    void *ctx;
    uint64_t flags;
    uint64_t tag;
    size_t len;
    int comp, delivery, reported;
    int cancelling, accepted; /* a Cancel is out: an Accepted waits for its answer */
    sfi_mfd *mfd;             /* sent from this memfd */
    size_t wire;              /* bytes at mfd->m.data (a refused memfd is streamed) */
    smartt_addr to;
    sfi_seg *parent;          /* a segment of parent */
    int borrowed;             /* libsmartt writes from the caller's buffers until SENT */
    unsigned char hdr[SFI_HDR]; /* the envelope of a borrowed send */
} sfi_tx;

typedef struct sfi_ep {
    struct fid_ep ep;
    sfi_domain *dom;
    sfi_av *av;
    sfi_cq *tx_cq, *rx_cq;
    int tx_sel, rx_sel;
    sfi_cntr *send_cntr, *recv_cntr;
    smartt_session *s;
    int enabled;
    int broken; /* a libsmartt error: the session is gone */
    unsigned char name[SFI_ADDRLEN];
    uint64_t caps, tx_op_flags, rx_op_flags;
    size_t min_multi_recv;
    int delivery_all; /* SMARTT_FI_DELIVERY=1: every send completes at Sent */
    sfi_list rx_msg, rx_tag;
    uint64_t rx_seq;
    sfi_list placing; /* posted receives a pair message is being read into (sfi_place) */
    sfi_list ux_msg, ux_tag;
    size_t ux_bytes, ux_limit_n, ux_limit_bytes;
    sfi_list tx;
    unsigned char *scratch;
    size_t scratch_cap;
    uint64_t late_failures, bad_msgs;
    /* the receive ring (set up when the first message of ring_min bytes arrives) */
    int ring_state; /* 0 idle, 1 requested, 2 on, 3 off */
    uint32_t ring_tag;
    size_t ring_size, ring_min;
    /* large sends through memfds */
    sfi_mfd mfd[SFI_MFD_MAX];
    size_t sendfd_min;
    /* segmentation */
    size_t seg_max;
    uint32_t seg_next;
    long long seg_timeout_ms; /* a segmented receive that hears nothing this long fails */
    sfi_list segs, asms;
} sfi_ep;

/* prov.c */
int sfi_err(int smartt_code);
int sfi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fab, void *ctx);
int sfi_eq_open(struct fid_fabric *fab, struct fi_eq_attr *attr, struct fid_eq **eq, void *ctx);
/* av.c */
int sfi_av_open(struct fid_domain *d, struct fi_av_attr *attr, struct fid_av **av, void *ctx);
const unsigned char *sfi_av_get(sfi_av *av, fi_addr_t a);
fi_addr_t sfi_av_find(sfi_av *av, const unsigned char name[SFI_ADDRLEN]);
void sfi_name_from(unsigned char name[SFI_ADDRLEN], const smartt_addr *a);
void sfi_name_to(smartt_addr *a, const unsigned char name[SFI_ADDRLEN]);
int sfi_parse_name(unsigned char name[SFI_ADDRLEN], const char *node, const char *service);
int sfi_local_name(unsigned char name[SFI_ADDRLEN], uint32_t ep);
/* cq.c */
int sfi_cq_open(struct fid_domain *d, struct fi_cq_attr *attr, struct fid_cq **cq, void *ctx);
int sfi_cntr_open(struct fid_domain *d, struct fi_cntr_attr *attr, struct fid_cntr **c, void *ctx);
void sfi_cq_push(sfi_cq *cq, void *ctx, uint64_t flags, size_t len, void *buf, uint64_t data,
                 uint64_t tag, fi_addr_t src);
void sfi_cq_push_err(sfi_cq *cq, void *ctx, uint64_t flags, int err, int prov_errno, size_t len,
                     size_t olen, uint64_t tag, uint64_t data, const char *text);
int sfi_cq_add_ep(sfi_cq *cq, sfi_ep *ep);
void sfi_cq_del_ep(sfi_cq *cq, sfi_ep *ep);
int sfi_cntr_add_ep(sfi_cntr *c, sfi_ep *ep);
void sfi_cntr_del_ep(sfi_cntr *c, sfi_ep *ep);
/* ep.c */
int sfi_ep_open(struct fid_domain *d, struct fi_info *info, struct fid_ep **ep, void *ctx);
void sfi_ep_progress(sfi_ep *ep);
size_t sfi_copy_in(const sfi_rx *rx, size_t off, const unsigned char *p, size_t len);
void sfi_rx_report(sfi_ep *ep, sfi_rx *rx, uint64_t flags, size_t len, void *buf, uint64_t data,
                   uint64_t tag, fi_addr_t src, int always);
void sfi_rx_report_err(sfi_ep *ep, void *ctx, uint64_t flags, int err, size_t len, size_t olen,
                       uint64_t tag, uint64_t data);
void sfi_tx_report(sfi_ep *ep, sfi_tx *tx, int err, int prov, const char *text);
/* sfi_tx_sent_wanted asks for tx's Sent frame at once where the provider waits for it
 * (delivery completion, a memfd to reuse); other Sent frames may ride with later ones. */
void sfi_tx_sent_wanted(sfi_ep *ep, const sfi_tx *tx);
void sfi_ux_free(sfi_ep *ep, sfi_list *l, sfi_ux *u);
void sfi_pack_hdr(unsigned char *h, uint64_t flags, uint64_t tag, uint64_t data);
int sfi_send_buf(sfi_ep *ep, const smartt_addr *to, const unsigned char *hdr, size_t hlen,
                 const struct iovec *iov, size_t niov, uint64_t off, size_t len, sfi_tx *tx);
void sfi_ep_break(sfi_ep *ep, int code);
/* seg.c */
ssize_t sfi_seg_send(sfi_ep *ep, const struct iovec *iov, size_t niov, const smartt_addr *to,
                     uint64_t tag, uint64_t data, uint64_t flags, void *ctx, int comp, int delivery);
void sfi_seg_pump(sfi_ep *ep);
void sfi_seg_child(sfi_ep *ep, sfi_tx *tx, int err, int prov, const char *text);
void sfi_seg_child_free(sfi_ep *ep, sfi_tx *tx);
void sfi_seg_break(sfi_ep *ep, int code);
int sfi_seg_parse(sfi_ux *u, const unsigned char *d, size_t size);
int sfi_seg_on_message(sfi_ep *ep, sfi_ux *m, sfi_list *ux);
int sfi_seg_deliver(sfi_ep *ep, sfi_rx *rx, sfi_ux *u, sfi_list *ux);
void sfi_seg_free_all(sfi_ep *ep);
void sfi_seg_expire(sfi_ep *ep);
/* stubs.c */
extern struct fi_ops_rma sfi_rma_ops;
extern struct fi_ops_atomic sfi_atomic_ops;
extern struct fi_ops_collective sfi_coll_ops;
extern struct fi_ops_cm sfi_cm_ops;
int sfi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *ctx);
int sfi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int sfi_no_control(struct fid *fid, int command, void *arg);

#endif
