/* md set-up: the constants, the rank grid and sub-boxes, the fcc lattice. */
#include "md.h"

#include <stdint.h>
#include <string.h>

/* Deterministic per-atom PRNG (splitmix64); the state is passed around. */
static double uniform01(uint64_t *state) {
    return (double)(kc_mix64(*state += 0x9E3779B97F4A7C15ULL) >> 11) * 0x1.0p-53;
}

/* Sub-box boundary k of dimension d: the same expression on every rank, so
 * a point on a boundary belongs to exactly one rank. */
static double boundary(const md_sys *s, int d, int k) {
    return k >= s->dims[d] ? s->box : s->box * (double)k / (double)s->dims[d];
}

/* The periodic rank grid and this rank's sub-box; a sub-box thinner than
 * cutoff+skin in some dimension fails the run (status 2). */
static void setup_decomposition(md_sys *s) {
    const kc_ctx *ctx = s->ctx;
    int periods[3] = {1, 1, 1};
    MPI_Dims_create(ctx->nranks, 3, s->dims);
    for (int d = 0; d < 3; ++d) {
        const double side = s->box / s->dims[d];
        if (side < s->rn)
            kc_fail(ctx, 2,
                    "box side %g split %d ways in dimension %d (ranks %dx%dx%d) gives sub-boxes "
                    "of %g < cutoff+skin = %g; use fewer ranks or a larger --cells-per-side",
                    s->box, s->dims[d], d, s->dims[0], s->dims[1], s->dims[2], side, s->rn);
    }
    MPI_Cart_create(MPI_COMM_WORLD, 3, s->dims, periods, 0, &s->cart);
    int crank = 0;
    MPI_Comm_rank(s->cart, &crank);
    MPI_Cart_coords(s->cart, crank, 3, s->coords);
    for (int d = 0; d < 3; ++d) {
        MPI_Cart_shift(s->cart, d, 1, &s->lower[d], &s->upper[d]);
        s->lo[d] = boundary(s, d, s->coords[d]);
        s->hi[d] = boundary(s, d, s->coords[d] + 1);
    }
}

/* fcc lattice, owned sites only; velocities from the per-atom PRNG, zero total
 * momentum, scaled to temperature T (3N-3 degrees of freedom, as LAMMPS). */
static void create_atoms(md_sys *s, const options *o) {
    static const double basis[4][3] = {{0.0, 0.0, 0.0}, {0.5, 0.5, 0.0}, {0.5, 0.0, 0.5}, {0.0, 0.5, 0.5}};
    const long L = o->L;
    const double a = s->box / (double)L;
    long range[3][2];
    for (int d = 0; d < 3; ++d) {
        long l0 = (long)floor(s->lo[d] / a) - 1, l1 = (long)ceil(s->hi[d] / a) + 1;
        range[d][0] = l0 < 0 ? 0 : l0;
        range[d][1] = l1 > L - 1 ? L - 1 : l1;
    }
    s->nlocal = 0;
    for (long iz = range[2][0]; iz <= range[2][1]; ++iz)
        for (long iy = range[1][0]; iy <= range[1][1]; ++iy)
            for (long ix = range[0][0]; ix <= range[0][1]; ++ix)
                for (int b = 0; b < 4; ++b) {
                    const double p[3] = {((double)ix + basis[b][0]) * a, ((double)iy + basis[b][1]) * a,
                                         ((double)iz + basis[b][2]) * a};
                    if (!md_inside(s, p)) continue;
                    md_ensure_atoms(s, s->nlocal + 1);
                    const int i = s->nlocal++;
                    s->nall = s->nlocal;
                    const long gid = 4 * (ix + L * (iy + L * iz)) + b;
                    s->id[i] = gid;
                    uint64_t state = 0x5DEECE66DULL ^ ((uint64_t)gid * 0xD1B54A32D192ED03ULL);
                    for (int d = 0; d < 3; ++d) {
                        s->x[3 * i + d] = p[d];
                        s->v[3 * i + d] = uniform01(&state) - 0.5;
                    }
                }
    s->nall = s->nlocal;
    const double natoms = 4.0 * (double)L * (double)L * (double)L;
    double pm[3];
    md_momentum(s, pm);
    for (int i = 0; i < s->nlocal; ++i)
        for (int d = 0; d < 3; ++d) s->v[3 * i + d] -= pm[d] / natoms;
    double ke_loc = md_kinetic(s), ke = 0.0;
    MPI_Allreduce(&ke_loc, &ke, 1, MPI_DOUBLE, MPI_SUM, s->cart);
    const double tcur = 2.0 * ke / (3.0 * natoms - 3.0);
    const double scale = tcur > 0.0 ? sqrt(o->temp / tcur) : 0.0;
    for (int i = 0; i < 3 * s->nlocal; ++i) s->v[i] *= scale;
}

/* The system of the options: box, cutoffs, the rank grid, the binning grid,
 * the arrays, and the owned atoms of the fcc start.  Every rank must run the
 * same threads (else status 2, collective). */
void md_setup(md_sys *s, const options *o, kc_ctx *ctx) {
    /* an MPMD launch of several OMP_NUM_THREADS: the RESULT line reported rank
     * 0's threads for every rank, and equal sub-boxes wait for the fewest */
    kc_need_same_threads(ctx, 0, "every rank owns an equal sub-box and the RESULT line "
                                 "reports one thread count");
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->full = o->full_list;
    s->box = (double)o->L * cbrt(4.0 / o->density);
    s->rc2 = o->cutoff * o->cutoff;
    /* KERNEL_FAULT=md_list_no_skin: lists and ghosts to the cutoff only */
    s->rn = KC_FAULT("md_list_no_skin") ? o->cutoff : o->cutoff + o->skin;
    s->rn2 = s->rn * s->rn;
    const double r6i = 1.0 / (s->rc2 * s->rc2 * s->rc2);
    s->ecut = 4.0 * r6i * (r6i - 1.0);
    setup_decomposition(s);
    md_alloc_atoms(s, o); /* first: it refuses a system too large before anything is allocated */
    md_setup_grid(s, o);
    create_atoms(s, o);
}
