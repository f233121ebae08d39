/* md verification: the checks every run makes, and the brute-force O(N^2)
 * check of forces, energy and virial (--check-forces). */
#include "md.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Brute-force O(N^2) minimum-image forces, energy and virial of the N atoms
 * at xg into fb, *eb and *wb. */
static void brute_force(long N, const double *xg, double box, double rc2, double ecut,
                        double *fb, double *eb, double *wb) {
    memset(fb, 0, (size_t)N * 3 * sizeof(double));
    *eb = *wb = 0.0;
    for (long i = 0; i < N; ++i)
        for (long j = i + 1; j < N; ++j) {
            double dr[3], r2 = 0.0;
            for (int k = 0; k < 3; ++k) {
                double dk = xg[3 * i + k] - xg[3 * j + k];
                dk -= box * nearbyint(dk / box);
                dr[k] = dk;
                r2 += dk * dk;
            }
            if (r2 >= rc2) continue;
            const double fpair = lj_pair(r2, ecut, eb);
            for (int k = 0; k < 3; ++k) {
                fb[3 * i + k] += dr[k] * fpair;
                fb[3 * j + k] -= dr[k] * fpair;
            }
            *wb += fpair * r2;
        }
}

/* Rank 0's side of check_forces: the gathered (x, f, id) records of `total`
 * doubles against brute force; prints the figures, returns the largest
 * relative error (infinite if the ids are not every atom once). */
static double compare_brute(const md_sys *s, long N, const double *all, long total, double epot,
                            double vir) {
    const kc_ctx *ctx = s->ctx;
    double *xg = kc_malloc(ctx, (size_t)N * 3 * sizeof(double));
    double *fc = kc_malloc(ctx, (size_t)N * 3 * sizeof(double));
    double *fb = kc_malloc(ctx, (size_t)N * 3 * sizeof(double));
    char *seen = calloc((size_t)N, 1);
    if (!seen) kc_abort(ctx, "out of memory");
    double worst = INFINITY;
    int bad_ids = total != 7 * N;
    for (long r = 0; r < total / 7; ++r) {
        const double *p = all + 7 * r;
        const long g = (long)p[6];
        if (g < 0 || g >= N || seen[g]) {
            bad_ids = 1;
            continue;
        }
        seen[g] = 1;
        memcpy(xg + 3 * g, p, 3 * sizeof(double));
        memcpy(fc + 3 * g, p + 3, 3 * sizeof(double));
    }
    if (!bad_ids) {
        double eb = 0.0, wb = 0.0;
        brute_force(N, xg, s->box, s->rc2, s->ecut, fb, &eb, &wb);
        double fbig = 0.0, dmax = 0.0;
        for (long k = 0; k < 3 * N; ++k) {
            fbig = fbig > fabs(fb[k]) ? fbig : fabs(fb[k]);
            const double dk = fabs(fb[k] - fc[k]);
            dmax = dmax > dk ? dmax : dk;
        }
        const double ef = dmax / (fbig > 0.0 ? fbig : 1.0);
        const double ee = fabs(epot - eb) / (fabs(eb) > 0.0 ? fabs(eb) : 1.0);
        const double ew = fabs(vir - wb) / (fabs(wb) > 0.0 ? fabs(wb) : 1.0);
        worst = fmax(ef, fmax(ee, ew));
        if (!(ef == ef && ee == ee && ew == ew)) worst = INFINITY;
        printf("md: check-forces: %ld atoms, max |f - f_brute| / max |f_brute| = %.3e "
               "(max |f_brute| = %.6g), energy rel. err %.3e, virial rel. err %.3e\n",
               N, ef, fbig, ee, ew);
    }
    KC_FREE_ALL(xg, fc, fb, seen);
    return worst;
}

/* Brute-force O(N^2) minimum-image check of forces, energy and virial on rank
 * 0 (owned atoms of every rank gathered by global id).  Returns the largest
 * relative error on every rank. */
static double check_forces(md_sys *s, long natoms, double epot, double vir) {
    const kc_ctx *ctx = s->ctx;
    const int n = s->nlocal;
    double *pack = kc_malloc(ctx, (size_t)(n ? n : 1) * 7 * sizeof(double));
    for (int i = 0; i < n; ++i) {
        memcpy(pack + 7 * i, s->x + 3 * i, 3 * sizeof(double));
        memcpy(pack + 7 * i + 3, s->f + 3 * i, 3 * sizeof(double));
        pack[7 * i + 6] = (double)s->id[i];
    }
    int *counts = NULL, *displs = NULL;
    const long total = kc_gather_counts(ctx, s->cart, 7 * n, &counts, &displs);
    double *all = NULL;
    if (ctx->rank == 0) all = kc_malloc(ctx, (size_t)(total ? total : 1) * sizeof(double));
    MPI_Gatherv(pack, 7 * n, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, s->cart);
    double worst = 0.0;
    if (ctx->rank == 0) worst = compare_brute(s, natoms, all, total, epot, vir);
    MPI_Bcast(&worst, 1, MPI_DOUBLE, 0, s->cart);
    KC_FREE_ALL(pack, counts, displs, all);
    return worst;
}

void md_verify(md_sys *s, const options *o, long natoms, double e0, const run_t *r, verdict *v) {
    const kc_ctx *ctx = s->ctx;
    const double N = (double)natoms, V = s->box * s->box * s->box;
    if (KC_FAULT_INJECTED && ctx->rank == 0 && s->nlocal > 0) s->v[0] += 1.0;
    double pm[3], glob[3];
    md_momentum(s, pm);
    v->count = kc_sum_over_ranks(ctx, s->nlocal);
    v->lost = kc_sum_over_ranks(ctx, s->lost);
    md_global_sums(s, md_kinetic(s), r->epot, r->vir, glob);
    v->end = md_thermo_of(glob, N, V);
    v->drift = fabs(v->end.e - e0) / fabs(e0);
    v->pmax = 0.0; /* the largest |P_d|/N; NaN if any is NaN (fmax would drop it) */
    for (int d = 0; d < 3; ++d) {
        const double p = fabs(pm[d]) / N;
        v->pmax = isnan(p) || isnan(v->pmax) ? NAN : fmax(v->pmax, p);
    }
    v->ok_count = v->count == natoms;
    v->ok_mom = v->pmax < 1e-10;
    v->ok_drift = v->drift < o->drift_tol;
    v->ok_lost = v->lost == 0;
    v->force_err = 0.0;
    v->ok_forces = 1;
    if (o->check_forces) {
        md_migrate(s);
        md_borders(s);
        md_build_neighbours(s);
        double ep = 0.0, vr = 0.0;
        md_compute_forces(s, &ep, &vr);
        if (KC_FAULT_INJECTED && ctx->rank == 0 && s->nlocal > 0) s->f[0] += 1.0;
        double l2[2] = {ep, vr}, g2[2];
        MPI_Allreduce(l2, g2, 2, MPI_DOUBLE, MPI_SUM, s->cart);
        v->force_err = check_forces(s, natoms, g2[0], g2[1]);
        v->ok_forces = v->force_err <= 1e-10;
        v->lost = kc_sum_over_ranks(ctx, s->lost);
    }
    v->verified = v->ok_count && v->ok_mom && v->ok_drift && v->ok_lost && v->ok_forces;
}
