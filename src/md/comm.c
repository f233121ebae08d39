/* md communication: migration, the ghost build and the per-step halo refresh,
 * each six face exchanges (x then y then z) with periodic image shifts. */
#include "md.h"

#include <string.h>

/* The ghosts of a face are packed by the threads from this many on: a face's
 * halo is a few thousand atoms, and a parallel region costs more than it
 * saves below ~10^4 atoms. */
enum { PACK_PAR = 16385 };

static int send_peer(const md_sys *s, int d, int dir) { return dir == 0 ? s->lower[d] : s->upper[d]; }
static int recv_peer(const md_sys *s, int d, int dir) { return dir == 0 ? s->upper[d] : s->lower[d]; }
static double image_shift(const md_sys *s, int d, int dir) {
    if (dir == 0) return s->coords[d] == 0 ? s->box : 0.0;
    return s->coords[d] == s->dims[d] - 1 ? -s->box : 0.0;
}

/* Migration: owned atoms outside the sub-box go to the face neighbour, x then
 * y then z (an atom leaving through an edge or corner travels in two or three
 * hops).  Records atoms still outside their sub-box afterwards as lost. */
void md_migrate(md_sys *s) {
    for (int d = 0; d < 3; ++d) {
        for (int dir = 0; dir < 2; ++dir) {
            const double shift = image_shift(s, d, dir);
            int nsend = 0;
            int i = 0;
            while (i < s->nlocal) {
                const double xd = s->x[3 * i + d];
                const int out = dir == 0 ? xd < s->lo[d] : xd >= s->hi[d];
                if (!out) {
                    ++i;
                    continue;
                }
                if (nsend == INT_MAX / 7) /* 7 doubles per atom in one message (int count) */
                    kc_abort(s->ctx, "more than %d atoms leave the sub-box through one face",
                             INT_MAX / 7);
                md_ensure_buf(s->ctx, &s->sbuf, &s->scap, (size_t)(nsend + 1) * 7);
                double *p = s->sbuf + (size_t)nsend * 7;
                memcpy(p, s->x + 3 * i, 3 * sizeof(double));
                memcpy(p + 3, s->v + 3 * i, 3 * sizeof(double));
                p[d] += shift;
                if (p[d] >= s->box) p[d] = nextafter(s->box, 0.0); /* -tiny + box rounded up */
                p[6] = (double)s->id[i];
                ++nsend;
                const int last = --s->nlocal;
                if (i != last) {
                    memcpy(s->x + 3 * i, s->x + 3 * last, 3 * sizeof(double));
                    memcpy(s->v + 3 * i, s->v + 3 * last, 3 * sizeof(double));
                    s->id[i] = s->id[last];
                }
            }
            s->nall = s->nlocal; /* ghosts are invalid from here on */
            int nrecv = 0;
            MPI_Sendrecv(&nsend, 1, MPI_INT, send_peer(s, d, dir), 10 + d, &nrecv, 1, MPI_INT,
                         recv_peer(s, d, dir), 10 + d, s->cart, MPI_STATUS_IGNORE);
            md_ensure_buf(s->ctx, &s->rbuf, &s->rcap, (size_t)nrecv * 7);
            MPI_Sendrecv(s->sbuf, 7 * nsend, MPI_DOUBLE, send_peer(s, d, dir), 20 + d, s->rbuf,
                         7 * nrecv, MPI_DOUBLE, recv_peer(s, d, dir), 20 + d, s->cart,
                         MPI_STATUS_IGNORE);
            md_ensure_atoms(s, s->nlocal + nrecv);
            for (int r = 0; r < nrecv; ++r) {
                const double *p = s->rbuf + (size_t)r * 7;
                const int j = s->nlocal++;
                memcpy(s->x + 3 * j, p, 3 * sizeof(double));
                memcpy(s->v + 3 * j, p + 3, 3 * sizeof(double));
                s->id[j] = (long)p[6];
            }
            s->nall = s->nlocal;
        }
    }
    for (int i = 0; i < s->nlocal; ++i) s->lost += !md_inside(s, s->x + 3 * i);
    md_sort_owned(s);
}

/* Ghost build: six face exchanges; dimension d forwards the ghosts received
 * in earlier dimensions (indices < nlast) so edges and corners arrive. */
void md_borders(md_sys *s) {
    s->nall = s->nlocal;
    for (int d = 0; d < 3; ++d) {
        const int nlast = s->nall;
        for (int dir = 0; dir < 2; ++dir) {
            swap_t *w = &s->swap[2 * d + dir];
            w->dim = d;
            w->to = send_peer(s, d, dir);
            w->from = recv_peer(s, d, dir);
            w->shift = image_shift(s, d, dir);
            w->nsend = 0;
            const double edge = dir == 0 ? s->lo[d] + s->rn : s->hi[d] - s->rn;
            for (int i = 0; i < nlast; ++i) {
                const double xd = s->x[3 * i + d];
                if (dir == 0 ? xd < edge : xd >= edge) {
                    md_ensure_list(s->ctx, w, w->nsend + 1);
                    w->list[w->nsend++] = i;
                }
            }
            MPI_Sendrecv(&w->nsend, 1, MPI_INT, w->to, 30 + d, &w->nrecv, 1, MPI_INT, w->from,
                         30 + d, s->cart, MPI_STATUS_IGNORE);
            md_ensure_buf(s->ctx, &s->sbuf, &s->scap, (size_t)w->nsend * 3);
            md_ensure_atoms(s, s->nall + w->nrecv);
            md_gather3(s->sbuf, s->x, w->list, w->nsend, d, w->shift, PACK_PAR);
            w->first = s->nall;
            MPI_Sendrecv(s->sbuf, 3 * w->nsend, MPI_DOUBLE, w->to, 40 + d,
                         s->x + 3 * (size_t)w->first, 3 * w->nrecv, MPI_DOUBLE, w->from, 40 + d,
                         s->cart, MPI_STATUS_IGNORE);
            s->nall += w->nrecv;
        }
    }
}

/* Per-step halo refresh with the send lists recorded by md_borders(). */
void md_update_ghosts(md_sys *s) {
    for (int q = 0; q < 6; ++q) {
        const swap_t *w = &s->swap[q];
        const int d = w->dim, n = w->nsend;
        md_gather3(s->sbuf, s->x, w->list, n, d, w->shift, PACK_PAR);
        MPI_Sendrecv(s->sbuf, 3 * n, MPI_DOUBLE, w->to, 50 + d, s->x + 3 * (size_t)w->first,
                     3 * w->nrecv, MPI_DOUBLE, w->from, 50 + d, s->cart, MPI_STATUS_IGNORE);
    }
}
