/* Open MPI peer of `make bench-dist` (benchmarks/collectives.cpp compiles it with mpicc and
 * runs it with mpirun; not part of the library). Times, for float32 messages, MPI_Allreduce
 * (all_sum, separate send/receive buffers), MPI_Allgather (all_gather),
 * MPI_Reduce_scatter_block (sum_scatter) and an MPI_Send/MPI_Recv ping-pong between rank pairs
 * (2k, 2k+1) (sendrecv).
 *
 *   mpirun -np N mpi_collectives --out PREFIX [--ops a,b] [--max-bytes N] [--target-ms T]
 *       [--max-iters M] [--inplace 0|1]
 *
 * Writes PREFIX.<rank>: one line per (op, size): `op nominal_bytes total_bytes iters seconds`,
 * seconds = this rank's time per op (the driver takes the maximum over ranks). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int has_op(const char* ops, const char* op) {
  size_t len = strlen(op);
  const char* p = ops;
  while ((p = strstr(p, op)) != NULL) {
    int starts = p == ops || p[-1] == ',';
    int ends = p[len] == '\0' || p[len] == ',';
    if (starts && ends) return 1;
    p += len;
  }
  return 0;
}

static int rank, n;
static float *in, *out;
static int inplace = 0; /* --inplace 1: all_sum is MPI_Allreduce(MPI_IN_PLACE, in, ...) */

static void run_once(int op, size_t bytes, size_t block) {
  switch (op) {
    case 0:
      MPI_Allreduce(inplace ? MPI_IN_PLACE : in, inplace ? in : out, (int)(bytes / 4), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
      break;
    case 1:
      MPI_Allgather(in, (int)(block / 4), MPI_FLOAT, out, (int)(block / 4), MPI_FLOAT,
                    MPI_COMM_WORLD);
      break;
    case 2:
      MPI_Reduce_scatter_block(in, out, (int)(block / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    default: {
      int peer = rank ^ 1;
      if (peer >= n) break;
      if (rank % 2 == 0) {
        MPI_Send(in, (int)(bytes / 4), MPI_FLOAT, peer, 7, MPI_COMM_WORLD);
        MPI_Recv(out, (int)(bytes / 4), MPI_FLOAT, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(out, (int)(bytes / 4), MPI_FLOAT, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(in, (int)(bytes / 4), MPI_FLOAT, peer, 7, MPI_COMM_WORLD);
      }
    }
  }
}

int main(int argc, char** argv) {
  const char* outp = NULL;
  const char* ops = "all_sum,all_gather,sum_scatter,sendrecv";
  size_t max_bytes = (size_t)256 << 20;
  double target_s = 0.03;
  int max_iters = 1000;
  static const char* names[] = {"all_sum", "all_gather", "sum_scatter", "sendrecv"};

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--out")) outp = argv[i + 1];
    else if (!strcmp(argv[i], "--ops")) ops = argv[i + 1];
    else if (!strcmp(argv[i], "--max-bytes")) max_bytes = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--target-ms")) target_s = atof(argv[i + 1]) / 1e3;
    else if (!strcmp(argv[i], "--max-iters")) max_iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--inplace")) inplace = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "mpi_collectives: unknown option %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (!outp) {
    fprintf(stderr, "mpi_collectives: --out is required\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  /* Plain malloc, filled outside the timing; run under GLIBC_TUNABLES=glibc.malloc.hugetlb=1
   * (BENCHMARKING.md), so large blocks, including MPI's own temporaries, get huge pages. */
  in = malloc(max_bytes);
  out = malloc(max_bytes);
  if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < max_bytes / 4; ++i) {
    in[i] = 1.0f;
    out[i] = 0.0f;
  }
  char path[4096];
  snprintf(path, sizeof(path), "%s.%d", outp, rank);
  FILE* f = fopen(path, "w");
  if (!f) {
    perror("mpi_collectives: open output");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  for (int op = 0; op < 4; ++op) {
    if (!has_op(ops, names[op])) continue;
    for (size_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
      size_t block = bytes / (size_t)n / 4 * 4;
      if (block < 4) block = 4;
      size_t total = (op == 1 || op == 2) ? block * (size_t)n : bytes;
      /* all_gather / sum_scatter: `bytes` is the full buffer; skip uneven splits. */
      if (total != bytes || total > max_bytes) continue;
      run_once(op, bytes, block); /* warm-up */
      int iters = 1;
      if (bytes < ((size_t)4 << 20)) {
        /* Batch size from the fastest of three timed ops, slowest rank. */
        double best = 1e30, t;
        for (int k = 0; k < 3; ++k) {
          MPI_Barrier(MPI_COMM_WORLD);
          double t0 = now();
          run_once(op, bytes, block);
          t = now() - t0;
          if (t < best) best = t;
        }
        MPI_Allreduce(&best, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double want = (double)(((size_t)4 << 20) / bytes);
        double by_time = target_s / (t > 1e-7 ? t : 1e-7);
        if (by_time < want) want = by_time;
        if (want > max_iters) want = max_iters;
        iters = want < 1 ? 1 : (int)want;
      }
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      for (int i = 0; i < iters; ++i) run_once(op, bytes, block);
      double per_op = (now() - t0) / iters;
      if (op == 3) per_op /= 2; /* a round trip carries the message twice */
      fprintf(f, "%s %zu %zu %d %.9e\n", names[op], bytes, total, iters, per_op);
      fflush(f);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  fclose(f);
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
