/* mpi_pingpong: rank 0 and 1 exchange messages of 1 B .. 4 MiB (and Probe/Mprobe,
 * Iprobe, Cancel of a receive), checking every byte. Prints "mpi_pingpong: ok". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fill(unsigned char *p, int n, int seed)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31 + seed);
}

static int check(const unsigned char *p, int n, int seed)
{
    for (int i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 31 + seed))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (!rank)
            fprintf(stderr, "mpi_pingpong: needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    int max = 4 << 20, peer = 1 - rank;
    unsigned char *b = malloc((size_t)max);
    double t0 = MPI_Wtime();
    for (int n = 1; n <= max; n *= 4) {
        int iters = n < 65536 ? 100 : 10;
        for (int it = 0; it < iters; it++) {
            if (rank == 0) {
                fill(b, n, it);
                MPI_Send(b, n, MPI_BYTE, peer, n % 32768, MPI_COMM_WORLD);
                memset(b, 0, (size_t)n);
                MPI_Recv(b, n, MPI_BYTE, peer, n % 32768, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                bad += !check(b, n, it + 1);
            } else {
                MPI_Recv(b, n, MPI_BYTE, peer, n % 32768, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                bad += !check(b, n, it);
                fill(b, n, it + 1);
                MPI_Send(b, n, MPI_BYTE, peer, n % 32768, MPI_COMM_WORLD);
            }
        }
    }
    double t1 = MPI_Wtime();
    /* Probe and Mprobe (FI_PEEK, FI_CLAIM), any-source and any-tag. */
    if (rank == 0) {
        int v = 42, w = 43;
        MPI_Send(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
        MPI_Send(&w, 1, MPI_INT, 1, 8, MPI_COMM_WORLD);
    } else {
        MPI_Status st;
        MPI_Message m;
        int v = 0, w = 0, cnt = 0, flag = 0;
        MPI_Probe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT, &cnt);
        bad += cnt != 1 || st.MPI_SOURCE != 0;
        MPI_Recv(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Mprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st);
        MPI_Mrecv(&w, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
        bad += v != 42 || w != 43 || st.MPI_TAG != 8;
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, &st);
        bad += flag != 0;
        MPI_Request rq;
        int x;
        MPI_Irecv(&x, 1, MPI_INT, 0, 1234, MPI_COMM_WORLD, &rq);
        MPI_Cancel(&rq);
        MPI_Wait(&rq, &st);
        MPI_Test_cancelled(&st, &flag);
        bad += flag != 1;
    }
    int all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi_pingpong: %s (%d bad, ping-pong %.2f s)\n", all ? "FAILED" : "ok", all, t1 - t0);
    free(b);
    MPI_Finalize();
    return all != 0;
}
