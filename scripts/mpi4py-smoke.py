"""mpi4py smoke for scripts/mpi-suites and scripts/test-mpi-suites-smoke: an all-reduce of
1 MiB of float64 (checked against the closed form), an all-to-all with a distinct value per
pair, a ring of 64 KiB messages checked byte for byte, and a barrier. Each rank prints
"mpi4py smoke: ok" only if every check held; any mismatch raises (and aborts the job)."""
import sys

from mpi4py import MPI


def main():
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    n = 1 << 17  # 1 MiB of float64
    # All-reduce without numpy: a float64 buffer through the buffer protocol.
    import array
    send = array.array("d", [float(rank + i % 7) for i in range(n)])
    recv = array.array("d", bytes(8 * n))
    comm.Allreduce([send, MPI.DOUBLE], [recv, MPI.DOUBLE], op=MPI.SUM)
    base = size * (size - 1) / 2
    for i in range(0, n, 997):
        want = base + size * (i % 7)
        if recv[i] != want:
            raise SystemExit("rank %d: allreduce[%d] = %r, want %r" % (rank, i, recv[i], want))
    # All-to-all of Python objects: rank r sends (r, d) to rank d.
    got = comm.alltoall([(rank, d) for d in range(size)])
    if got != [(s, rank) for s in range(size)]:
        raise SystemExit("rank %d: alltoall got %r" % (rank, got))
    # Ring: 64 KiB with a rank-dependent pattern to the right neighbour.
    right, left = (rank + 1) % size, (rank - 1) % size
    msg = bytes((rank * 31 + i) & 0xFF for i in range(65536))
    buf = bytearray(65536)
    comm.Sendrecv([msg, MPI.BYTE], dest=right, recvbuf=[buf, MPI.BYTE], source=left)
    if bytes(buf) != bytes((left * 31 + i) & 0xFF for i in range(65536)):
        raise SystemExit("rank %d: ring payload corrupt" % rank)
    comm.Barrier()
    print("mpi4py smoke: ok (rank %d of %d)" % (rank, size))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
