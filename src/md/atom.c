/* md atoms: the per-atom arrays, the exchange buffers and their growth. */
#include "md.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *grow(const kc_ctx *ctx, void *old, size_t keep_bytes, size_t new_bytes) {
    void *p = kc_malloc(ctx, new_bytes);
    if (keep_bytes) memcpy(p, old, keep_bytes);
    free(old);
    return p;
}

/* The capacity for n atoms (`what`: whose): n + n/2 + 64, at most MD_MAX_ATOMS,
 * the indices a rank's int arrays hold (check_size); computed in long, so it
 * cannot overflow.  More than MD_MAX_ATOMS aborts. */
static int grown(const kc_ctx *ctx, int n, const char *what) {
    if (n > MD_MAX_ATOMS)
        kc_abort(ctx, "%d %s exceed the %d a rank can index", n, what, MD_MAX_ATOMS);
    const long c = (long)n + n / 2 + 64;
    return c > MD_MAX_ATOMS ? MD_MAX_ATOMS : (int)c;
}

/* Room for n atoms (owned + ghosts); keeps x of nall and v, id of nlocal atoms. */
void md_ensure_atoms(md_sys *s, int n) {
    if (n <= s->cap) return;
    const int cap = grown(s->ctx, n, "atoms (owned and ghosts)");
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
    if (n > SIZE_MAX / 2 / sizeof(double))
        kc_abort(ctx, "an exchange buffer of %zu doubles is too large", n);
    size_t c = n + n / 2 + 256;
    *buf = grow(ctx, *buf, 0, c * sizeof(double));
    *cap = c;
}

/* A send list holds indices of atoms: at most MD_MAX_ATOMS (md_ensure_atoms). */
void md_ensure_list(const kc_ctx *ctx, swap_t *w, int n) {
    if (n <= w->cap) return;
    const int c = grown(ctx, n, "atoms of a send list");
    w->list = grow(ctx, w->list, (size_t)w->nsend * sizeof(int), (size_t)c * sizeof(int));
    w->cap = c;
}

/* Bytes per atom of the atom arrays (md_ensure_atoms): x, v, f, xb, id, idtmp,
 * cell_atoms, atom_cell. */
#define ATOM_BYTES (4 * 3 * sizeof(double) + 2 * sizeof(long) + 2 * sizeof(int))

/* Before anything is allocated (collective, status 2): the atoms a rank holds
 * (`est`: owned and ghosts, with the margin of md_alloc_atoms) must fit its int
 * indices (MD_MAX_ATOMS), and the arrays of all ranks of a node (atoms, cell
 * bins, neighbour lists of `maxn` per owned atom, per-thread force arrays and
 * scratch) must fit in 90% of its memory.  Returns those bytes of the rank
 * that needs the most (md_sys.need). */
static double check_size(const md_sys *s, const options *o, double est, double maxn) {
    const kc_ctx *ctx = s->ctx;
    const double side[3] = {s->hi[0] - s->lo[0], s->hi[1] - s->lo[1], s->hi[2] - s->lo[2]};
    const double most = kc_max_over_ranks(ctx, est);
    if (!(most <= (double)MD_MAX_ATOMS)) /* inf where the sub-box overflows a double */
        kc_fail(ctx, 2,
                "the system is too large: --cells-per-side %ld on %d rank(s) (%dx%dx%d) gives "
                "sub-boxes of %.4g x %.4g x %.4g which with their ghosts within cutoff+skin "
                "%g hold about %.3g atoms per rank, beyond the %d that int indices allow; use "
                "more ranks, a smaller --cells-per-side or a smaller --cutoff/--skin",
                o->L, ctx->nranks, s->dims[0], s->dims[1], s->dims[2], side[0], side[1],
                side[2], s->rn, most, MD_MAX_ATOMS);
    const double threads = ctx->threads;
    const double rows = 1.25 * o->density * side[0] * side[1] * side[2] + 16.0; /* ensure_rows */
    double need = (1.5 * est + 64.0) * (double)ATOM_BYTES          /* md_ensure_atoms */
                  + 4.0 * est * sizeof(int)                         /* bins (md_setup_grid) */
                  + rows * (maxn + 3.0) * sizeof(int)               /* lists, counts */
                  + threads * maxn * (6.0 * sizeof(double) + sizeof(int)); /* scratch */
    if (!s->full && ctx->threads > 1) need += threads * 3.0 * rows * sizeof(double); /* fthr */
    char detail[256];
    snprintf(detail, sizeof detail,
             "(--cells-per-side %ld on %d rank(s): about %.3g atoms per rank with their ghosts "
             "within cutoff+skin %g, neighbour lists of %.3g per atom)",
             o->L, ctx->nranks, most, s->rn, maxn);
    const double most_need = kc_max_over_ranks(ctx, need);
    kc_need_node_memory(ctx, most_need, "the system", detail,
                        "; use more nodes, a smaller --cells-per-side or a smaller "
                        "--cutoff/--skin");
    return most_need;
}

void md_need_step_times(const md_sys *s, const options *o, long steps, long held) {
    const double times = (double)(steps + held) * sizeof(double);
    char detail[256];
    if (held == 0)
        snprintf(detail, sizeof detail, "(%.3g GB of the system and %.3g GB of the per-step "
                 "times of --steps %ld)", s->need / 1e9, times / 1e9, steps);
    else
        snprintf(detail, sizeof detail, "(%.3g GB of the system and %.3g GB of the per-step "
                 "times of %ld steps: --min-time %g raised --steps %ld)", s->need / 1e9,
                 times / 1e9, steps, o->min_time, o->steps);
    kc_need_node_memory(s->ctx, s->need + times, "the run", detail,
                        held == 0 ? "; use fewer --steps" : "; use a smaller --min-time");
}

/* Initial capacity: owned + ghosts of the extended sub-box, first-touched by
 * the threads with the schedule of the compute loops; checked (check_size)
 * before anything is allocated. */
void md_alloc_atoms(md_sys *s, const options *o) {
    double ext = 1.0;
    for (int d = 0; d < 3; ++d) ext *= s->hi[d] - s->lo[d] + 2.0 * s->rn;
    const double est = 1.3 * ext * o->density + 1024.0;
    /* neighbours within rn: 1.5 x the expected count (fewer than est) */
    const double maxn = 1.5 * o->density * 4.0 / 3.0 * 3.14159265358979 * s->rn2 * s->rn + 16;
    s->need = check_size(s, o, est, maxn);
    md_need_step_times(s, o, o->steps, 0); /* and with the per-step times of --steps */
    s->trange = kc_malloc(s->ctx, 2 * (size_t)s->ctx->threads * sizeof(int));
    const int cap = (int)est;
    md_ensure_atoms(s, cap);
    double *x = s->x, *v = s->v, *f = s->f;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < 3 * cap; ++k) x[k] = v[k] = f[k] = 0.0;
    s->maxn = (int)maxn;
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
