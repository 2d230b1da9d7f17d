/* What the smartt provider does not do (RMA, atomics, collectives, connections):
 * every such call answers -FI_ENOSYS instead of reaching a NULL pointer. */
#include "sfi.h"

#define U(x) (void)(x)

int sfi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *ctx)
{
    U(fid), U(name), U(flags), U(ops), U(ctx);
    return -FI_ENOSYS;
}

int sfi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    U(fid), U(bfid), U(flags);
    return -FI_ENOSYS;
}

int sfi_no_control(struct fid *fid, int command, void *arg)
{
    U(fid), U(command), U(arg);
    return -FI_ENOSYS;
}

/* ---- RMA ---- */
static ssize_t r_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                      uint64_t addr, uint64_t key, void *ctx)
{ U(ep), U(buf), U(len), U(desc), U(src), U(addr), U(key), U(ctx); return -FI_ENOSYS; }
static ssize_t r_readv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t src, uint64_t addr, uint64_t key, void *ctx)
{ U(ep), U(iov), U(desc), U(count), U(src), U(addr), U(key), U(ctx); return -FI_ENOSYS; }
static ssize_t r_msg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{ U(ep), U(msg), U(flags); return -FI_ENOSYS; }
static ssize_t r_write(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dst,
                       uint64_t addr, uint64_t key, void *ctx)
{ U(ep), U(buf), U(len), U(desc), U(dst), U(addr), U(key), U(ctx); return -FI_ENOSYS; }
static ssize_t r_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dst,
                        uint64_t addr, uint64_t key)
{ U(ep), U(buf), U(len), U(dst), U(addr), U(key); return -FI_ENOSYS; }
static ssize_t r_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                           uint64_t data, fi_addr_t dst, uint64_t addr, uint64_t key, void *ctx)
{ U(ep), U(buf), U(len), U(desc), U(data), U(dst), U(addr), U(key), U(ctx); return -FI_ENOSYS; }
static ssize_t r_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
                            fi_addr_t dst, uint64_t addr, uint64_t key)
{ U(ep), U(buf), U(len), U(data), U(dst), U(addr), U(key); return -FI_ENOSYS; }

struct fi_ops_rma sfi_rma_ops = {
    .size = sizeof(struct fi_ops_rma), .read = r_read, .readv = r_readv, .readmsg = r_msg,
    .write = r_write, .writev = r_readv, .writemsg = r_msg, .inject = r_inject,
    .writedata = r_writedata, .injectdata = r_injectdata,
};

/* ---- atomics ---- */
typedef enum fi_datatype DT;
typedef enum fi_op OP;
typedef const struct fi_ioc CIOC;
typedef const struct fi_msg_atomic AMSG;
static ssize_t a_write(struct fid_ep *ep, const void *buf, size_t count, void *desc, fi_addr_t d,
                       uint64_t addr, uint64_t key, DT dt, OP op, void *ctx)
{ U(ep), U(buf), U(count), U(desc), U(d), U(addr), U(key), U(dt), U(op), U(ctx); return -FI_ENOSYS; }
static ssize_t a_writev(struct fid_ep *ep, CIOC *iov, void **desc, size_t count, fi_addr_t d,
                        uint64_t addr, uint64_t key, DT dt, OP op, void *ctx)
{ U(ep), U(iov), U(desc), U(count), U(d), U(addr), U(key), U(dt), U(op), U(ctx); return -FI_ENOSYS; }
static ssize_t a_writemsg(struct fid_ep *ep, AMSG *msg, uint64_t flags)
{ U(ep), U(msg), U(flags); return -FI_ENOSYS; }
static ssize_t a_inject(struct fid_ep *ep, const void *buf, size_t count, fi_addr_t d,
                        uint64_t addr, uint64_t key, DT dt, OP op)
{ U(ep), U(buf), U(count), U(d), U(addr), U(key), U(dt), U(op); return -FI_ENOSYS; }
static ssize_t a_rw(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *res,
                    void *rdesc, fi_addr_t d, uint64_t addr, uint64_t key, DT dt, OP op, void *ctx)
{ U(ep), U(buf), U(count), U(desc), U(res), U(rdesc), U(d), U(addr), U(key), U(dt), U(op), U(ctx); return -FI_ENOSYS; }
static ssize_t a_rwv(struct fid_ep *ep, CIOC *iov, void **desc, size_t count, struct fi_ioc *rv,
                     void **rdesc, size_t rc, fi_addr_t d, uint64_t addr, uint64_t key, DT dt,
                     OP op, void *ctx)
{ U(ep), U(iov), U(desc), U(count), U(rv), U(rdesc), U(rc), U(d), U(addr), U(key), U(dt), U(op), U(ctx); return -FI_ENOSYS; }
static ssize_t a_rwmsg(struct fid_ep *ep, AMSG *msg, struct fi_ioc *rv, void **rdesc, size_t rc,
                       uint64_t flags)
{ U(ep), U(msg), U(rv), U(rdesc), U(rc), U(flags); return -FI_ENOSYS; }
static ssize_t a_cw(struct fid_ep *ep, const void *buf, size_t count, void *desc, const void *cmp,
                    void *cdesc, void *res, void *rdesc, fi_addr_t d, uint64_t addr, uint64_t key,
                    DT dt, OP op, void *ctx)
{ U(ep), U(buf), U(count), U(desc), U(cmp), U(cdesc), U(res), U(rdesc), U(d), U(addr), U(key), U(dt), U(op), U(ctx); return -FI_ENOSYS; }
static ssize_t a_cwv(struct fid_ep *ep, CIOC *iov, void **desc, size_t count, CIOC *cv,
                     void **cdesc, size_t cc, struct fi_ioc *rv, void **rdesc, size_t rc,
                     fi_addr_t d, uint64_t addr, uint64_t key, DT dt, OP op, void *ctx)
{ U(ep), U(iov), U(desc), U(count), U(cv), U(cdesc), U(cc), U(rv), U(rdesc), U(rc), U(d), U(addr), U(key), U(dt), U(op), U(ctx); return -FI_ENOSYS; }
static ssize_t a_cwmsg(struct fid_ep *ep, AMSG *msg, CIOC *cv, void **cdesc, size_t cc,
                       struct fi_ioc *rv, void **rdesc, size_t rc, uint64_t flags)
{ U(ep), U(msg), U(cv), U(cdesc), U(cc), U(rv), U(rdesc), U(rc), U(flags); return -FI_ENOSYS; }
static int a_valid(struct fid_ep *ep, DT dt, OP op, size_t *count)
{ U(ep), U(dt), U(op), U(count); return -FI_EOPNOTSUPP; }

struct fi_ops_atomic sfi_atomic_ops = {
    .size = sizeof(struct fi_ops_atomic), .write = a_write, .writev = a_writev,
    .writemsg = a_writemsg, .inject = a_inject, .readwrite = a_rw, .readwritev = a_rwv,
    .readwritemsg = a_rwmsg, .compwrite = a_cw, .compwritev = a_cwv, .compwritemsg = a_cwmsg,
    .writevalid = a_valid, .readwritevalid = a_valid, .compwritevalid = a_valid,
};

/* ---- collectives ---- */
static ssize_t c_barrier(struct fid_ep *ep, fi_addr_t a, void *ctx)
{ U(ep), U(a), U(ctx); return -FI_ENOSYS; }
static ssize_t c_bcast(struct fid_ep *ep, void *buf, size_t count, void *desc, fi_addr_t a,
                       fi_addr_t root, DT dt, uint64_t flags, void *ctx)
{ U(ep), U(buf), U(count), U(desc), U(a), U(root), U(dt), U(flags), U(ctx); return -FI_ENOSYS; }
static ssize_t c_a2a(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *res,
                     void *rdesc, fi_addr_t a, DT dt, uint64_t flags, void *ctx)
{ U(ep), U(buf), U(count), U(desc), U(res), U(rdesc), U(a), U(dt), U(flags), U(ctx); return -FI_ENOSYS; }
static ssize_t c_ared(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *res,
                      void *rdesc, fi_addr_t a, DT dt, OP op, uint64_t flags, void *ctx)
{ U(ep), U(buf), U(count), U(desc), U(res), U(rdesc), U(a), U(dt), U(op), U(flags), U(ctx); return -FI_ENOSYS; }
static ssize_t c_red(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *res,
                     void *rdesc, fi_addr_t a, fi_addr_t root, DT dt, OP op, uint64_t flags, void *ctx)
{ U(ep), U(buf), U(count), U(desc), U(res), U(rdesc), U(a), U(root), U(dt), U(op), U(flags), U(ctx); return -FI_ENOSYS; }
static ssize_t c_scat(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *res,
                      void *rdesc, fi_addr_t a, fi_addr_t root, DT dt, uint64_t flags, void *ctx)
{ U(ep), U(buf), U(count), U(desc), U(res), U(rdesc), U(a), U(root), U(dt), U(flags), U(ctx); return -FI_ENOSYS; }
static ssize_t c_msg(struct fid_ep *ep, const struct fi_msg_collective *msg, struct fi_ioc *rv,
                     void **rdesc, size_t rc, uint64_t flags)
{ U(ep), U(msg), U(rv), U(rdesc), U(rc), U(flags); return -FI_ENOSYS; }
static ssize_t c_barrier2(struct fid_ep *ep, fi_addr_t a, uint64_t flags, void *ctx)
{ U(ep), U(a), U(flags), U(ctx); return -FI_ENOSYS; }

struct fi_ops_collective sfi_coll_ops = {
    .size = sizeof(struct fi_ops_collective), .barrier = c_barrier, .broadcast = c_bcast,
    .alltoall = c_a2a, .allreduce = c_ared, .allgather = c_a2a, .reduce_scatter = c_ared,
    .reduce = c_red, .scatter = c_scat, .gather = c_scat, .msg = c_msg, .barrier2 = c_barrier2,
};

/* ---- connection management (RDM: names only) ---- */
static int cm_setname(fid_t fid, void *addr, size_t len)
{ U(fid), U(addr), U(len); return -FI_ENOSYS; }
static int cm_getpeer(struct fid_ep *ep, void *addr, size_t *len)
{ U(ep), U(addr), U(len); return -FI_ENOSYS; }
static int cm_connect(struct fid_ep *ep, const void *addr, const void *p, size_t len)
{ U(ep), U(addr), U(p), U(len); return -FI_ENOSYS; }
static int cm_listen(struct fid_pep *pep)
{ U(pep); return -FI_ENOSYS; }
static int cm_accept(struct fid_ep *ep, const void *p, size_t len)
{ U(ep), U(p), U(len); return -FI_ENOSYS; }
static int cm_reject(struct fid_pep *pep, fid_t h, const void *p, size_t len)
{ U(pep), U(h), U(p), U(len); return -FI_ENOSYS; }
static int cm_shutdown(struct fid_ep *ep, uint64_t flags)
{ U(ep), U(flags); return -FI_ENOSYS; }
static int cm_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc, void *ctx)
{ U(ep), U(addr), U(flags), U(mc), U(ctx); return -FI_ENOSYS; }

int sfi_getname(fid_t fid, void *addr, size_t *len);

struct fi_ops_cm sfi_cm_ops = {
    .size = sizeof(struct fi_ops_cm), .setname = cm_setname, .getname = sfi_getname,
    .getpeer = cm_getpeer, .connect = cm_connect, .listen = cm_listen, .accept = cm_accept,
    .reject = cm_reject, .shutdown = cm_shutdown, .join = cm_join,
};
