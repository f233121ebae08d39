/* md neighbour lists: cell binning of owned + ghost atoms, the spatial sort of
 * the owned atoms, and the Verlet lists (r < cutoff + skin). */
#include "md.h"

#include <stdlib.h>
#include <string.h>

/* Bins of side >= rn / NB_SUB over the sub-box extended by rn (the same grid
 * on every call: it depends on the sub-box only); the neighbours of an atom
 * within rn lie in the (2 NB_SUB + 1)^3 bins around its own.  At most 1024
 * bins per side, and at most BINS_PER_ATOM bins per atom expected in the
 * extended sub-box (at least one bin): a dilute gas gets wider bins, so the
 * grid (cleared at every rebuild) stays proportional to the atoms.  The
 * default system (density 0.8442, rc + skin 2.8) has ~0.43 bins per atom. */
enum { NB_SUB = 2, BINS_PER_ATOM = 4 };

void md_setup_grid(md_sys *s, const options *o) {
    int n[3];
    double ext[3], vol = 1.0;
    for (int d = 0; d < 3; ++d) {
        ext[d] = s->hi[d] - s->lo[d] + 2.0 * s->rn;
        vol *= ext[d];
        /* capped in double: a dilute box's count exceeds an int (conversion UB) */
        const double cells = ext[d] * NB_SUB / s->rn;
        n[d] = !(cells >= 1.0) ? 1 : (cells > 1024.0 ? 1024 : (int)cells);
    }
    const double most = fmax(1.0, BINS_PER_ATOM * vol * o->density);
    double bins = (double)n[0] * n[1] * n[2];
    if (bins > most) { /* shrink every side alike (only ever wider bins), then the largest */
        const double f = cbrt(most / bins);
        for (int d = 0; d < 3; ++d) n[d] = n[d] * f >= 1.0 ? (int)(n[d] * f) : 1;
        while ((bins = (double)n[0] * n[1] * n[2]) > most) {
            const int d = n[0] >= n[1] && n[0] >= n[2] ? 0 : (n[1] >= n[2] ? 1 : 2);
            --n[d];
        }
    }
    int ncells = 1;
    for (int d = 0; d < 3; ++d) {
        s->ncell[d] = n[d];
        s->clo[d] = s->lo[d] - s->rn;
        s->cinv[d] = (double)n[d] / ext[d];
        ncells *= n[d];
    }
    s->ncells = ncells;
    s->cells_cap = ncells + 1;
    s->cell_start = kc_malloc(s->ctx, (size_t)s->cells_cap * sizeof(int));
}

/* Bin coordinate of a scaled position u on an axis of n bins, clamped to
 * [0, n-1] before the conversion to int: a diverged run's positions (far out,
 * infinite or NaN) would overflow it (undefined behaviour); NaN gives bin 0. */
static inline int bin_coord(double u, int n) {
    const double b = floor(u);
    return b >= 0.0 ? (b < (double)n ? (int)b : n - 1) : 0;
}

/* Bin of every atom in [first, last) into atom_cell. */
static void bin_atoms(md_sys *s, int first, int last) {
    const double *x = s->x;
    int *atom_cell = s->atom_cell;
    const int n0 = s->ncell[0], n1 = s->ncell[1], n2 = s->ncell[2];
    const double c0 = s->clo[0], c1 = s->clo[1], c2 = s->clo[2];
    const double i0 = s->cinv[0], i1 = s->cinv[1], i2 = s->cinv[2];
#pragma omp parallel for schedule(static)
    for (int i = first; i < last; ++i) {
        const int a = bin_coord((x[3 * i] - c0) * i0, n0);
        const int b = bin_coord((x[3 * i + 1] - c1) * i1, n1);
        const int c = bin_coord((x[3 * i + 2] - c2) * i2, n2);
        atom_cell[i] = a + n0 * (b + n1 * c);
    }
}

/* Counting sort of atoms [0, n) by bin: cell_start[c] .. cell_start[c+1] index
 * cell_atoms, atoms in increasing index order within a bin. */
static void count_sort(md_sys *s, int n) {
    int *start = s->cell_start, *cell_atoms = s->cell_atoms;
    const int *atom_cell = s->atom_cell;
    const int ncells = s->ncells;
    memset(start, 0, (size_t)(ncells + 1) * sizeof(int));
    for (int i = 0; i < n; ++i) ++start[atom_cell[i] + 1];
    for (int c = 0; c < ncells; ++c) start[c + 1] += start[c];
    for (int i = 0; i < n; ++i) cell_atoms[start[atom_cell[i]]++] = i;
    for (int c = ncells; c > 0; --c) start[c] = start[c - 1];
    start[0] = 0;
}

/* Spatial sort of the owned atoms by bin (after migration, before the ghosts
 * are built), so that atoms close in space are close in memory.  Uses f as
 * scratch: forces are dead between move_a and the next md_compute_forces. */
void md_sort_owned(md_sys *s) {
    const int n = s->nlocal;
    bin_atoms(s, 0, n);
    count_sort(s, n);
    const int *perm = s->cell_atoms;
    double *tmp = s->f;
    for (int q = 0; q < 2; ++q) {
        double *a = q == 0 ? s->x : s->v;
        md_gather3(tmp, a, perm, n, -1, 0.0, 0);
        memcpy(a, tmp, (size_t)n * 3 * sizeof(double));
    }
    for (int k = 0; k < n; ++k) s->idtmp[k] = s->id[perm[k]];
    memcpy(s->id, s->idtmp, (size_t)n * sizeof(long));
}

/* Rows for nlocal atoms (and the per-thread force arrays of half lists). */
static void ensure_rows(md_sys *s, int nlocal) {
    if (nlocal <= s->nbr_rows && s->nbr) return;
    s->nbr_rows = nlocal + nlocal / 4 + 16;
    KC_FREE_ALL(s->nbr, s->numtwo, s->numone, s->rowmax, s->fthr);
    s->nbr = kc_malloc(s->ctx, (size_t)s->nbr_rows * (size_t)s->maxn * sizeof(int));
    s->numtwo = kc_malloc(s->ctx, (size_t)s->nbr_rows * sizeof(int));
    s->numone = kc_malloc(s->ctx, (size_t)s->nbr_rows * sizeof(int));
    s->rowmax = kc_malloc(s->ctx, (size_t)s->nbr_rows * sizeof(int));
    s->fthr = NULL;
    if (!s->full && s->ctx->threads > 1)
        s->fthr = kc_malloc(s->ctx, (size_t)s->ctx->threads * 3 * (size_t)s->nbr_rows * sizeof(double));
}

/* Verification (after the timed steps, untimed): the pairs (i, j), i owned,
 * at distance^2 < r2 that the current Verlet lists of the owned atoms lack or
 * hold more than once, counted per row (sum of |found - listed|, this rank).
 * The lists are left as they are; the atoms are binned afresh at their
 * current positions (the binning is scratch between rebuilds) and every bin
 * within sqrt(r2) is searched, whatever the bin width, so a list built to a
 * shorter radius than it should is caught.  The convention of the lists: an
 * owned j in row i only if j > i (half lists), every j (full lists). */
long md_list_mismatches(md_sys *s, double r2, long *pairs) {
    const int nall = s->nall, nlocal = s->nlocal, full = s->full, maxn = s->maxn;
    bin_atoms(s, 0, nall);
    count_sort(s, nall);
    int nb[3];
    for (int d = 0; d < 3; ++d) {
        const double w = ceil(sqrt(r2) * s->cinv[d]);
        nb[d] = w < (double)s->ncell[d] ? (int)w : s->ncell[d];
    }
    const int n0 = s->ncell[0], n1 = s->ncell[1], n2 = s->ncell[2];
    const double *x = s->x;
    const int *start = s->cell_start, *cell_atoms = s->cell_atoms, *atom_cell = s->atom_cell;
    const int *nbr = s->nbr, *numtwo = s->numtwo, *numone = s->numone;
    long bad = 0, within = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad, within)
    for (int i = 0; i < nlocal; ++i) {
        const int ci = atom_cell[i];
        const int a = ci % n0, b = (ci / n0) % n1, c = ci / (n0 * n1);
        long found = 0, listed = 0;
        for (int cc = c - nb[2] > 0 ? c - nb[2] : 0; cc <= c + nb[2] && cc < n2; ++cc)
            for (int bb = b - nb[1] > 0 ? b - nb[1] : 0; bb <= b + nb[1] && bb < n1; ++bb)
                for (int aa = a - nb[0] > 0 ? a - nb[0] : 0; aa <= a + nb[0] && aa < n0; ++aa) {
                    const int cell = aa + n0 * (bb + n1 * cc);
                    for (int p = start[cell]; p < start[cell + 1]; ++p) {
                        const int j = cell_atoms[p];
                        if (j == i || (!full && j < nlocal && j < i)) continue;
                        const double dx = x[3 * i] - x[3 * j], dy = x[3 * i + 1] - x[3 * j + 1],
                                     dz = x[3 * i + 2] - x[3 * j + 2];
                        found += dx * dx + dy * dy + dz * dz < r2;
                    }
                }
        const int *row = nbr + (size_t)i * maxn;
        for (int q = 0; q < numtwo[i] + numone[i]; ++q) {
            const int j = q < numtwo[i] ? row[q] : row[maxn - numone[i] + (q - numtwo[i])];
            const double dx = x[3 * i] - x[3 * j], dy = x[3 * i + 1] - x[3 * j + 1],
                         dz = x[3 * i + 2] - x[3 * j + 2];
            listed += dx * dx + dy * dy + dz * dz < r2;
        }
        bad += found > listed ? found - listed : listed - found;
        within += found;
    }
    if (pairs) *pairs = within;
    return bad;
}

/* Cell binning of owned + ghost atoms and Verlet lists (r < rc + skin). */
void md_build_neighbours(md_sys *s) {
    const int nall = s->nall, nlocal = s->nlocal;
    const double *x = s->x;
    const int *atom_cell = s->atom_cell;
    const int n0 = s->ncell[0], n1 = s->ncell[1], n2 = s->ncell[2];
    bin_atoms(s, 0, nall);
    count_sort(s, nall);
    const int *start = s->cell_start;
    /* binned coordinates, contiguous per bin */
    md_gather3(s->xb, x, s->cell_atoms, nall, -1, 0.0, 0);
    ensure_rows(s, nlocal);
    for (;;) {
        const int maxn = s->maxn;
        int *nbr = s->nbr, *numtwo = s->numtwo, *numone = s->numone, *rowmax = s->rowmax;
        const int *cell_atoms = s->cell_atoms;
        const double rn2 = s->rn2;
        const int full = s->full;
        const int drop_ghosts = !full && KC_FAULT("md_drop_ghost_pairs"); /* fault: none */
        const double *xb = s->xb;
        int most = 0;
#pragma omp parallel for schedule(static) reduction(max : most)
        for (int i = 0; i < nlocal; ++i) {
            const double xi = x[3 * i], yi = x[3 * i + 1], zi = x[3 * i + 2];
            const int ci = atom_cell[i];
            const int a = ci % n0, b = (ci / n0) % n1, c = ci / (n0 * n1);
            const int a0 = a - NB_SUB > 0 ? a - NB_SUB : 0;
            const int a1 = a + NB_SUB < n0 ? a + NB_SUB : n0 - 1;
            int two = 0, one = 0, jm = i;
            int *row = nbr + (size_t)i * maxn;
            for (int cc = (c - NB_SUB > 0 ? c - NB_SUB : 0); cc <= (c + NB_SUB < n2 ? c + NB_SUB : n2 - 1); ++cc)
                for (int bb = (b - NB_SUB > 0 ? b - NB_SUB : 0); bb <= (b + NB_SUB < n1 ? b + NB_SUB : n1 - 1); ++bb) {
                    /* bins a0..a1 of one x row are contiguous in cell_atoms */
                    const int base = n0 * (bb + n1 * cc);
                    const int p1 = start[base + a1 + 1];
                    for (int p = start[base + a0]; p < p1; ++p) {
                        const int j = cell_atoms[p];
                        if (j == i || (!full && j < i)) continue;
                        const double dx = xi - xb[3 * p], dy = yi - xb[3 * p + 1],
                                     dz = zi - xb[3 * p + 2];
                        if (dx * dx + dy * dy + dz * dz < rn2) {
                            if (!full && j < nlocal) {
                                if (two + one < maxn) row[two] = j;
                                ++two;
                                if (j > jm) jm = j;
                            } else if (!drop_ghosts) {
                                if (two + one < maxn) row[maxn - 1 - one] = j;
                                ++one;
                            }
                        }
                    }
                }
            numtwo[i] = two;
            rowmax[i] = jm;
            numone[i] = one;
            if (two + one > most) most = two + one;
        }
        if (most <= maxn) {
            if (s->scratch_maxn != maxn) {
                KC_FREE_ALL(s->scratch, s->jscratch);
                s->scratch = kc_malloc(s->ctx, (size_t)s->ctx->threads * 6 * (size_t)maxn * sizeof(double));
                s->jscratch = kc_malloc(s->ctx, (size_t)s->ctx->threads * (size_t)maxn * sizeof(int));
                s->scratch_maxn = maxn;
            }
            break;
        }
        s->maxn = most + most / 4 + 8; /* overflow: widen the rows and redo */
        free(s->nbr);
        s->nbr = kc_malloc(s->ctx, (size_t)s->nbr_rows * (size_t)s->maxn * sizeof(int));
    }
}
