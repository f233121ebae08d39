/* md atoms: the per-atom arrays, the exchange buffers and their growth. */
#include "md.h"

#include <stdlib.h>
#include <string.h>

static void *grow(const kc_ctx *ctx, void *old, size_t keep_bytes, size_t new_bytes) {
    void *p = kc_malloc(ctx, new_bytes);
    if (keep_bytes) memcpy(p, old, keep_bytes);
    free(old);
    return p;
}

/* Room for n atoms (owned + ghosts); keeps x of nall and v, id of nlocal atoms. */
void md_ensure_atoms(md_sys *s, int n) {
    if (n <= s->cap) return;
    const int cap = n + n / 2 + 64;
    s->x = grow(s->ctx, s->x, (size_t)s->nall * 3 * sizeof(double), (size_t)cap * 3 * sizeof(double));
    s->v = grow(s->ctx, s->v, (size_t)s->nlocal * 3 * sizeof(double), (size_t)cap * 3 * sizeof(double));
    s->f = grow(s->ctx, s->f, 0, (size_t)cap * 3 * sizeof(double));
    s->id = grow(s->ctx, s->id, (size_t)s->nlocal * sizeof(long), (size_t)cap * sizeof(long));
    s->cell_atoms = grow(s->ctx, s->cell_atoms, 0, (size_t)cap * sizeof(int));
    s->atom_cell = grow(s->ctx, s->atom_cell, 0, (size_t)cap * sizeof(int));
    s->xb = grow(s->ctx, s->xb, 0, (size_t)cap * 3 * sizeof(double));
    s->idtmp = grow(s->ctx, s->idtmp, 0, (size_t)cap * sizeof(long));
    s->cap = cap;
}

void md_ensure_buf(const kc_ctx *ctx, double **buf, size_t *cap, size_t n) {
    if (n <= *cap) return;
    size_t c = n + n / 2 + 256;
    *buf = grow(ctx, *buf, 0, c * sizeof(double));
    *cap = c;
}

void md_ensure_list(const kc_ctx *ctx, swap_t *w, int n) {
    if (n <= w->cap) return;
    int c = n + n / 2 + 64;
    w->list = grow(ctx, w->list, (size_t)w->nsend * sizeof(int), (size_t)c * sizeof(int));
    w->cap = c;
}

/* Initial capacity: owned + ghosts of the extended sub-box, first-touched by
 * the threads with the schedule of the compute loops. */
void md_alloc_atoms(md_sys *s, const options *o) {
    s->trange = kc_malloc(s->ctx, 2 * (size_t)s->ctx->threads * sizeof(int));
    double ext = 1.0;
    for (int d = 0; d < 3; ++d) ext *= s->hi[d] - s->lo[d] + 2.0 * s->rn;
    const double est = 1.3 * ext * o->density + 1024.0;
    const int cap = est > 2e9 ? 2000000000 : (int)est;
    md_ensure_atoms(s, cap);
    double *x = s->x, *v = s->v, *f = s->f;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < 3 * cap; ++k) x[k] = v[k] = f[k] = 0.0;
    s->maxn = (int)(1.5 * o->density * 4.0 / 3.0 * 3.14159265358979 * s->rn2 * s->rn) + 16;
}

/* dst[k] = src[idx[k]] for n 3-vectors; with d >= 0 coordinate d also gets
 * `shift` (a periodic image).  Threads share the rows where n >= min_par
 * (below, a parallel region costs more than it saves). */
void md_gather3(double *restrict dst, const double *restrict src, const int *restrict idx, int n,
                int d, double shift, int min_par) {
    (void)min_par; /* read by the OpenMP if clause only */
#pragma omp parallel for schedule(static) if (n >= min_par)
    for (int k = 0; k < n; ++k) {
        const int i = idx[k];
        dst[3 * k] = src[3 * i];
        dst[3 * k + 1] = src[3 * i + 1];
        dst[3 * k + 2] = src[3 * i + 2];
        if (d >= 0) dst[3 * k + d] += shift;
    }
}

void md_free_system(md_sys *s) {
    for (int q = 0; q < 6; ++q) free(s->swap[q].list);
    KC_FREE_ALL(s->x, s->v, s->f, s->id, s->cell_start, s->cell_atoms, s->atom_cell, s->xb,
                s->idtmp, s->nbr, s->numtwo, s->numone, s->rowmax, s->trange, s->fthr, s->scratch,
                s->jscratch, s->sbuf, s->rbuf);
    MPI_Comm_free(&s->cart);
}
