/* spmv verification: y of the last call against a stencil recomputation. */
#define _GNU_SOURCE
#include "spmv.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>

/* max|y - yref| / max|yref| over all ranks, yref computed from the global
 * coordinates without the CSR matrix and without the halo. */
double spmv_rel_error(const kc_ctx *ctx, problem *P) {
    if (KC_FAULT_INJECTED && ctx->rank == 0) P->y[0] += 1.0;
    double max_err = 0.0, max_ref = 0.0;
#pragma omp parallel for schedule(static) reduction(max : max_err, max_ref)
    for (int p = 0; p < P->rows; ++p) {
        int pt = P->order[p];
        long long gx = P->gx0 + pt % P->nx, gy = P->gy0 + (pt / P->nx) % P->ny,
                  gz = P->gz0 + pt / (P->nx * P->ny);
        double ref = 0.0;
        for (int dz = -1; dz <= 1; ++dz)
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) {
                    long long qx = gx + dx, qy = gy + dy, qz = gz + dz;
                    if (qx < 0 || qy < 0 || qz < 0 || qx >= P->Gx || qy >= P->Gy || qz >= P->Gz)
                        continue; /* Dirichlet: zero outside the domain */
                    double c = (dx == 0 && dy == 0 && dz == 0) ? 26.0 : -1.0;
                    ref += c * xfun(qx, qy, qz);
                }
        double e = fabs(P->y[p] - ref);
        if (!(e <= max_err)) max_err = isnan(e) ? INFINITY : e;
        if (fabs(ref) > max_ref) max_ref = fabs(ref);
    }
    double lred[2] = {max_err, max_ref}, gred[2] = {0, 0};
    MPI_Allreduce(lred, gred, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return gred[0] / (gred[1] > 0 ? gred[1] : 1.0);
}

/* Entries of the interior rows (computed, in funneled, while the halo is still
 * in flight) that read a ghost value a neighbour sends, summed over ranks:
 * must be 0, whatever the timing of a run lets slip through. */
long spmv_interior_halo_reads(const kc_ctx *ctx, const problem *P) {
    const size_t nghost = (size_t)(P->nx + 2) * (size_t)(P->ny + 2) * (size_t)(P->nz + 2);
    unsigned char *received = calloc(nghost, 1);
    if (!received) kc_abort(ctx, "out of memory");
    for (int q = 0; q < P->nrecv; ++q) received[P->recv_idx[q]] = 1;
    long bad = 0;
    for (int e = 0; e < P->rp[P->nint]; ++e) bad += received[P->col[e]];
    free(received);
    return kc_sum_over_ranks(ctx, bad);
}

/* Fewer cores allowed to some rank than it runs threads (e.g. Open MPI binds
 * a 1- or 2-rank job to one core per rank by default)?  Collective. */
int spmv_threads_share_core(const kc_ctx *ctx) {
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
        nth_seen = kc_num_threads();
    }
    const int shared_core = CPU_COUNT(&all) < nth_seen;
    return !kc_all_true(ctx, !shared_core);
}
