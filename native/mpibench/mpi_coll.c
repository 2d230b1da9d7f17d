/* mpi_coll: times MPI_Alltoall and MPI_Allreduce over the ranks of one job and checks
 * every result. Used by the testbed's MPI fabric runs (smartt-lab testbed mpi,
 * docs/results/mpi.md); prints, from rank 0:
 *   mpi_coll: ready N ranks              after one untimed round at every size
 *   mpi_coll: OP BYTES ITERS SECONDS     per size, the slowest rank's time
 *   mpi_coll: ok | mpi_coll: FAILED ...
 * Usage: mpi_coll alltoall|allreduce ITERS SIZE...  (SIZE: bytes per rank pair for
 * alltoall, per rank for allreduce; a multiple of 8, at most 64 MiB). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 8
#define MAX_BYTES (64L << 20)

static int rank, nranks;

/* The value rank src puts at element k of its block for rank dst in iteration it. */
static int64_t a2a_val(int src, int dst, long k, int it) {
  return ((int64_t)src << 40) ^ ((int64_t)dst << 32) ^ ((int64_t)it << 24) ^ k;
}

/* One all-to-all of n int64 per pair; returns the number of wrong elements. */
static long alltoall(int64_t *sb, int64_t *rb, long n, int it) {
  for (int d = 0; d < nranks; d++)
    for (long k = 0; k < n; k++) sb[d * n + k] = a2a_val(rank, d, k, it);
  memset(rb, 0, (size_t)(n * nranks) * sizeof *rb);
  MPI_Alltoall(sb, (int)n, MPI_INT64_T, rb, (int)n, MPI_INT64_T, MPI_COMM_WORLD);
  long bad = 0;
  for (int s = 0; s < nranks; s++)
    for (long k = 0; k < n; k++) bad += rb[s * n + k] != a2a_val(s, rank, k, it);
  return bad;
}

/* One sum all-reduce of n int64; returns the number of wrong elements. */
static long allreduce(int64_t *sb, int64_t *rb, long n, int it) {
  for (long k = 0; k < n; k++) sb[k] = (int64_t)(rank + 1) * (k + it + 1);
  MPI_Allreduce(sb, rb, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  int64_t ranks = (int64_t)nranks * (nranks + 1) / 2;
  long bad = 0;
  for (long k = 0; k < n; k++) bad += rb[k] != ranks * (k + it + 1);
  return bad;
}

typedef long (*op_fn)(int64_t *, int64_t *, long, int);

/* Runs iters rounds of op at size bytes; rank 0 prints the slowest rank's time. */
static long timed(const char *name, op_fn op, int64_t *sb, int64_t *rb, long size, int iters) {
  long bad = 0, n = size / 8;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int it = 0; it < iters; it++) bad += op(sb, rb, n, it + 1);
  double dt = MPI_Wtime() - t0, worst;
  MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("mpi_coll: %s %ld %d %.6f\n", name, size, iters, worst);
    fflush(stdout);
  }
  return bad;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const char *name = argc > 1 ? argv[1] : "";
  op_fn op = strcmp(name, "alltoall") == 0 ? alltoall : strcmp(name, "allreduce") == 0 ? allreduce : NULL;
  int iters = argc > 2 ? atoi(argv[2]) : 0, nsizes = argc - 3;
  long sizes[MAX_SIZES], maxsz = 0;
  if (op == NULL || iters < 1 || iters > 1000 || nsizes < 1 || nsizes > MAX_SIZES) {
    if (rank == 0)
      fprintf(stderr, "usage: mpi_coll alltoall|allreduce ITERS(1..1000) SIZE... (1..%d sizes)\n", MAX_SIZES);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (int i = 0; i < nsizes; i++) {
    sizes[i] = atol(argv[i + 3]);
    if (sizes[i] < 8 || sizes[i] % 8 != 0 || sizes[i] > MAX_BYTES) {
      if (rank == 0) fprintf(stderr, "mpi_coll: size %s: want a multiple of 8 in 8..%ld\n", argv[i + 3], MAX_BYTES);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (sizes[i] > maxsz) maxsz = sizes[i];
  }
  size_t cap = (size_t)maxsz * (size_t)nranks;
  int64_t *sb = malloc(cap), *rb = malloc(cap);
  if (sb == NULL || rb == NULL) MPI_Abort(MPI_COMM_WORLD, 3);
  long bad = 0;
  for (int i = 0; i < nsizes; i++) bad += op(sb, rb, sizes[i] / 8, 0); /* untimed: connections up */
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    printf("mpi_coll: ready %d ranks\n", nranks);
    fflush(stdout);
  }
  for (int i = 0; i < nsizes; i++) bad += timed(name, op, sb, rb, sizes[i], iters);
  long total = 0;
  MPI_Reduce(&bad, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    if (total == 0) printf("mpi_coll: ok\n");
    else printf("mpi_coll: FAILED %ld wrong elements\n", total);
    fflush(stdout);
  }
  free(sb);
  free(rb);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
