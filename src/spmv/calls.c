/* spmv calls: y = A x with the halo exchange, in each mode, and the timed loop. */
#define _GNU_SOURCE
#include "spmv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Software prefetch distance (elements of val/col) of the interior rows:
 * ~10 rows ahead.  Measured on the 2-core VM (n=128, far beyond the caches):
 * hardware prefetch alone gave ~0.9 of stream triad, this ~1.05. */
#ifndef PF_DIST
#define PF_DIST 256
#endif

double spmv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The funneled mode's static split of the interior rows over the worker
 * threads 1..T-1 (the master communicates); with one thread the master does
 * them after communicating. */
void interior_chunk(int nint, int tid, int nth, int *lo, int *hi) {
    if (nth == 1) kc_block(nint, 0, 1, lo, hi);
    else if (tid == 0) *lo = *hi = 0;
    else kc_block(nint, tid - 1, nth - 1, lo, hi);
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

/* Post receives and sends, wait, unpack: called by one thread only.  A
 * message sent towards direction d carries tag d; the receiver expects from
 * its neighbour in direction e the tag of the opposite direction 26 - e. */
static void exchange(const kc_ctx *ctx, problem *P) {
    if (KC_FAULT("spmv_halo_once") && P->exchanges++ > 0) return; /* stale ghosts */
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

/* What one call reads and writes of P: the CSR, x, y, the send side and the
 * counts.  Plain (not restrict) pointers: exchange() writes x through P. */
typedef struct {
    const int *rp, *col, *sidx;
    const double *val, *x;
    double *y, *sbuf;
    int rows, nint, nsend, lim;
} call_view;

static inline call_view view_of(const problem *P) {
    return (call_view){.rp = P->rp, .col = P->col, .sidx = P->send_idx, .val = P->val,
                       .x = P->x, .y = P->y, .sbuf = P->sendbuf, .rows = P->rows,
                       .nint = P->nint, .nsend = P->nsend, .lim = P->nnz};
}

/* mpi, masteronly, serial: pack, exchange, then the interior and boundary rows. */
static void call_masteronly(kc_ctx *ctx, problem *P, call_times *ct) {
    const call_view v = view_of(P);
    double t0 = spmv_now();
#pragma omp parallel for schedule(static)
    for (int q = 0; q < v.nsend; ++q) v.sbuf[q] = v.x[v.sidx[q]];
    double t1 = spmv_now();
    exchange(ctx, P);
    double t2 = spmv_now(), tb = t2;
#pragma omp parallel
    {
        kc_record_cpu(ctx);
#pragma omp for schedule(static)
        for (int p = 0; p < v.nint; ++p) spmv_row(v.rp, v.col, v.val, v.x, v.y, p, v.lim);
        /* implicit barrier: all interior rows done */
#pragma omp master
        tb = spmv_now();
#pragma omp for schedule(static) nowait
        for (int p = v.nint; p < v.rows; ++p) spmv_row(v.rp, v.col, v.val, v.x, v.y, p, v.lim);
    }
    double t3 = spmv_now();
    ct->t[PH_PACK] = t1 - t0;
    ct->t[PH_COMM] = t2 - t1;
    ct->t[PH_INT] = tb - t2;
    ct->t[PH_BND] = t3 - tb;
    ct->t[PH_COMP] = ct->t[PH_INT] + ct->t[PH_BND];
    ct->t[PH_OVL] = 0.0;
}

/* funneled: all threads pack; the master exchanges while the workers compute
 * the interior rows; then all compute the boundary rows.  thr_t: one padded
 * slot per thread for its interior time. */
#define PAD 8 /* one cache line per thread */
static void call_funneled(kc_ctx *ctx, problem *P, double *thr_t, call_times *ct) {
    const call_view v = view_of(P);
    double t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0;
    int team = 1;
    const int nthr = ctx->threads;
    (void)nthr; /* read by the pragma only: unused in a pure MPI build */
    /* at most the team kc_start measured (thr_t has a slot for each of them):
     * OMP_DYNAMIC may give a later region more threads than the first */
#pragma omp parallel num_threads(nthr)
    {
        const int tid = kc_thread_num(), nth = kc_num_threads();
        kc_record_cpu(ctx);
#pragma omp master
        {
            team = nth;
            t0 = spmv_now();
        }
#pragma omp for schedule(static) nowait
        for (int q = 0; q < v.nsend; ++q) v.sbuf[q] = v.x[v.sidx[q]];
        /* packing complete before the master sends */
#pragma omp barrier
#pragma omp master
        {
            t1 = spmv_now();
            exchange(ctx, P);
            t2 = spmv_now();
        }
        {   /* interior rows: no ghost value needed, overlap the exchange */
            int lo, hi;
            interior_chunk(v.nint, tid, nth, &lo, &hi);
            double a = spmv_now();
            for (int p = lo; p < hi; ++p) spmv_row(v.rp, v.col, v.val, v.x, v.y, p, v.lim);
            thr_t[tid * PAD] = lo < hi ? spmv_now() - a : 0.0;
        }
        /* ghost values unpacked (and interior done) before boundary rows */
#pragma omp barrier
#pragma omp master
        t3 = spmv_now();
#pragma omp for schedule(static)
        for (int p = v.nint; p < v.rows; ++p) spmv_row(v.rp, v.col, v.val, v.x, v.y, p, v.lim);
#pragma omp master
        t4 = spmv_now();
    }
    double ovl = 0.0;
    for (int t = 0; t < team; ++t)
        if (thr_t[t * PAD] > ovl) ovl = thr_t[t * PAD];
    ct->t[PH_PACK] = t1 - t0;
    ct->t[PH_COMM] = t2 - t1;
    ct->t[PH_OVL] = ovl;
    ct->t[PH_INT] = ovl;
    ct->t[PH_BND] = t4 - t3;
    ct->t[PH_COMP] = ovl + (t4 - t3);
}

static void one_call(kc_ctx *ctx, problem *P, double *thr_t, call_times *ct) {
    if (P->funneled) call_funneled(ctx, P, thr_t, ct);
    else call_masteronly(ctx, P, ct);
}

/* One batch of --min-time's calibration (kc_min_time_calibrate): n calls,
 * their time on the slowest rank. */
typedef struct {
    problem *P;
    double *thr_t;
} calib_batch;

static double calls_batch(kc_ctx *ctx, void *arg, long n) {
    calib_batch *b = arg;
    call_times ct;
    const double t0 = spmv_now();
    for (long c = 0; c < n; ++c) one_call(ctx, b->P, b->thr_t, &ct);
    return kc_max_over_ranks(ctx, spmv_now() - t0);
}

/* --min-time: batches of 1, 2, 4, ... calls until one lasts a tenth of
 * min_time on the slowest rank; the count is then max(--iters, the calls
 * that fill min_time at that pace), the same on every rank.  A call slower
 * than min_time/10 (the serial run's node-sized box) ends the calibration
 * after one call, so a small --iters keeps such a run short. */
static long calibrate(kc_ctx *ctx, const options *o, problem *P, double *thr_t, timing *tm) {
    calib_batch b = {P, thr_t};
    const kc_calibration cal = kc_min_time_calibrate(ctx, o->iters, o->min_time, SPMV_MAX_ITERS,
                                                     calls_batch, &b);
    tm->calib_calls = cal.calib_calls;
    tm->calib_pace = cal.last_s / (double)cal.last_n;
    return cal.count;
}

/* After the timed loop (untimed): poison the whole ghost layer of x, the send
 * and the receive buffer with NaN and make one more call of the same mode; its
 * y is what spmv_rel_error verifies.  x never changes, so without the poison
 * the ghosts and buffers would keep the right values of the first exchange and
 * only that one would really be checked: a call that skips or races its
 * exchange (a packing or unpacking barrier missing) now reads NaN. */
static void verification_call(kc_ctx *ctx, problem *P, double *thr_t) {
    const int gx = P->nx + 2, gy = P->ny + 2, gz = P->nz + 2;
    for (int kk = 0; kk < gz; ++kk)
        for (int jj = 0; jj < gy; ++jj)
            for (int ii = 0; ii < gx; ++ii)
                if (ii == 0 || jj == 0 || kk == 0 || ii == gx - 1 || jj == gy - 1 || kk == gz - 1)
                    P->x[((size_t)kk * gy + jj) * gx + ii] = NAN;
    for (int q = 0; q < P->nsend; ++q) P->sendbuf[q] = NAN;
    for (int q = 0; q < P->nrecv; ++q) P->recvbuf[q] = NAN;
    for (int p = 0; p < P->rows; ++p) P->y[p] = NAN;
    call_times ct;
    one_call(ctx, P, thr_t, &ct);
}

void spmv_run(kc_ctx *ctx, const options *o, problem *P, timing *tm) {
    memset(tm, 0, sizeof *tm);
    double *thr_t = kc_malloc(ctx, (size_t)ctx->threads * PAD * sizeof(double));
    for (int t = 0; t < ctx->threads * PAD; ++t) thr_t[t] = 0.0;
    call_times ct;
    for (long it = 0; it < o->warmup; ++it) one_call(ctx, P, thr_t, &ct);
    tm->calls = o->min_time > 0.0 ? calibrate(ctx, o, P, thr_t, tm) : o->iters;
    tm->per_call = kc_malloc(ctx, (size_t)tm->calls * sizeof *tm->per_call);
    kc_calls calls;
    kc_calls_init(ctx, &calls, tm->calls);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t_loop = spmv_now();
    kc_calls_start(&calls);
    for (long it = 0; it < tm->calls; ++it) {
        one_call(ctx, P, thr_t, &tm->per_call[it]);
        kc_calls_mark(&calls);
    }
    tm->wall = spmv_now() - t_loop;
    tm->call = kc_calls_end(ctx, &calls);
    for (long it = 0; it < tm->calls; ++it)
        for (int k = 0; k < PH_COUNT; ++k) tm->sum[k] += tm->per_call[it].t[k];
    verification_call(ctx, P, thr_t);
    free(thr_t);
}
