/* spmv: Chow & Hysom's hybrid sparse matrix-vector product (science.md, 000).
 *
 * Matrix: the 27-point stencil of a 3-D PDE on a regular global grid, stored in
 * CSR (double values, 32-bit int column indices and row pointers), assembled by
 * every rank for the points it owns; there is no global matrix anywhere.  The
 * diagonal is 26 and the 26 off-diagonals are -1.  Boundary condition:
 * homogeneous Dirichlet -- grid points outside the global domain are zero, so
 * their matrix entries are simply absent (boundary rows have fewer than 27
 * nonzeros).
 *
 * Decomposition (weak scaling, N^3 rows per core):
 *   - a rank that runs T threads owns a box of (a*N) x (b*N) x (c*N) points where
 *     (a,b,c) are the factors of MPI_Dims_create(T, 3) sorted descending:
 *     2N x N x N for T=2, 2N x 2N x N for T=4, 2N x 2N x 2N for T=8 (the paper's
 *     shapes), 3N x 2N x N for T=6, ...;  the x axis (fastest in memory) is the
 *     longest one.  mpi mode: T = 1.  serial mode: one thread but the box of
 *     T = --decomp-threads (default OMP_NUM_THREADS from the environment), i.e.
 *     the hybrid decomposition run on one thread (needed for e_mt).
 *   - ranks form a px x py x pz grid from MPI_Dims_create(nranks, 3), rank
 *     r = (cx*py + cy)*pz + cz; the global grid is (px*nx) x (py*ny) x (pz*nz).
 *
 * The local x has a ghost layer, (nx+2)(ny+2)(nz+2) values; CSR column indices
 * point into it.  One SpMV call: (1) pack the outgoing faces/edges/corners (an
 * OpenMP loop in the hybrid modes), (2) MPI_Irecv + MPI_Isend with up to 26
 * neighbours, (3) MPI_Waitall and unpack into the ghost layer, (4) y = A x.
 * Modes:
 *   mpi        one thread per rank;
 *   masteronly pack and SpMV are OpenMP loops, MPI only outside parallel regions
 *              (MPI_THREAD_FUNNELED);
 *   funneled   one parallel region per call: all threads pack, barrier, the
 *              master posts/waits/unpacks the halo while the other threads
 *              compute the interior rows (rows that touch no ghost value),
 *              barrier, then all threads compute the boundary rows;
 *   serial     see above.  `multiple` is rejected (no such variant in the paper).
 * All buffers are allocated once before the timed loop and first-touched by
 * the threads that use them with the compute loops' static schedule.
 *
 * Interior / boundary split (all modes): the CSR rows are stored interior rows
 * first (rows that read no ghost value a neighbour sends; rows on the global
 * domain's Dirichlet boundary are interior), then the boundary rows, each group
 * in grid order.  Every mode computes them as two loops and times both per
 * call: in mpi, masteronly and serial the interior loop (static schedule, then
 * its barrier) runs after the exchange and is followed by the boundary loop;
 * in funneled the interior time is the slowest worker's overlapped interior
 * chunk.  This gives, from masteronly runs, Rabenseifner's (001) overlap model
 * fractions of T = t_total: f_comp,overlap = t_comp_interior / T,
 * f_comp,non = (t_comp_boundary + t_pack) / T, f_comm = t_comm / T.
 * t_comp = t_comp_interior + t_comp_boundary per call.
 *
 * Verification (every run): x_i = 1 + ((7 gx + 13 gy + 17 gz) mod 11) from the
 * GLOBAL coordinates of point i; y of the last timed call is compared with a
 * recomputation that uses neither the CSR matrix nor the halo: for every owned
 * point the 27 stencil offsets are visited in global coordinates, skipping
 * points outside the domain.  Pass: max|y - yref| / max|yref| <= 1e-12.
 *
 * Traffic model (bytes_per_iter_model, for the roofline against stream): per
 * call 12 bytes per nonzero (8 value + 4 column index) + 8 bytes per row for
 * y + 8 bytes per row for x (each x value read once from memory) + 4 bytes
 * per row for the row pointer = 12 nnz + 20 rows.
 *
 * Performance: the row loop is an OpenMP simd reduction (AVX gathers; the
 * summation order differs from a sequential loop only by rounding), rows of
 * exactly 27 nonzeros take a fixed-trip-count path with software prefetch of
 * val/col, and the big arrays are 2 MiB aligned with MADV_HUGEPAGE.
 *
 * Figure of merit: GFLOP/s = 2 flops per nonzero x global nnz x calls / t_total,
 * t_total = wall time of the timed loop, max over ranks.
 */
#define _GNU_SOURCE
#include "kernel_common.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const char *HELP =
    "usage: spmv [--mode mpi|masteronly|funneled|serial] [--n N] [--iters K]\n"
    "            [--warmup W] [--decomp-threads T] [--times-file PATH]\n"
    "  Chow & Hysom hybrid SpMV: y = A x, A the 27-point stencil of a 3-D PDE\n"
    "  (diagonal 26, off-diagonals -1) on a regular grid, homogeneous Dirichlet\n"
    "  boundary (points outside the global domain are zero/absent), CSR with\n"
    "  32-bit indices, halo exchange with up to 26 neighbours per call.\n"
    "  Weak scaling: N^3 rows per core.  A rank with T threads owns a box of\n"
    "  aN x bN x cN points, (a,b,c) = MPI_Dims_create(T,3) sorted descending\n"
    "  (2NxNxN for T=2, 2Nx2NxN for 4, 2Nx2Nx2N for 8); ranks form the grid\n"
    "  MPI_Dims_create(nranks,3).\n"
    "  --mode   mpi: 1 thread per rank (default);\n"
    "           masteronly: OMP_NUM_THREADS threads pack and compute, MPI outside\n"
    "             parallel regions (MPI_THREAD_FUNNELED);\n"
    "           funneled: the master thread exchanges the halo while the other\n"
    "             threads compute the interior rows, then all do the boundary rows;\n"
    "           serial: 1 thread on the box of --decomp-threads threads (the\n"
    "             hybrid decomposition on one thread, for e_mt);\n"
    "           multiple is not supported.\n"
    "  --n N    points per core along one axis, N^3 rows per core (default 16)\n"
    "  --iters K  timed SpMV calls (default 100); times are sums over the calls\n"
    "  --warmup W untimed calls before (default 3)\n"
    "  --decomp-threads T  serial mode only: box of T threads (default: the\n"
    "           OMP_NUM_THREADS environment variable, else the online cores)\n"
    "  --times-file PATH  rank 0 writes its per-call pack/comm/comp times there\n"
    "  --help   this text\n"
    "  Verification: x = 1 + ((7gx+13gy+17gz) mod 11) of the global coordinates;\n"
    "  y must match a stencil recomputation to max|y-yref|/max|yref| <= 1e-12.\n"
    "  RESULT fom: GFLOP/s (2 flops per nonzero, wall time of the timed loop).\n";

#define REL_TOL 1e-12
#define MAX_NB 26
/* Software prefetch distance (elements of val/col) of the interior rows:
 * ~10 rows ahead.  Measured on the 2-core VM (n=128, far beyond the caches):
 * hardware prefetch alone gave ~0.9 of stream triad, this ~1.05. */
#ifndef PF_DIST
#define PF_DIST 256
#endif
#define MAX_TIMES_IN_JSON 1000

typedef struct {
    kc_mode mode;
    long n, iters, warmup, decomp;
    const char *times_file;
} options;

/* Parse the options into `o`; returns NULL or a message written into err. */
static const char *parse(int argc, char **argv, options *o, int *help, char *err, size_t cap) {
    static const struct option longopts[] = {
        {"mode", required_argument, NULL, 'm'},  {"n", required_argument, NULL, 'n'},
        {"iters", required_argument, NULL, 'i'}, {"warmup", required_argument, NULL, 'w'},
        {"decomp-threads", required_argument, NULL, 'd'},
        {"times-file", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    o->mode = KC_MODE_MPI;
    o->n = 16;
    o->iters = 100;
    o->warmup = 3;
    o->decomp = 0;
    o->times_file = NULL;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (kc_parse_mode(optarg, &o->mode) != 0) {
                snprintf(err, cap, "unknown mode '%s' (mpi, masteronly, funneled, serial)", optarg);
                return err;
            }
            if (o->mode == KC_MODE_MULTIPLE) {
                snprintf(err, cap,
                         "mode multiple is not supported: Chow & Hysom's SpMV has one "
                         "communicating thread (use mpi, masteronly, funneled or serial)");
                return err;
            }
            break;
        case 'n':
            if (kc_opt_long("n", optarg, 1, 100000, &o->n, err, cap)) return err;
            break;
        case 'i':
            if (kc_opt_long("iters", optarg, 1, 1000000, &o->iters, err, cap)) return err;
            break;
        case 'w':
            if (kc_opt_long("warmup", optarg, 0, 1000, &o->warmup, err, cap)) return err;
            break;
        case 'd':
            if (kc_opt_long("decomp-threads", optarg, 1, 4096, &o->decomp, err, cap)) return err;
            break;
        case 't':
            if (!*optarg) {
                snprintf(err, cap, "--times-file needs a path");
                return err;
            }
            o->times_file = optarg;
            break;
        case 'h': *help = 1; break;
        default: return kc_opt_unknown(argv, err, cap);
        }
    }
    if (kc_opt_leftover(argc, argv, err, cap)) return err;
    if (o->decomp && o->mode != KC_MODE_SERIAL) {
        snprintf(err, cap, "--decomp-threads applies to --mode serial only");
        return err;
    }
    return NULL;
}

/* ---- small helpers ------------------------------------------------------ */

static double now(void) { /* usable from any thread (no MPI call) */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
static int num_threads(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Leading integer of OMP_NUM_THREADS ("4" or "4,2"); the online cores if unset. */
static long env_threads(void) {
    const char *s = getenv("OMP_NUM_THREADS");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (!s || !*s) return cores;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1) return cores;
    return v > 4096 ? 4096 : v;
}

/* Large arrays (matrix, vectors): 2 MiB aligned and advised as transparent
 * huge pages where the kernel allows it (THP "madvise" mode), so the streaming
 * SpMV does not pay a TLB miss (a two-level page walk in a VM) every 4 KiB.
 * Memory is not touched here: first touch stays with the compute threads. */
static void *big_malloc(const kc_ctx *ctx, size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge) return kc_malloc(ctx, bytes);
    size_t len = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, len) != 0 || !p)
        kc_abort(ctx, "cannot allocate %zu bytes", len);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
    return p;
}

/* x as a function of global grid coordinates (verification needs it too). */
static inline double xfun(long long gx, long long gy, long long gz) {
    return 1.0 + (double)((7 * gx + 13 * gy + 17 * gz) % 11);
}

/* ---- the local problem -------------------------------------------------- */

typedef struct {
    int nx, ny, nz;           /* owned box */
    int px, py, pz;           /* rank grid */
    int cx, cy, cz;           /* this rank's grid coordinates */
    long long gx0, gy0, gz0;  /* global offset of the box */
    long long Gx, Gy, Gz;     /* global grid */
    int rows, nint, nnz;      /* rows (points), the nint interior rows first */
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
} problem;

static inline int gidx(const problem *P, int i, int j, int k) {
    return ((k + 1) * (P->ny + 2) + (j + 1)) * (P->nx + 2) + (i + 1);
}

/* Does the point (i,j,k) read a ghost value that a neighbour rank sends? */
static int is_boundary(const problem *P, int i, int j, int k) {
    return (i == 0 && P->cx > 0) || (i == P->nx - 1 && P->cx < P->px - 1) ||
           (j == 0 && P->cy > 0) || (j == P->ny - 1 && P->cy < P->py - 1) ||
           (k == 0 && P->cz > 0) || (k == P->nz - 1 && P->cz < P->pz - 1);
}

static inline int valid_offsets(long long g, long long G) {
    return 1 + (g > 0) + (g < G - 1);
}

static int row_nnz(const problem *P, int pt) {
    int i = pt % P->nx, j = (pt / P->nx) % P->ny, k = pt / (P->nx * P->ny);
    return valid_offsets(P->gx0 + i, P->Gx) * valid_offsets(P->gy0 + j, P->Gy) *
           valid_offsets(P->gz0 + k, P->Gz);
}

/* Write CSR row p (entries rp[p]..rp[p+1]) and zero y[p]. */
static void fill_row(problem *P, int p) {
    int pt = P->order[p];
    int i = pt % P->nx, j = (pt / P->nx) % P->ny, k = pt / (P->nx * P->ny);
    int e = P->rp[p];
    for (int dz = -1; dz <= 1; ++dz) {
        long long gz = P->gz0 + k + dz;
        if (gz < 0 || gz >= P->Gz) continue;
        for (int dy = -1; dy <= 1; ++dy) {
            long long gy = P->gy0 + j + dy;
            if (gy < 0 || gy >= P->Gy) continue;
            for (int dx = -1; dx <= 1; ++dx) {
                long long gx = P->gx0 + i + dx;
                if (gx < 0 || gx >= P->Gx) continue;
                P->col[e] = gidx(P, i + dx, j + dy, k + dz);
                P->val[e] = (dx == 0 && dy == 0 && dz == 0) ? 26.0 : -1.0;
                ++e;
            }
        }
    }
    P->y[p] = 0.0;
}

/* The funneled mode's static split of the interior rows over the worker
 * threads 1..T-1 (the master communicates); with one thread the master does
 * them after communicating. */
static void interior_chunk(int nint, int tid, int nth, int *lo, int *hi) {
    int w, nw;
    if (nth == 1) {
        w = 0;
        nw = 1;
    } else if (tid == 0) {
        *lo = *hi = 0;
        return;
    } else {
        w = tid - 1;
        nw = nth - 1;
    }
    *lo = (int)((long long)nint * w / nw);
    *hi = (int)((long long)nint * (w + 1) / nw);
}

static inline void spmv_row(const int *restrict rp, const int *restrict col,
                            const double *restrict val, const double *restrict x,
                            double *restrict y, int p, int lim) {
    double s = 0.0;
    const int e0 = rp[p], e1 = rp[p + 1];
    if (e1 - e0 == 27) { /* interior row: fixed trip count, fully vectorised */
        const double *restrict v = val + e0;
        const int *restrict c = col + e0;
        if (lim - e0 >= PF_DIST + 27) { /* stays inside val/col */
            __builtin_prefetch(v + PF_DIST, 0, 3);
            __builtin_prefetch(v + PF_DIST + 8, 0, 3);
            __builtin_prefetch(v + PF_DIST + 16, 0, 3);
            __builtin_prefetch(v + PF_DIST + 24, 0, 3);
            __builtin_prefetch(c + PF_DIST, 0, 3);
            __builtin_prefetch(c + PF_DIST + 16, 0, 3);
        }
#pragma omp simd reduction(+ : s)
        for (int e = 0; e < 27; ++e) s += v[e] * x[c[e]];
    } else {
#pragma omp simd reduction(+ : s)
        for (int e = e0; e < e1; ++e) s += val[e] * x[col[e]];
    }
    y[p] = s;
}

/* Index ranges of the cells sent towards direction d (-1,0,+1) along an axis
 * of length n, and of the ghost cells received from there. */
static void send_range(int d, int n, int *lo, int *hi) {
    *lo = d > 0 ? n - 1 : 0;
    *hi = d < 0 ? 0 : n - 1;
}
static void recv_range(int d, int n, int *lo, int *hi) {
    *lo = d < 0 ? -1 : (d > 0 ? n : 0);
    *hi = d < 0 ? -1 : (d > 0 ? n : n - 1);
}

static int fill_list(const problem *P, int *list, int dx, int dy, int dz, int recv) {
    int ilo, ihi, jlo, jhi, klo, khi, m = 0;
    void (*range)(int, int, int *, int *) = recv ? recv_range : send_range;
    range(dx, P->nx, &ilo, &ihi);
    range(dy, P->ny, &jlo, &jhi);
    range(dz, P->nz, &klo, &khi);
    for (int k = klo; k <= khi; ++k)
        for (int j = jlo; j <= jhi; ++j)
            for (int i = ilo; i <= ihi; ++i) {
                if (list) list[m] = gidx(P, i, j, k);
                ++m;
            }
    return m;
}

static void setup_halo(const kc_ctx *ctx, problem *P) {
    P->nnb = 0;
    P->nsend = P->nrecv = 0;
    for (int d = 0; d < 27; ++d) {
        int dx = d % 3 - 1, dy = (d / 3) % 3 - 1, dz = d / 9 - 1;
        if (d == 13) continue;
        int ncx = P->cx + dx, ncy = P->cy + dy, ncz = P->cz + dz;
        if (ncx < 0 || ncx >= P->px || ncy < 0 || ncy >= P->py || ncz < 0 || ncz >= P->pz)
            continue; /* outside the global domain: no neighbour */
        int b = P->nnb++;
        P->nb_rank[b] = (ncx * P->py + ncy) * P->pz + ncz;
        P->nb_dir[b] = d;
        P->send_off[b] = P->nsend;
        P->recv_off[b] = P->nrecv;
        P->nsend += fill_list(P, NULL, dx, dy, dz, 0);
        P->nrecv += fill_list(P, NULL, dx, dy, dz, 1);
    }
    P->send_off[P->nnb] = P->nsend;
    P->recv_off[P->nnb] = P->nrecv;
    P->send_idx = kc_malloc(ctx, (size_t)P->nsend * sizeof(int));
    P->recv_idx = kc_malloc(ctx, (size_t)P->nrecv * sizeof(int));
    P->sendbuf = kc_malloc(ctx, (size_t)P->nsend * sizeof(double));
    P->recvbuf = kc_malloc(ctx, (size_t)P->nrecv * sizeof(double));
    for (int b = 0; b < P->nnb; ++b) {
        int d = P->nb_dir[b];
        int dx = d % 3 - 1, dy = (d / 3) % 3 - 1, dz = d / 9 - 1;
        fill_list(P, P->send_idx + P->send_off[b], dx, dy, dz, 0);
        fill_list(P, P->recv_idx + P->recv_off[b], dx, dy, dz, 1);
    }
    /* first touch of the buffers by the threads that pack them */
#pragma omp parallel for schedule(static)
    for (int q = 0; q < P->nsend; ++q) P->sendbuf[q] = 0.0;
    for (int q = 0; q < P->nrecv; ++q) P->recvbuf[q] = 0.0;
}

/* Post receives and sends, wait, unpack: called by one thread only.  A
 * message sent towards direction d carries tag d; the receiver expects from
 * its neighbour in direction e the tag of the opposite direction 26 - e. */
static void exchange(const kc_ctx *ctx, problem *P) {
    int nr = 0;
    for (int b = 0; b < P->nnb; ++b) {
        int cnt = P->recv_off[b + 1] - P->recv_off[b];
        if (MPI_Irecv(P->recvbuf + P->recv_off[b], cnt, MPI_DOUBLE, P->nb_rank[b],
                      26 - P->nb_dir[b], MPI_COMM_WORLD, &P->req[nr++]) != MPI_SUCCESS)
            kc_abort(ctx, "MPI_Irecv failed");
    }
    for (int b = 0; b < P->nnb; ++b) {
        int cnt = P->send_off[b + 1] - P->send_off[b];
        if (MPI_Isend(P->sendbuf + P->send_off[b], cnt, MPI_DOUBLE, P->nb_rank[b],
                      P->nb_dir[b], MPI_COMM_WORLD, &P->req[nr++]) != MPI_SUCCESS)
            kc_abort(ctx, "MPI_Isend failed");
    }
    if (MPI_Waitall(nr, P->req, P->status) != MPI_SUCCESS)
        kc_abort(ctx, "MPI_Waitall failed");
    double *restrict x = P->x;
    const double *restrict rb = P->recvbuf;
    const int *restrict ri = P->recv_idx;
    for (int q = 0; q < P->nrecv; ++q) x[ri[q]] = rb[q];
}

int main(int argc, char **argv) {
    options o;
    int help = 0;
    char errbuf[320];
    const char *err = parse(argc, argv, &o, &help, errbuf, sizeof errbuf);
    const long env_t = env_threads(); /* before kc_init forces 1 thread in serial */
    kc_ctx ctx;
    kc_init(&ctx, &argc, &argv, "spmv", o.mode, err, help ? HELP : NULL);

    /* ---- checks of the run's shape (collective: same decision everywhere) */
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int hybrid = o.mode == KC_MODE_MASTERONLY || o.mode == KC_MODE_FUNNELED;
    int tmin = 0, tmax = 0;
    MPI_Allreduce(&ctx.threads, &tmin, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&ctx.threads, &tmax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!kc_all_true(&ctx, !(hybrid && cores > 0 && ctx.threads > cores)))
        kc_fail(&ctx, 2, "%d threads per rank (OMP_NUM_THREADS) exceed the %ld online cores",
                tmax, cores);
    if (tmin != tmax)
        kc_fail(&ctx, 2, "ranks run different thread counts (%d..%d): every rank must own "
                "the same box", tmin, tmax);
    int decomp = ctx.threads;
    if (o.mode == KC_MODE_SERIAL) decomp = (int)(o.decomp ? o.decomp : env_t);
    long dmin = decomp, dmax = decomp, dl = decomp;
    MPI_Allreduce(&dl, &dmin, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&dl, &dmax, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (dmin != dmax)
        kc_fail(&ctx, 2, "ranks see different decomposition thread counts (%ld..%ld)", dmin, dmax);

    problem P;
    memset(&P, 0, sizeof P);
    int f[3] = {0, 0, 0}, pd[3] = {0, 0, 0};
    MPI_Dims_create(decomp, 3, f);
    MPI_Dims_create(ctx.nranks, 3, pd);
    for (int a = 0; a < 3; ++a) /* sort descending (MPI already does; be sure) */
        for (int b = a + 1; b < 3; ++b)
            if (f[b] > f[a]) {
                int t = f[a];
                f[a] = f[b];
                f[b] = t;
            }
    const double nxd = (double)f[0] * o.n, nyd = (double)f[1] * o.n, nzd = (double)f[2] * o.n;
    const double rows_d = nxd * nyd * nzd;
    const double ghost_d = (nxd + 2) * (nyd + 2) * (nzd + 2);
    if (27.0 * rows_d > (double)INT_MAX || ghost_d > (double)INT_MAX)
        kc_fail(&ctx, 2,
                "--n %ld is too large: a box of %.0f x %.0f x %.0f (%d threads) has %.3g rows "
                "and up to %.3g nonzeros per rank, beyond the 32-bit index range (%d)",
                o.n, nxd, nyd, nzd, decomp, rows_d, 27.0 * rows_d, INT_MAX);
    if ((double)pd[0] * nxd * (double)pd[1] * nyd * (double)pd[2] * nzd > 1e18)
        kc_fail(&ctx, 2, "--n %ld gives a global grid too large to address", o.n);
    {   /* memory: all ranks of this node must fit in 90% of its memory */
        MPI_Comm node;
        int local = 1;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
        double need = 27.0 * rows_d * 12.0 + rows_d * (4 + 4 + 8 + 8) + ghost_d * 8.0;
        double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        int fits = !(phys > 0) || need * local <= 0.9 * phys;
        if (!kc_all_true(&ctx, fits))
            kc_fail(&ctx, 2,
                    "--n %ld does not fit: %d rank(s) per node x %.3g GB for a box of "
                    "%.0f x %.0f x %.0f exceed 90%% of the node's %.3g GB",
                    o.n, local, need / 1e9, nxd, nyd, nzd, phys / 1e9);
    }

    P.nx = (int)nxd;
    P.ny = (int)nyd;
    P.nz = (int)nzd;
    P.px = pd[0];
    P.py = pd[1];
    P.pz = pd[2];
    P.cz = ctx.rank % P.pz;
    P.cy = (ctx.rank / P.pz) % P.py;
    P.cx = ctx.rank / (P.pz * P.py);
    P.gx0 = (long long)P.cx * P.nx;
    P.gy0 = (long long)P.cy * P.ny;
    P.gz0 = (long long)P.cz * P.nz;
    P.Gx = (long long)P.px * P.nx;
    P.Gy = (long long)P.py * P.ny;
    P.Gz = (long long)P.pz * P.nz;
    P.rows = P.nx * P.ny * P.nz;
    const int funneled = o.mode == KC_MODE_FUNNELED;
    const int nghost = (P.nx + 2) * (P.ny + 2) * (P.nz + 2);

    /* ---- row order (all modes): the interior rows (no ghost reads) first */
    P.order = kc_malloc(&ctx, (size_t)P.rows * sizeof(int));
    {
        int m = 0;
        for (int pt = 0; pt < P.rows; ++pt) {
            int i = pt % P.nx, j = (pt / P.nx) % P.ny, k = pt / (P.nx * P.ny);
            if (!is_boundary(&P, i, j, k)) P.order[m++] = pt;
        }
        P.nint = m;
        for (int pt = 0; pt < P.rows; ++pt) {
            int i = pt % P.nx, j = (pt / P.nx) % P.ny, k = pt / (P.nx * P.ny);
            if (is_boundary(&P, i, j, k)) P.order[m++] = pt;
        }
    }
    /* row pointers: prefix sum in a scratch array, copied with first touch */
    int *scan = kc_malloc(&ctx, ((size_t)P.rows + 1) * sizeof(int));
    scan[0] = 0;
    for (int p = 0; p < P.rows; ++p) scan[p + 1] = scan[p] + row_nnz(&P, P.order[p]);
    P.nnz = scan[P.rows];
    P.rp = big_malloc(&ctx, ((size_t)P.rows + 1) * sizeof(int));
    P.col = big_malloc(&ctx, (size_t)P.nnz * sizeof(int));
    P.val = big_malloc(&ctx, (size_t)P.nnz * sizeof(double));
    P.y = big_malloc(&ctx, (size_t)P.rows * sizeof(double));
    P.x = big_malloc(&ctx, (size_t)nghost * sizeof(double));
    P.rp[0] = 0;
#pragma omp parallel
    {
        const int tid = thread_num(), nth = num_threads();
        if (funneled) {
            int lo, hi;
            interior_chunk(P.nint, tid, nth, &lo, &hi);
            for (int p = lo; p < hi; ++p) P.rp[p + 1] = scan[p + 1];
#pragma omp for schedule(static)
            for (int p = P.nint; p < P.rows; ++p) P.rp[p + 1] = scan[p + 1];
            /* implicit barrier: rp complete before rows are filled */
            for (int p = lo; p < hi; ++p) fill_row(&P, p);
#pragma omp for schedule(static)
            for (int p = P.nint; p < P.rows; ++p) fill_row(&P, p);
        } else { /* the two static schedules of the interior and boundary loops */
#pragma omp for schedule(static) nowait
            for (int p = 0; p < P.nint; ++p) P.rp[p + 1] = scan[p + 1];
#pragma omp for schedule(static)
            for (int p = P.nint; p < P.rows; ++p) P.rp[p + 1] = scan[p + 1];
            /* implicit barrier: rp complete before rows are filled */
#pragma omp for schedule(static) nowait
            for (int p = 0; p < P.nint; ++p) fill_row(&P, p);
#pragma omp for schedule(static)
            for (int p = P.nint; p < P.rows; ++p) fill_row(&P, p);
        }
        /* x: ghost layer zero, owned points from the global coordinates */
#pragma omp for schedule(static)
        for (int kk = 0; kk < P.nz + 2; ++kk)
            for (int jj = 0; jj < P.ny + 2; ++jj)
                for (int ii = 0; ii < P.nx + 2; ++ii) {
                    int i = ii - 1, j = jj - 1, k = kk - 1;
                    int own = i >= 0 && i < P.nx && j >= 0 && j < P.ny && k >= 0 && k < P.nz;
                    P.x[(kk * (P.ny + 2) + jj) * (P.nx + 2) + ii] =
                        own ? xfun(P.gx0 + i, P.gy0 + j, P.gz0 + k) : 0.0;
                }
    }
    free(scan);
    setup_halo(&ctx, &P);

    /* ---- per-call timing storage (allocated once) */
    const long K = o.iters;
    double *tc_pack = kc_malloc(&ctx, (size_t)K * sizeof(double));
    double *tc_comm = kc_malloc(&ctx, (size_t)K * sizeof(double));
    double *tc_comp = kc_malloc(&ctx, (size_t)K * sizeof(double));
    double *tc_ovl = kc_malloc(&ctx, (size_t)K * sizeof(double));
    double *tc_int = kc_malloc(&ctx, (size_t)K * sizeof(double));
    double *tc_bnd = kc_malloc(&ctx, (size_t)K * sizeof(double));
    const int PAD = 8; /* one cache line per thread */
    double *thr_t = kc_malloc(&ctx, (size_t)ctx.threads * PAD * sizeof(double));
    for (int t = 0; t < ctx.threads * PAD; ++t) thr_t[t] = 0.0;
    FILE *tf = NULL;
    if (o.times_file && ctx.rank == 0) tf = fopen(o.times_file, "w");
    if (!kc_all_true(&ctx, !o.times_file || ctx.rank != 0 || tf))
        kc_fail(&ctx, 2, "cannot open --times-file '%s' for writing", o.times_file);

    /* plain (not restrict) aliases: exchange() writes x through P */
    const int *rp = P.rp, *col = P.col, *sidx = P.send_idx;
    const double *val = P.val, *x = P.x;
    double *y = P.y, *sbuf = P.sendbuf;
    const int rows = P.rows, nint = P.nint, nsend = P.nsend, lim = P.nnz;

    double t_loop = 0.0;
    for (long it = -o.warmup; it < K; ++it) {
        if (it == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t_loop = now();
        }
        double tp = 0, tc = 0, tcomp = 0, tovl = 0, tint = 0, tbnd = 0;
        if (!funneled) {
            double t0 = now();
#pragma omp parallel for schedule(static)
            for (int q = 0; q < nsend; ++q) sbuf[q] = x[sidx[q]];
            double t1 = now();
            exchange(&ctx, &P);
            double t2 = now(), tb = t2;
#pragma omp parallel
            {
                kc_record_cpu(&ctx);
#pragma omp for schedule(static)
                for (int p = 0; p < nint; ++p) spmv_row(rp, col, val, x, y, p, lim);
                /* implicit barrier: all interior rows done */
#pragma omp master
                tb = now();
#pragma omp for schedule(static) nowait
                for (int p = nint; p < rows; ++p) spmv_row(rp, col, val, x, y, p, lim);
            }
            double t3 = now();
            tp = t1 - t0;
            tc = t2 - t1;
            tint = tb - t2;
            tbnd = t3 - tb;
            tcomp = tint + tbnd;
        } else {
            double t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0;
            int team = 1;
#pragma omp parallel
            {
                const int tid = thread_num(), nth = num_threads();
                kc_record_cpu(&ctx);
#pragma omp master
                {
                    team = nth;
                    t0 = now();
                }
#pragma omp for schedule(static) nowait
                for (int q = 0; q < nsend; ++q) sbuf[q] = x[sidx[q]];
                /* packing complete before the master sends */
#pragma omp barrier
#pragma omp master
                {
                    t1 = now();
                    exchange(&ctx, &P);
                    t2 = now();
                }
                {   /* interior rows: no ghost value needed, overlap the exchange */
                    int lo, hi;
                    interior_chunk(nint, tid, nth, &lo, &hi);
                    double a = now();
                    for (int p = lo; p < hi; ++p) spmv_row(rp, col, val, x, y, p, lim);
                    thr_t[tid * PAD] = lo < hi ? now() - a : 0.0;
                }
                /* ghost values unpacked (and interior done) before boundary rows */
#pragma omp barrier
#pragma omp master
                t3 = now();
#pragma omp for schedule(static)
                for (int p = nint; p < rows; ++p) spmv_row(rp, col, val, x, y, p, lim);
#pragma omp master
                t4 = now();
            }
            double ovl = 0.0;
            for (int t = 0; t < team; ++t)
                if (thr_t[t * PAD] > ovl) ovl = thr_t[t * PAD];
            tp = t1 - t0;
            tc = t2 - t1;
            tovl = ovl;
            tint = ovl;
            tbnd = t4 - t3;
            tcomp = ovl + (t4 - t3);
        }
        if (it >= 0) {
            tc_pack[it] = tp;
            tc_comm[it] = tc;
            tc_comp[it] = tcomp;
            tc_ovl[it] = tovl;
            tc_int[it] = tint;
            tc_bnd[it] = tbnd;
        }
    }
    const double t_wall = now() - t_loop;

    /* ---- sums, statistics */
    double s_pack = 0, s_comm = 0, s_comp = 0, s_ovl = 0, s_int = 0, s_bnd = 0;
    for (long it = 0; it < K; ++it) {
        s_pack += tc_pack[it];
        s_comm += tc_comm[it];
        s_comp += tc_comp[it];
        s_ovl += tc_ovl[it];
        s_int += tc_int[it];
        s_bnd += tc_bnd[it];
    }
    const kc_stat st_pack = kc_stat_over_ranks(&ctx, s_pack);
    const kc_stat st_comm = kc_stat_over_ranks(&ctx, s_comm);
    const kc_stat st_comp = kc_stat_over_ranks(&ctx, s_comp);
    const kc_stat st_ovl = kc_stat_over_ranks(&ctx, s_ovl);
    const kc_stat st_int = kc_stat_over_ranks(&ctx, s_int);
    const kc_stat st_bnd = kc_stat_over_ranks(&ctx, s_bnd);
    const kc_stat st_wall = kc_stat_over_ranks(&ctx, t_wall);
    long long loc[2] = {P.nnz, P.rows}, glob[2] = {0, 0};
    MPI_Allreduce(loc, glob, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    const double flops = 2.0 * (double)glob[0] * (double)K;
    const double gflops = flops / st_wall.max / 1e9;
    const double bytes_model = 12.0 * (double)glob[0] + 20.0 * (double)glob[1];
    const double traffic_gbs = bytes_model * (double)K / st_wall.max / 1e9;

    if (tf) {
        fprintf(tf, "# spmv rank 0 per-call times (s): call pack comm comp%s\n",
                funneled ? " overlap" : "");
        for (long it = 0; it < K; ++it) {
            fprintf(tf, "%ld %.9e %.9e %.9e", it, tc_pack[it], tc_comm[it], tc_comp[it]);
            if (funneled) fprintf(tf, " %.9e", tc_ovl[it]);
            fputc('\n', tf);
        }
        fclose(tf);
    }

    /* ---- fewer cores allowed to a rank than it runs threads (e.g. Open MPI
     * binds a 1- or 2-rank job to one core per rank by default)? */
    int shared_core = 0;
    {
        cpu_set_t all;
        CPU_ZERO(&all);
        int nth_seen = 1;
#pragma omp parallel
        {
            cpu_set_t mine;
            CPU_ZERO(&mine);
            int ok = sched_getaffinity(0, sizeof mine, &mine) == 0;
#pragma omp critical
            {
                if (ok) CPU_OR(&all, &all, &mine);
                else CPU_SET(0, &all);
            }
#pragma omp master
            nth_seen = num_threads();
        }
        shared_core = CPU_COUNT(&all) < nth_seen;
    }
    shared_core = !kc_all_true(&ctx, !shared_core);

    /* ---- verification of the last call's y, without CSR and halo */
    if (KC_FAULT_INJECTED && ctx.rank == 0) P.y[0] += 1.0;
    double max_err = 0.0, max_ref = 0.0;
#pragma omp parallel for schedule(static) reduction(max : max_err, max_ref)
    for (int p = 0; p < P.rows; ++p) {
        int pt = P.order[p];
        long long gx = P.gx0 + pt % P.nx, gy = P.gy0 + (pt / P.nx) % P.ny,
                  gz = P.gz0 + pt / (P.nx * P.ny);
        double ref = 0.0;
        for (int dz = -1; dz <= 1; ++dz)
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) {
                    long long qx = gx + dx, qy = gy + dy, qz = gz + dz;
                    if (qx < 0 || qy < 0 || qz < 0 || qx >= P.Gx || qy >= P.Gy || qz >= P.Gz)
                        continue; /* Dirichlet: zero outside the domain */
                    double c = (dx == 0 && dy == 0 && dz == 0) ? 26.0 : -1.0;
                    ref += c * xfun(qx, qy, qz);
                }
        double e = fabs(P.y[p] - ref);
        if (!(e <= max_err)) max_err = isnan(e) ? INFINITY : e;
        if (fabs(ref) > max_ref) max_ref = fabs(ref);
    }
    double lred[2] = {max_err, max_ref}, gred[2] = {0, 0};
    MPI_Allreduce(lred, gred, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double rel_err = gred[0] / (gred[1] > 0 ? gred[1] : 1.0);
    const int verified = kc_all_true(&ctx, rel_err <= REL_TOL);

    if (ctx.rank == 0) {
        printf("spmv: %d ranks x %d threads, mode %s, rank grid %dx%dx%d, box %dx%dx%d per rank "
               "(decomposition of %d threads), global grid %lldx%lldx%lld\n",
               ctx.nranks, ctx.threads, kc_mode_name(o.mode), P.px, P.py, P.pz, P.nx, P.ny,
               P.nz, decomp, P.Gx, P.Gy, P.Gz);
        printf("spmv: %lld rows, %lld nonzeros; rank 0: %d neighbours, %lld halo bytes/call\n",
               glob[1], glob[0], P.nnb, (long long)P.nsend * 8);
        if (funneled)
            printf("spmv: rank 0: %d interior rows overlap the exchange, %d boundary rows\n",
                   P.nint, P.rows - P.nint);
        else
            printf("spmv: rank 0: %d interior rows, %d boundary rows\n", P.nint,
                   P.rows - P.nint);
        printf("spmv: %ld calls (+%ld warm-up): pack %.6f s, comm %.6f s, comp %.6f s "
               "(sums, max over ranks)%s; wall %.6f s\n",
               K, o.warmup, st_pack.max, st_comm.max, st_comp.max,
               funneled ? " [comp includes the overlapped interior]" : "", st_wall.max);
        printf("spmv: comp split: interior %.6f s, boundary %.6f s (sums, max over ranks)\n",
               st_int.max, st_bnd.max);
        printf("spmv: %.3f GFLOP/s, %.3f GB/s of modelled traffic (%.0f bytes per call)\n",
               gflops, traffic_gbs, bytes_model);
        if (shared_core)
            printf("spmv: WARNING: a rank may run on fewer cores than it has threads: the "
                   "launcher bound it too narrowly (Open MPI: --map-by slot:PE=%d or "
                   "--bind-to none); timings are not meaningful\n",
                   ctx.threads);
        printf("spmv: verification %s (max|y-yref|/max|yref| = %.3g, bound %.0e)\n",
               verified ? "PASSED" : "FAILED", rel_err, REL_TOL);
    }

    kc_json j;
    kc_json_begin(&j);
    kc_json_common(&j, &ctx);
    char buf[160];
    kc_json_int(&j, "size", o.n);
    kc_json_int(&j, "iters", K);
    kc_json_int(&j, "warmup", o.warmup);
    kc_json_int(&j, "decomp_threads", decomp);
    snprintf(buf, sizeof buf, "[%d,%d,%d]", P.nx, P.ny, P.nz);
    kc_json_raw(&j, "box", buf);
    snprintf(buf, sizeof buf, "[%d,%d,%d]", P.px, P.py, P.pz);
    kc_json_raw(&j, "dims", buf);
    snprintf(buf, sizeof buf, "[%lld,%lld,%lld]", P.Gx, P.Gy, P.Gz);
    kc_json_raw(&j, "global_grid", buf);
    kc_json_int(&j, "rows", glob[1]);
    kc_json_int(&j, "nnz", glob[0]);
    kc_json_num(&j, "t_total_s", st_wall.max);
    kc_json_num(&j, "t_pack_s", st_pack.max);
    kc_json_num(&j, "t_comm_s", st_comm.max);
    kc_json_num(&j, "t_comp_s", st_comp.max);
    kc_json_stat(&j, "t_total", st_wall);
    kc_json_stat(&j, "t_pack", st_pack);
    kc_json_stat(&j, "t_comm", st_comm);
    kc_json_stat(&j, "t_comp", st_comp);
    kc_json_num(&j, "t_comp_interior_s", st_int.max);
    kc_json_num(&j, "t_comp_boundary_s", st_bnd.max);
    kc_json_stat(&j, "t_comp_interior", st_int);
    kc_json_stat(&j, "t_comp_boundary", st_bnd);
    if (funneled) {
        kc_json_num(&j, "t_overlap_s", st_ovl.max);
        kc_json_stat(&j, "t_overlap", st_ovl);
    }
    kc_json_int(&j, "interior_rows", P.nint); /* rank 0's */
    kc_json_int(&j, "boundary_rows", P.rows - P.nint);
    kc_json_num(&j, "fom", gflops);
    kc_json_str(&j, "fom_unit", "GFLOP/s");
    kc_json_num(&j, "bytes_per_iter_model", bytes_model);
    kc_json_num(&j, "traffic_gbs", traffic_gbs);
    kc_json_int(&j, "halo_bytes", (long long)P.nsend * 8);
    kc_json_int(&j, "neighbours", P.nnb);
    const size_t nt = K > MAX_TIMES_IN_JSON ? MAX_TIMES_IN_JSON : (size_t)K;
    kc_json_num_array(&j, "comm_times_s", tc_comm, nt);
    kc_json_bool(&j, "comm_times_complete", (long)nt == K);
    kc_json_bool(&j, "threads_share_core", shared_core);
    kc_json_num(&j, "rel_error", rel_err);
    kc_json_num(&j, "rel_error_bound", REL_TOL);
    kc_json_bool(&j, "verified", verified);
    kc_json_emit(&j, &ctx);

    free(tc_pack);
    free(tc_comm);
    free(tc_comp);
    free(tc_ovl);
    free(tc_int);
    free(tc_bnd);
    free(thr_t);
    free(P.order);
    free(P.rp);
    free(P.col);
    free(P.val);
    free(P.x);
    free(P.y);
    free(P.send_idx);
    free(P.recv_idx);
    free(P.sendbuf);
    free(P.recvbuf);
    if (!verified)
        kc_fail(&ctx, 3, "verification FAILED: max|y-yref|/max|yref| = %.3g > %.0e", rel_err,
                REL_TOL);
    return kc_finalize(&ctx);
}
