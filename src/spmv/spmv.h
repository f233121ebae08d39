/* spmv: the pieces of Chow & Hysom's hybrid SpMV (see ../spmv.c for the
 * method).  One file per phase, as miniMD's ref/ does:
 *   problem.c  the run's shape checks, the local box, CSR assembly, the halo
 *   calls.c    one SpMV call of each mode, and the timed loop (--min-time)
 *   verify.c   y against a stencil recomputation; threads sharing a core
 *   report.c   readable lines, the RESULT line, the --times-file
 */
#ifndef SPMV_H
#define SPMV_H

#include "kernel_common.h"

#include <stdio.h>

#define REL_TOL 1e-12
#define MAX_NB 26
#define MAX_TIMES_IN_JSON 1000
#define SPMV_MAX_ITERS 1000000L /* --iters' limit, and --min-time's cap */

typedef struct {
    kc_mode mode;
    long n, iters, warmup, decomp;
    double min_time;
    const char *times_file;
} options;

typedef struct {
    int nx, ny, nz;           /* owned box */
    int px, py, pz;           /* rank grid */
    int cx, cy, cz;           /* this rank's grid coordinates */
    long long gx0, gy0, gz0;  /* global offset of the box */
    long long Gx, Gy, Gz;     /* global grid */
    int rows, nint, nnz;      /* rows (points), the nint interior rows first */
    int decomp;               /* threads whose box this rank owns */
    int funneled;             /* mode funneled: interior rows split over workers */
    int *order;               /* [rows] CSR row p -> local point index */
    int *rp, *col;            /* CSR */
    double *val, *x, *y;      /* x ghosted: (nx+2)(ny+2)(nz+2) */
    /* halo */
    int nnb, nsend, nrecv;
    int nb_rank[MAX_NB], nb_dir[MAX_NB];
    int send_off[MAX_NB + 1], recv_off[MAX_NB + 1];
    int *send_idx, *recv_idx;
    double *sendbuf, *recvbuf;
    MPI_Request req[2 * MAX_NB];
    MPI_Status status[2 * MAX_NB]; /* real array: gcc 12 warns on MPICH's MPI_STATUSES_IGNORE */
    long exchanges;           /* halo exchanges made (KERNEL_FAULT=spmv_halo_once) */
} problem;

/* Phases of one call, in seconds. */
enum { PH_PACK, PH_COMM, PH_COMP, PH_OVL, PH_INT, PH_BND, PH_COUNT };
typedef struct { double t[PH_COUNT]; } call_times;

/* The timed loop: per-call phases of this rank, their sums, the wall time. */
typedef struct {
    long calls;           /* timed calls (--iters, or more with --min-time) */
    long calib_calls;     /* calls of the --min-time calibration (0: none) */
    double calib_pace;    /* its last batch's seconds per call, slowest rank */
    call_times *per_call; /* [calls] */
    double sum[PH_COUNT];
    double wall;          /* this rank's wall time of the timed calls */
    kc_call_stat call;    /* median and trimmed mean of the calls' wall times,
                             slowest rank per call (kc_call_stats) */
} timing;

/* x as a function of global grid coordinates (verification needs it too). */
static inline double xfun(long long gx, long long gy, long long gz) {
    return 1.0 + (double)((7 * gx + 13 * gy + 17 * gz) % 11);
}

/* Wall clock usable from any thread (no MPI call). */
double spmv_now(void);

/* problem.c */
int spmv_decomp_threads(kc_ctx *ctx, const options *o, long env_threads);
void spmv_setup(kc_ctx *ctx, const options *o, int decomp, problem *P);
void spmv_free(problem *P);

/* calls.c */
void interior_chunk(int nint, int tid, int nth, int *lo, int *hi);
void spmv_run(kc_ctx *ctx, const options *o, problem *P, timing *tm);

/* verify.c */
double spmv_rel_error(const kc_ctx *ctx, problem *P);
long spmv_interior_halo_reads(const kc_ctx *ctx, const problem *P);
int spmv_threads_share_core(const kc_ctx *ctx);

/* report.c */
typedef struct {
    long long nnz, rows;       /* global */
    kc_stat st[PH_COUNT], wall;
    double gflops, bytes_model, traffic_gbs, rel_err;
    long interior_halo_reads; /* interior-row entries that read a received ghost */
    int verified, shared_core;
} spmv_result;
void spmv_summarise(const kc_ctx *ctx, const problem *P, const timing *tm, spmv_result *r);
void spmv_write_times(FILE *tf, const problem *P, const timing *tm);
void spmv_report(const kc_ctx *ctx, const options *o, const problem *P, const timing *tm,
                 const spmv_result *r);

#endif
