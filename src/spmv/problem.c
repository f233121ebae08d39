/* spmv set-up: the run's shape, the local box, CSR assembly and the halo. */
#define _GNU_SOURCE
#include "spmv.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the run's shape (collective: the same decision on every rank) ------- */

/* Thread counts that every rank shares; returns the decomposition's threads
 * (serial: --decomp-threads, else OMP_NUM_THREADS from the environment). */
int spmv_decomp_threads(kc_ctx *ctx, const options *o, long env_threads) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int hybrid = o->mode == KC_MODE_MASTERONLY || o->mode == KC_MODE_FUNNELED;
    const kc_stat t = kc_stat_over_ranks(ctx, ctx->threads);
    if (!kc_all_true(ctx, !(hybrid && cores > 0 && ctx->threads > cores)))
        kc_fail(ctx, 2, "%d threads per rank (OMP_NUM_THREADS) exceed the %ld online cores",
                (int)t.max, cores);
    kc_need_same_threads(ctx, 0, "every rank must own the same box");
    int decomp = ctx->threads;
    if (o->mode == KC_MODE_SERIAL) decomp = (int)(o->decomp ? o->decomp : env_threads);
    const kc_stat d = kc_stat_over_ranks(ctx, decomp);
    if (d.min != d.max)
        kc_fail(ctx, 2, "ranks see different decomposition thread counts (%ld..%ld)",
                (long)d.min, (long)d.max);
    return decomp;
}

/* The box of `decomp` threads must fit 32-bit indices, and all ranks of a
 * node must fit in 90% of its memory. */
static void check_size(kc_ctx *ctx, const options *o, int decomp, const int f[3],
                       const int pd[3]) {
    const double nxd = (double)f[0] * o->n, nyd = (double)f[1] * o->n, nzd = (double)f[2] * o->n;
    const double rows_d = nxd * nyd * nzd;
    const double ghost_d = (nxd + 2) * (nyd + 2) * (nzd + 2);
    if (27.0 * rows_d > (double)INT_MAX || ghost_d > (double)INT_MAX)
        kc_fail(ctx, 2,
                "--n %ld is too large: a box of %.0f x %.0f x %.0f (%d threads) has %.3g rows "
                "and up to %.3g nonzeros per rank, beyond the 32-bit index range (%d)",
                o->n, nxd, nyd, nzd, decomp, rows_d, 27.0 * rows_d, INT_MAX);
    if ((double)pd[0] * nxd * (double)pd[1] * nyd * (double)pd[2] * nzd > 1e18)
        kc_fail(ctx, 2, "--n %ld gives a global grid too large to address", o->n);
    const double need = 27.0 * rows_d * 12.0 + rows_d * (4 + 4 + 8 + 8) + ghost_d * 8.0;
    char what[64], box[128];
    snprintf(what, sizeof what, "--n %ld", o->n);
    snprintf(box, sizeof box, "for a box of %.0f x %.0f x %.0f", nxd, nyd, nzd);
    kc_need_node_memory(ctx, need, what, box, "");
}

/* Box (a*N) x (b*N) x (c*N) of (a,b,c) = MPI_Dims_create(decomp, 3) sorted
 * descending; ranks on the grid MPI_Dims_create(nranks, 3). */
static void set_geometry(kc_ctx *ctx, const options *o, int decomp, problem *P) {
    int f[3] = {0, 0, 0}, pd[3] = {0, 0, 0};
    MPI_Dims_create(decomp, 3, f);
    MPI_Dims_create(ctx->nranks, 3, pd);
    for (int a = 0; a < 3; ++a) /* sort descending (MPI already does; be sure) */
        for (int b = a + 1; b < 3; ++b)
            if (f[b] > f[a]) {
                int t = f[a];
                f[a] = f[b];
                f[b] = t;
            }
    check_size(ctx, o, decomp, f, pd);
    P->decomp = decomp;
    P->nx = (int)(f[0] * o->n);
    P->ny = (int)(f[1] * o->n);
    P->nz = (int)(f[2] * o->n);
    P->px = pd[0];
    P->py = pd[1];
    P->pz = pd[2];
    P->cz = ctx->rank % P->pz;
    P->cy = (ctx->rank / P->pz) % P->py;
    P->cx = ctx->rank / (P->pz * P->py);
    P->gx0 = (long long)P->cx * P->nx;
    P->gy0 = (long long)P->cy * P->ny;
    P->gz0 = (long long)P->cz * P->nz;
    P->Gx = (long long)P->px * P->nx;
    P->Gy = (long long)P->py * P->ny;
    P->Gz = (long long)P->pz * P->nz;
    P->rows = P->nx * P->ny * P->nz;
    P->funneled = o->mode == KC_MODE_FUNNELED;
}

/* ---- CSR assembly -------------------------------------------------------- */

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

static inline int gidx(const problem *P, int i, int j, int k) {
    return ((k + 1) * (P->ny + 2) + (j + 1)) * (P->nx + 2) + (i + 1);
}

/* Does the point (i,j,k) read a ghost value that a neighbour rank sends? */
static int is_boundary(const problem *P, int i, int j, int k) {
    /* KERNEL_FAULT=spmv_face_as_interior: the upper x face counts as interior */
    const int upper_x = P->cx < P->px - 1 && !KC_FAULT("spmv_face_as_interior");
    return (i == 0 && P->cx > 0) || (i == P->nx - 1 && upper_x) ||
           (j == 0 && P->cy > 0) || (j == P->ny - 1 && P->cy < P->py - 1) ||
           (k == 0 && P->cz > 0) || (k == P->nz - 1 && P->cz < P->pz - 1);
}

static inline int valid_offsets(long long g, long long G) { return 1 + (g > 0) + (g < G - 1); }

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

/* Row order (all modes): the interior rows (no ghost reads) first. */
static void order_rows(kc_ctx *ctx, problem *P) {
    P->order = kc_malloc(ctx, (size_t)P->rows * sizeof(int));
    int m = 0;
    for (int pass = 0; pass < 2; ++pass) {
        for (int pt = 0; pt < P->rows; ++pt) {
            int i = pt % P->nx, j = (pt / P->nx) % P->ny, k = pt / (P->nx * P->ny);
            if (is_boundary(P, i, j, k) == pass) P->order[m++] = pt;
        }
        if (pass == 0) P->nint = m;
    }
}

/* Row pointers, rows and x, first-touched by the threads that compute them:
 * funneled with the workers' interior chunks, the other modes with the two
 * static schedules of the interior and boundary loops. */
static void first_touch(problem *P, const int *scan) {
#pragma omp parallel
    {
        const int tid = kc_thread_num(), nth = kc_num_threads();
        if (P->funneled) {
            int lo, hi;
            interior_chunk(P->nint, tid, nth, &lo, &hi);
            for (int p = lo; p < hi; ++p) P->rp[p + 1] = scan[p + 1];
#pragma omp for schedule(static)
            for (int p = P->nint; p < P->rows; ++p) P->rp[p + 1] = scan[p + 1];
            /* implicit barrier: rp complete before rows are filled */
            for (int p = lo; p < hi; ++p) fill_row(P, p);
#pragma omp for schedule(static)
            for (int p = P->nint; p < P->rows; ++p) fill_row(P, p);
        } else {
#pragma omp for schedule(static) nowait
            for (int p = 0; p < P->nint; ++p) P->rp[p + 1] = scan[p + 1];
#pragma omp for schedule(static)
            for (int p = P->nint; p < P->rows; ++p) P->rp[p + 1] = scan[p + 1];
            /* implicit barrier: rp complete before rows are filled */
#pragma omp for schedule(static) nowait
            for (int p = 0; p < P->nint; ++p) fill_row(P, p);
#pragma omp for schedule(static)
            for (int p = P->nint; p < P->rows; ++p) fill_row(P, p);
        }
        /* x: ghost layer zero, owned points from the global coordinates */
#pragma omp for schedule(static)
        for (int kk = 0; kk < P->nz + 2; ++kk)
            for (int jj = 0; jj < P->ny + 2; ++jj)
                for (int ii = 0; ii < P->nx + 2; ++ii) {
                    int i = ii - 1, j = jj - 1, k = kk - 1;
                    int own = i >= 0 && i < P->nx && j >= 0 && j < P->ny && k >= 0 && k < P->nz;
                    P->x[(kk * (P->ny + 2) + jj) * (P->nx + 2) + ii] =
                        own ? xfun(P->gx0 + i, P->gy0 + j, P->gz0 + k) : 0.0;
                }
    }
}

static void assemble(kc_ctx *ctx, problem *P) {
    const int nghost = (P->nx + 2) * (P->ny + 2) * (P->nz + 2);
    order_rows(ctx, P);
    /* row pointers: prefix sum in a scratch array, copied with first touch */
    int *scan = kc_malloc(ctx, ((size_t)P->rows + 1) * sizeof(int));
    scan[0] = 0;
    for (int p = 0; p < P->rows; ++p) scan[p + 1] = scan[p] + row_nnz(P, P->order[p]);
    P->nnz = scan[P->rows];
    P->rp = big_malloc(ctx, ((size_t)P->rows + 1) * sizeof(int));
    P->col = big_malloc(ctx, (size_t)P->nnz * sizeof(int));
    P->val = big_malloc(ctx, (size_t)P->nnz * sizeof(double));
    P->y = big_malloc(ctx, (size_t)P->rows * sizeof(double));
    P->x = big_malloc(ctx, (size_t)nghost * sizeof(double));
    P->rp[0] = 0;
    first_touch(P, scan);
    free(scan);
}

/* ---- the halo ------------------------------------------------------------ */

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

/* The cells sent towards (recv: received from) direction d = 9 (dz+1) + 3 (dy+1)
 * + (dx+1) into list (NULL: only counted); returns their number. */
static int fill_list(const problem *P, int *list, int d, int recv) {
    int ilo, ihi, jlo, jhi, klo, khi, m = 0;
    void (*range)(int, int, int *, int *) = recv ? recv_range : send_range;
    range(d % 3 - 1, P->nx, &ilo, &ihi);
    range((d / 3) % 3 - 1, P->ny, &jlo, &jhi);
    range(d / 9 - 1, P->nz, &klo, &khi);
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
        P->nsend += fill_list(P, NULL, d, 0);
        P->nrecv += fill_list(P, NULL, d, 1);
    }
    P->send_off[P->nnb] = P->nsend;
    P->recv_off[P->nnb] = P->nrecv;
    P->send_idx = kc_malloc(ctx, (size_t)P->nsend * sizeof(int));
    P->recv_idx = kc_malloc(ctx, (size_t)P->nrecv * sizeof(int));
    P->sendbuf = kc_malloc(ctx, (size_t)P->nsend * sizeof(double));
    P->recvbuf = kc_malloc(ctx, (size_t)P->nrecv * sizeof(double));
    for (int b = 0; b < P->nnb; ++b) {
        fill_list(P, P->send_idx + P->send_off[b], P->nb_dir[b], 0);
        fill_list(P, P->recv_idx + P->recv_off[b], P->nb_dir[b], 1);
    }
    /* first touch of the buffers by the threads that pack them */
#pragma omp parallel for schedule(static)
    for (int q = 0; q < P->nsend; ++q) P->sendbuf[q] = 0.0;
    for (int q = 0; q < P->nrecv; ++q) P->recvbuf[q] = 0.0;
}

void spmv_setup(kc_ctx *ctx, const options *o, int decomp, problem *P) {
    memset(P, 0, sizeof *P);
    set_geometry(ctx, o, decomp, P);
    assemble(ctx, P);
    setup_halo(ctx, P);
}

void spmv_free(problem *P) {
    KC_FREE_ALL(P->order, P->rp, P->col, P->val, P->x, P->y, P->send_idx, P->recv_idx,
                P->sendbuf, P->recvbuf);
    memset(P, 0, sizeof *P);
}
