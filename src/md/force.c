/* md forces: Lennard-Jones forces on the owned atoms from the Verlet lists,
 * with the potential energy and virial of this rank's share. */
#include "md.h"

/* The neighbours js[0..n) of atom i (at xi, yi, zi) inside the cutoff, appended
 * from slot m to the separations bx/by/bz and, where bj is not NULL, their
 * indices to bj; branch-free (every neighbour is written, only those inside
 * move m on).  Returns the new m. */
static inline __attribute__((always_inline)) int
within_cutoff(const double *restrict x, const int *restrict js, int n, double xi, double yi,
              double zi, double rc2, double *restrict bx, double *restrict by,
              double *restrict bz, int *restrict bj, int m) {
    for (int k = 0; k < n; ++k) {
        const int j = js[k];
        const double dx = xi - x[3 * j], dy = yi - x[3 * j + 1], dz = zi - x[3 * j + 2];
        bx[m] = dx;
        by[m] = dy;
        bz[m] = dz;
        if (bj) bj[m] = j;
        m += dx * dx + dy * dy + dz * dz < rc2;
    }
    return m;
}

/* The forces of owned atom i from its neighbour row: the pairs within the
 * cutoff are compacted into the thread's buffers `buf` ([6][maxn]: separations
 * and reaction forces) and `bj` by scalar loads (cheaper than vector gathers;
 * branch-free), two-sided [0, m2), one-sided [m2, m); a vectorised pass
 * computes them and a scalar pass adds the reaction forces to fl[j] (different
 * j of a row never alias).  Returns the row's energy and virial shares. */
static inline __attribute__((always_inline)) void
force_row(int i, const double *restrict x, const int *restrict row, int n2, int n1, int maxn,
          double rc2, double ecut, int full, double wghost, double *restrict fl,
          double *restrict buf, int *restrict bj, double *e_row, double *w_row) {
    double *restrict tx = buf;
    double *restrict ty = tx + maxn, *restrict tz = ty + maxn;
    double *restrict bx = tz + maxn, *restrict by = bx + maxn, *restrict bz = by + maxn;
    const double xi = x[3 * i], yi = x[3 * i + 1], zi = x[3 * i + 2];
    double fx = 0.0, fy = 0.0, fz = 0.0, e2 = 0.0, w2 = 0.0, e1 = 0.0, w1 = 0.0;
    const int m2 = within_cutoff(x, row, n2, xi, yi, zi, rc2, bx, by, bz, bj, 0);
    const int m = within_cutoff(x, row + maxn - n1, n1, xi, yi, zi, rc2, bx, by, bz, NULL, m2);
#pragma omp simd reduction(+ : fx, fy, fz, e2, w2)
    for (int k = 0; k < m2; ++k) {
        const double dx = bx[k], dy = by[k], dz = bz[k];
        const double r2 = dx * dx + dy * dy + dz * dz;
        const double fpair = lj_pair(r2, ecut, &e2);
        const double ddx = dx * fpair, ddy = dy * fpair, ddz = dz * fpair;
        fx += ddx;
        fy += ddy;
        fz += ddz;
        tx[k] = ddx;
        ty[k] = ddy;
        tz[k] = ddz;
        w2 += fpair * r2;
    }
    for (int k = 0; k < m2; ++k) {
        const int j = bj[k];
        fl[3 * j] -= tx[k];
        fl[3 * j + 1] -= ty[k];
        fl[3 * j + 2] -= tz[k];
    }
#pragma omp simd reduction(+ : fx, fy, fz, e1, w1)
    for (int k = m2; k < m; ++k) {
        const double dx = bx[k], dy = by[k], dz = bz[k];
        const double r2 = dx * dx + dy * dy + dz * dz;
        const double fpair = lj_pair(r2, ecut, &e1);
        fx += dx * fpair;
        fy += dy * fpair;
        fz += dz * fpair;
        w1 += fpair * r2;
    }
    if (full) {
        fl[3 * i] = fx;
        fl[3 * i + 1] = fy;
        fl[3 * i + 2] = fz;
    } else {
        fl[3 * i] += fx;
        fl[3 * i + 1] += fy;
        fl[3 * i + 2] += fz;
    }
    *e_row = e2 + 0.5 * e1;
    *w_row = w2 + wghost * w1;
}

/* Half lists with several threads: f of every owned atom is the sum of the
 * thread arrays that hold it (called inside the parallel region, after a
 * barrier; work-shared). */
static void sum_thread_forces(double *f, const double *fthr, const int *trange, size_t stride,
                              int nlocal, int nt) {
#pragma omp for schedule(static)
    for (int i = 0; i < nlocal; ++i) {
        double sx = 0.0, sy = 0.0, sz = 0.0;
        for (int t = 0; t < nt; ++t)
            if (i >= trange[2 * t] && i < trange[2 * t + 1]) {
                const double *ft = fthr + (size_t)t * stride + 3 * (size_t)i;
                sx += ft[0];
                sy += ft[1];
                sz += ft[2];
            }
        f[3 * i] = sx;
        f[3 * i + 1] = sy;
        f[3 * i + 2] = sz;
    }
}

/* Forces on owned atoms; returns the potential energy and virial
 * sum_{pairs} r.f of this rank's share (a pair with a ghost counts half on
 * each of its two sides).  Two-sided neighbours (half list) also receive the
 * reaction force: with several threads into per-thread arrays that are summed
 * afterwards, so no two threads write the same element.  Per atom the ~50 pair
 * terms are summed plainly; the atoms' sums are accumulated with compensation
 * per thread and then OpenMP-reduced. */
void md_compute_forces(md_sys *s, double *epot_out, double *vir_out) {
    const int nlocal = s->nlocal, maxn = s->maxn, nthr = s->ctx->threads;
    const double *restrict x = s->x;
    double *f = s->f, *fthr = s->fthr;
    const int *nbr = s->nbr, *numtwo = s->numtwo, *numone = s->numone, *rowmax = s->rowmax;
    int *trange = s->trange;
    const double rc2 = s->rc2, ecut = s->ecut;
    const size_t stride = 3 * (size_t)s->nbr_rows;
    const int full = s->full;
    const int private_f = !full && nthr > 1;
    /* a pair with a ghost counts half its virial on each side (KERNEL_FAULT=
     * md_virial_double: the whole of it) */
    const double wghost = KC_FAULT("md_virial_double") ? 1.0 : 0.5;
    double *scratch = s->scratch;
    double es = 0.0, ec = 0.0, ws = 0.0, wc = 0.0;
    kc_ctx *ctx = s->ctx;
    /* at most nthr threads (fthr, scratch and trange are sized for them) */
#pragma omp parallel num_threads(nthr) reduction(+ : es, ec, ws, wc)
    {
        kc_record_cpu(ctx);
        const int tid = kc_thread_num(), nt = kc_num_threads();
        double *restrict fl = private_f ? fthr + (size_t)tid * stride : f;
        double *restrict buf = scratch + (size_t)tid * 6 * (size_t)maxn;
        int *restrict bj = s->jscratch + (size_t)tid * (size_t)maxn;
        /* a fixed block of atoms per thread; with half lists a thread's array
         * holds atoms ib .. (largest two-sided neighbour of the block) only,
         * so the zeroing and the final sum touch ~nlocal atoms, not nthr x */
        int ib, ie;
        kc_block(nlocal, tid, nt, &ib, &ie);
        if (!full) {
            int hi = ie;
            if (private_f)
                for (int i = ib; i < ie; ++i) hi = rowmax[i] + 1 > hi ? rowmax[i] + 1 : hi;
            else
                hi = nlocal;
            trange[2 * tid] = ib;
            trange[2 * tid + 1] = hi;
            for (int k = 3 * ib; k < 3 * hi; ++k) fl[k] = 0.0;
        }
        double s1 = 0.0, c1 = 0.0, s2 = 0.0, c2 = 0.0;
        for (int i = ib; i < ie; ++i) {
            double e_row, w_row;
            force_row(i, x, nbr + (size_t)i * maxn, numtwo[i], numone[i], maxn, rc2, ecut, full,
                      wghost, fl, buf, bj, &e_row, &w_row);
            acc(&s1, &c1, e_row);
            acc(&s2, &c2, w_row);
        }
        if (private_f) {
#pragma omp barrier
            /* every thread's array is complete */
            sum_thread_forces(f, fthr, trange, stride, nlocal, nt);
        }
        es += s1;
        ec += c1;
        ws += s2;
        wc += c2;
    }
    *epot_out = es + ec;
    *vir_out = ws + wc;
}
