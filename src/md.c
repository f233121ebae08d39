/* md: hybrid Lennard-Jones molecular dynamics after Chorley, Walker & Guest.
 *
 * Truncated and shifted Lennard-Jones fluid in reduced units, started on an
 * fcc lattice with velocities drawn from a per-atom PRNG seeded by the global
 * atom id (so the start is the same for every decomposition), integrated with
 * velocity Verlet at constant N, V, E.
 *
 * Decomposition: a periodic 3-D Cartesian grid of ranks (MPI_Dims_create).
 * Every rank owns the atoms inside its sub-box and holds ghost copies of the
 * atoms within cutoff+skin of it.  Ghosts are built by six face exchanges
 * (x then y then z, each later dimension forwarding the ghosts received
 * earlier, so edges and corners arrive), with periodic image shifts; the send
 * lists are recorded and every step refreshes the ghost positions through the
 * same six exchanges.  Every --rebuild-every steps atoms migrate to their new
 * owners (again six face exchanges), the ghosts are rebuilt and the Verlet
 * neighbour lists are rebuilt from a cell binning (LAMMPS "every N check no"):
 * the owned atoms are first sorted by bin (spatial locality), the bins are
 * (cutoff+skin)/2 wide with a 5x5x5 stencil, and each x row of the stencil is
 * one contiguous range of binned coordinates.
 * A single rank sends to itself through the same code path.
 *
 * Threads: by default a HALF neighbour list for owned pairs (each computed
 * once; the reaction force on j goes, with several threads, into per-thread
 * force arrays that are summed afterwards, so there are no races) and
 * one-sided entries for ghosts ("newton off": a pair across a sub-box face is
 * computed on both ranks, each counting half its energy and virial).
 * --list full gives FULL lists instead (each pair twice, no shared writes at
 * all).  Energy and virial are compensated per-thread sums, OpenMP-reduced.  The neighbour build and the integration loops
 * are parallel too; all MPI calls are made outside parallel regions by the
 * master (masteronly, MPI_THREAD_FUNNELED).
 *
 * Force loop: per row an "omp simd" pass over the contiguous neighbour list
 * (gathers, cutoff as a mask, no calls) that also stores the reaction forces
 * in a small per-thread buffer, then a scalar pass scatters them to f[j].
 * Each thread owns a fixed block of atoms; with half lists its private force
 * array spans only its block up to its largest two-sided neighbour, so the
 * zeroing and the reduction cost about one force array, not one per thread.
 *
 * Phase timers as in the paper: force, movout (halo refresh, migration and
 * ghost rebuild), sum (collectives), movea / moveb (integration halves),
 * neigh (binning and list build).  Every timed step's wall time is kept too:
 * RESULT's t_call_median_s and t_call_trimmed_s are the median and the 10%
 * trimmed mean per step of the slowest rank (kc_call_stats); both leave out
 * most of the rebuild steps, so they are a typical step, not t_step_s.
 */
#include "kernel_common.h"

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *HELP =
    "usage: md [--mode mpi|masteronly] [--cells-per-side L] [--density RHO]\n"
    "          [--temp T] [--cutoff RC] [--skin S] [--dt DT] [--steps N]\n"
    "          [--rebuild-every K] [--drift-tol TOL] [--list half|full]\n"
    "          [--preset lammps-in.lj] [--check-forces] [--min-time S]\n"
    "  Lennard-Jones fluid (truncated and shifted, reduced units), fcc start with\n"
    "  4 L^3 atoms, velocity Verlet (NVE), 3-D domain decomposition with six face\n"
    "  exchanges per step, cell-binned Verlet neighbour lists with a skin.\n"
    "  --mode           mpi: one thread per rank; masteronly: OMP_NUM_THREADS threads\n"
    "                   per rank, MPI only outside parallel regions (default mpi)\n"
    "  --cells-per-side fcc unit cells per box side L, atoms = 4 L^3 (default 8)\n"
    "  --density        reduced number density (default 0.8442)\n"
    "  --temp           initial reduced temperature (default 1.44)\n"
    "  --cutoff         LJ cutoff radius (default 2.5)\n"
    "  --skin           neighbour-list skin (default 0.3)\n"
    "  --dt             time step (default 0.005)\n"
    "  --steps          time steps (default 100)\n"
    "  --rebuild-every  steps between migration + neighbour-list rebuilds (default 20)\n"
    "  --list           half: each owned pair once, reaction forces of several threads\n"
    "                   into per-thread arrays summed afterwards; pairs with ghosts\n"
    "                   on both sides (default); full: every pair from both sides,\n"
    "                   no shared writes at all (twice the pair work)\n"
    "  --drift-tol      bound on the relative total-energy drift |E_end-E_0|/|E_0|\n"
    "                   (default 1e-3 x max(1, (dt/0.005)^2); the shifted in.lj fluid\n"
    "                   drifts by 1e-5..4e-5 over 100..1000 steps at dt 0.005, with a\n"
    "                   transient of ~3e-4 while the lattice melts; dt 0.01 gives ~2e-3)\n"
    "  --preset lammps-in.lj  L=20 (32000 atoms) with the LAMMPS bench/in.lj\n"
    "                   settings (density 0.8442, T 1.44, rc 2.5, skin 0.3,\n"
    "                   dt 0.005, 100 steps, rebuild every 20); explicit options win\n"
    "  --min-time S     after the first min(steps, rebuild-every) steps, raise the\n"
    "                   step count so the timed steps last at least S seconds\n"
    "                   (default 0: exactly --steps; the count is the same on every\n"
    "                   rank; RESULT: steps, steps_requested, t_step_s)\n"
    "  --check-forces   also rebuild at the end and compare forces, energy and virial\n"
    "                   with brute-force O(N^2) minimum-image sums (small systems,\n"
    "                   at most 32000 atoms; relative tolerance 1e-10)\n"
    "  --help           this text\n"
    "  Verified on every run: particle count conserved, |total momentum|/N < 1e-10,\n"
    "  energy drift below --drift-tol, no atom outside its sub-box after migration.\n"
    "  Quick: md --cells-per-side 8 --steps 50 (2048 atoms).\n";

/* ---- options ------------------------------------------------------------- */

typedef struct {
    kc_mode mode;
    long L, steps, rebuild;
    double density, temp, cutoff, skin, dt, drift_tol, min_time;
    int check_forces, full_list;
    const char *preset;
} options;

enum { O_MODE = 1000, O_L, O_DENS, O_TEMP, O_CUT, O_SKIN, O_DT, O_STEPS, O_REB, O_TOL,
       O_PRESET, O_CHECK, O_LIST, O_MINTIME, O_HELP };

static void defaults(options *o) {
    o->mode = KC_MODE_MPI;
    o->L = 8;
    o->steps = 100;
    o->rebuild = 20;
    o->density = 0.8442;
    o->temp = 1.44;
    o->cutoff = 2.5;
    o->skin = 0.3;
    o->dt = 0.005;
    o->drift_tol = 0.0; /* 0: the dt-dependent default */
    o->min_time = 0.0;
    o->check_forces = 0;
    o->full_list = 0;
    o->preset = "none";
}

/* One option with its value; NULL or the message written into err. */
static const char *parse_one(int c, const char *arg, options *o, int *given_L, char *err, size_t cap) {
    switch (c) {
    case O_MODE:
        if (kc_parse_mode(arg, &o->mode) != 0 ||
            (o->mode != KC_MODE_MPI && o->mode != KC_MODE_MASTERONLY)) {
            snprintf(err, cap, "unknown or unsupported mode '%s' (mpi, masteronly)", arg);
            return err;
        }
        return NULL;
    case O_L:
        *given_L = 1;
        return kc_opt_long("cells-per-side", arg, 1, 400, &o->L, err, cap);
    case O_DENS: return kc_opt_double("density", arg, 0, 1, 1e300, "a positive number", &o->density, err, cap);
    case O_TEMP: return kc_opt_double("temp", arg, 0, 0, 1e6, "a number in [0, 1e6]", &o->temp, err, cap);
    case O_CUT: return kc_opt_double("cutoff", arg, 0, 1, 1e300, "a positive number", &o->cutoff, err, cap);
    case O_SKIN: return kc_opt_double("skin", arg, 0, 0, 1e300, "a non-negative number", &o->skin, err, cap);
    case O_DT: return kc_opt_double("dt", arg, 0, 1, 1e300, "a positive number", &o->dt, err, cap);
    case O_TOL: return kc_opt_double("drift-tol", arg, 0, 1, 1e300, "a positive number", &o->drift_tol, err, cap);
    case O_MINTIME: return kc_opt_min_time(arg, &o->min_time, err, cap);
    case O_STEPS:
        return kc_opt_long_as("steps", arg, 1, 1000000000L, "a positive integer (at most 1e9)",
                              &o->steps, err, cap);
    case O_REB:
        return kc_opt_long_as("rebuild-every", arg, 1, 1000000000L, "a positive integer",
                              &o->rebuild, err, cap);
    case O_PRESET:
        if (strcmp(arg, "lammps-in.lj") != 0) {
            snprintf(err, cap, "unknown preset '%s' (lammps-in.lj)", arg);
            return err;
        }
        o->preset = "lammps-in.lj";
        return NULL;
    case O_LIST:
        if (strcmp(arg, "half") != 0 && strcmp(arg, "full") != 0) {
            snprintf(err, cap, "--list must be half or full, got '%s'", arg);
            return err;
        }
        o->full_list = strcmp(arg, "full") == 0;
        return NULL;
    default: return NULL;
    }
}

static const char *parse(int argc, char **argv, options *o, int *help, char *err, size_t cap) {
    static const struct option longopts[] = {
        {"mode", required_argument, NULL, O_MODE},
        {"cells-per-side", required_argument, NULL, O_L},
        {"density", required_argument, NULL, O_DENS},
        {"temp", required_argument, NULL, O_TEMP},
        {"cutoff", required_argument, NULL, O_CUT},
        {"skin", required_argument, NULL, O_SKIN},
        {"dt", required_argument, NULL, O_DT},
        {"steps", required_argument, NULL, O_STEPS},
        {"rebuild-every", required_argument, NULL, O_REB},
        {"drift-tol", required_argument, NULL, O_TOL},
        {"preset", required_argument, NULL, O_PRESET},
        {"check-forces", no_argument, NULL, O_CHECK},
        {"list", required_argument, NULL, O_LIST},
        {"min-time", required_argument, NULL, O_MINTIME},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0}};
    defaults(o);
    int given_L = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == O_HELP) *help = 1;
        else if (c == O_CHECK) o->check_forces = 1;
        else if (c == '?' || c == ':') return kc_opt_unknown(argv, err, cap);
        else if (parse_one(c, optarg, o, &given_L, err, cap)) return err;
    }
    if (kc_opt_leftover(argc, argv, err, cap)) return err;
    if (o->drift_tol == 0.0) o->drift_tol = 1e-3 * fmax(1.0, (o->dt / 0.005) * (o->dt / 0.005));
    /* Every other in.lj setting is already the default; explicit options win. */
    if (strcmp(o->preset, "lammps-in.lj") == 0 && !given_L) o->L = 20;
    const double box = (double)o->L * cbrt(4.0 / o->density);
    if (o->cutoff > 0.5 * box) {
        snprintf(err, cap, "--cutoff %g is larger than half the box side %g (L=%ld, density %g)",
                 o->cutoff, 0.5 * box, o->L, o->density);
        return err;
    }
    if (o->check_forces && 4 * o->L * o->L * o->L > 32000) {
        snprintf(err, cap, "--check-forces needs at most 32000 atoms (L <= 20)");
        return err;
    }
    return NULL;
}

/* ---- the system ------------------------------------------------------------ */

/* Deterministic per-atom PRNG (splitmix64); the state is passed around. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double uniform01(uint64_t *state) {
    return (double)(splitmix64(state) >> 11) * 0x1.0p-53;
}

typedef struct {
    int dim, dir;    /* dir 0: send to the lower neighbour, 1: to the upper */
    int to, from;    /* ranks sent to / received from */
    double shift;    /* periodic image shift added to coordinate `dim` */
    int *list;       /* atoms sent (indices into x) */
    int nsend, cap;
    int first, nrecv; /* ghosts received land in x[first .. first+nrecv) */
} swap_t;

typedef struct {
    kc_ctx *ctx;
    MPI_Comm cart;
    int dims[3], coords[3], lower[3], upper[3];
    double box, lo[3], hi[3];
    double rc2, rn, rn2, ecut;
    int nlocal, nall, cap;  /* owned atoms, owned + ghosts, allocated atoms */
    double *x, *v, *f;      /* [cap][3]; v and f meaningful for owned atoms */
    long *id;               /* global id of owned atoms */
    /* cell binning of owned + ghost atoms over the sub-box extended by rn */
    int ncell[3], ncells, cells_cap;
    double clo[3], cinv[3];
    int *cell_start, *cell_atoms, *atom_cell;
    double *xb;             /* [cap][3] coordinates in binned order */
    long *idtmp;            /* [cap] scratch for the spatial sort */
    /* Verlet lists, row i = nbr[i*maxn .. (i+1)*maxn): the numtwo[i] two-sided
     * neighbours (owned j > i, half list only; their force is updated too)
     * from the front, the numone[i] one-sided neighbours (ghosts; every j in
     * the full list) from the back. */
    int full;               /* 1: full list, 0: half list (newton off for ghosts) */
    int *nbr, *numtwo, *numone, maxn, nbr_rows;
    double *fthr;           /* per-thread force arrays [threads][3*nbr_rows] (half list) */
    int *rowmax;            /* largest two-sided neighbour of row i (i if none) */
    int *trange;            /* [threads][2]: atoms whose forces a thread's array holds */
    double *scratch;        /* per-thread separations and reaction forces of one row [threads][6*maxn] */
    int *jscratch;          /* per-thread neighbour indices of one row [threads][maxn] */
    int scratch_maxn;
    swap_t swap[6];
    double *sbuf, *rbuf;
    size_t scap, rcap;      /* doubles */
    long lost;              /* atoms found outside their sub-box after migration */
} md_sys;

static void *grow(const kc_ctx *ctx, void *old, size_t keep_bytes, size_t new_bytes) {
    void *p = kc_malloc(ctx, new_bytes);
    if (keep_bytes) memcpy(p, old, keep_bytes);
    free(old);
    return p;
}

/* Room for n atoms (owned + ghosts); keeps x of nall and v, id of nlocal atoms. */
static void ensure_atoms(md_sys *s, int n) {
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

static void ensure_buf(const kc_ctx *ctx, double **buf, size_t *cap, size_t n) {
    if (n <= *cap) return;
    size_t c = n + n / 2 + 256;
    *buf = grow(ctx, *buf, 0, c * sizeof(double));
    *cap = c;
}

static void ensure_list(const kc_ctx *ctx, swap_t *w, int n) {
    if (n <= w->cap) return;
    int c = n + n / 2 + 64;
    w->list = grow(ctx, w->list, (size_t)w->nsend * sizeof(int), (size_t)c * sizeof(int));
    w->cap = c;
}

/* Sub-box boundary k of dimension d: the same expression on every rank, so
 * a point on a boundary belongs to exactly one rank. */
static double boundary(const md_sys *s, int d, int k) {
    return k >= s->dims[d] ? s->box : s->box * (double)k / (double)s->dims[d];
}

static int send_peer(const md_sys *s, int d, int dir) { return dir == 0 ? s->lower[d] : s->upper[d]; }
static int recv_peer(const md_sys *s, int d, int dir) { return dir == 0 ? s->upper[d] : s->lower[d]; }
static double image_shift(const md_sys *s, int d, int dir) {
    if (dir == 0) return s->coords[d] == 0 ? s->box : 0.0;
    return s->coords[d] == s->dims[d] - 1 ? -s->box : 0.0;
}

static void sort_owned(md_sys *s);

/* Migration: owned atoms outside the sub-box go to the face neighbour, x then
 * y then z (an atom leaving through an edge or corner travels in two or three
 * hops).  Records atoms still outside their sub-box afterwards as lost. */
static void migrate(md_sys *s) {
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
                ensure_buf(s->ctx, &s->sbuf, &s->scap, (size_t)(nsend + 1) * 7);
                double *p = s->sbuf + (size_t)nsend * 7;
                for (int k = 0; k < 3; ++k) {
                    p[k] = s->x[3 * i + k];
                    p[3 + k] = s->v[3 * i + k];
                }
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
            ensure_buf(s->ctx, &s->rbuf, &s->rcap, (size_t)nrecv * 7);
            MPI_Sendrecv(s->sbuf, 7 * nsend, MPI_DOUBLE, send_peer(s, d, dir), 20 + d, s->rbuf,
                         7 * nrecv, MPI_DOUBLE, recv_peer(s, d, dir), 20 + d, s->cart,
                         MPI_STATUS_IGNORE);
            ensure_atoms(s, s->nlocal + nrecv);
            for (int r = 0; r < nrecv; ++r) {
                const double *p = s->rbuf + (size_t)r * 7;
                const int j = s->nlocal++;
                for (int k = 0; k < 3; ++k) {
                    s->x[3 * j + k] = p[k];
                    s->v[3 * j + k] = p[3 + k];
                }
                s->id[j] = (long)p[6];
            }
            s->nall = s->nlocal;
        }
    }
    long lost = 0;
    for (int i = 0; i < s->nlocal; ++i)
        for (int d = 0; d < 3; ++d)
            if (!(s->x[3 * i + d] >= s->lo[d] && s->x[3 * i + d] < s->hi[d])) {
                ++lost;
                break;
            }
    s->lost += lost;
    sort_owned(s);
}

/* Ghost build: six face exchanges; dimension d forwards the ghosts received
 * in earlier dimensions (indices < nlast) so edges and corners arrive. */
static void borders(md_sys *s) {
    s->nall = s->nlocal;
    for (int d = 0; d < 3; ++d) {
        const int nlast = s->nall;
        for (int dir = 0; dir < 2; ++dir) {
            swap_t *w = &s->swap[2 * d + dir];
            w->dim = d;
            w->dir = dir;
            w->to = send_peer(s, d, dir);
            w->from = recv_peer(s, d, dir);
            w->shift = image_shift(s, d, dir);
            w->nsend = 0;
            const double edge = dir == 0 ? s->lo[d] + s->rn : s->hi[d] - s->rn;
            for (int i = 0; i < nlast; ++i) {
                const double xd = s->x[3 * i + d];
                if (dir == 0 ? xd < edge : xd >= edge) {
                    ensure_list(s->ctx, w, w->nsend + 1);
                    w->list[w->nsend++] = i;
                }
            }
            MPI_Sendrecv(&w->nsend, 1, MPI_INT, w->to, 30 + d, &w->nrecv, 1, MPI_INT, w->from,
                         30 + d, s->cart, MPI_STATUS_IGNORE);
            ensure_buf(s->ctx, &s->sbuf, &s->scap, (size_t)w->nsend * 3);
            ensure_atoms(s, s->nall + w->nrecv);
            for (int k = 0; k < w->nsend; ++k) {
                const int i = w->list[k];
                for (int c = 0; c < 3; ++c) s->sbuf[3 * k + c] = s->x[3 * i + c];
                s->sbuf[3 * k + d] += w->shift;
            }
            w->first = s->nall;
            MPI_Sendrecv(s->sbuf, 3 * w->nsend, MPI_DOUBLE, w->to, 40 + d,
                         s->x + 3 * (size_t)w->first, 3 * w->nrecv, MPI_DOUBLE, w->from, 40 + d,
                         s->cart, MPI_STATUS_IGNORE);
            s->nall += w->nrecv;
        }
    }
}

/* Per-step halo refresh with the send lists recorded by borders(). */
static void update_ghosts(md_sys *s) {
    for (int q = 0; q < 6; ++q) {
        const swap_t *w = &s->swap[q];
        const int d = w->dim, n = w->nsend;
        const int *list = w->list;
        const double shift = w->shift;
        const double *x = s->x;
        double *buf = s->sbuf;
        /* a face's halo is a few thousand atoms: a parallel region costs more
         * than it saves below ~10^4 atoms */
#pragma omp parallel for schedule(static) if (n > 16384)
        for (int k = 0; k < n; ++k) {
            const int i = list[k];
            buf[3 * k] = x[3 * i];
            buf[3 * k + 1] = x[3 * i + 1];
            buf[3 * k + 2] = x[3 * i + 2];
            buf[3 * k + d] += shift;
        }
        MPI_Sendrecv(s->sbuf, 3 * n, MPI_DOUBLE, w->to, 50 + d, s->x + 3 * (size_t)w->first,
                     3 * w->nrecv, MPI_DOUBLE, w->from, 50 + d, s->cart, MPI_STATUS_IGNORE);
    }
}

/* Bins of side >= rn / NB_SUB over the sub-box extended by rn (the same grid
 * on every call: it depends on the sub-box only); the neighbours of an atom
 * within rn lie in the (2 NB_SUB + 1)^3 bins around its own. */
enum { NB_SUB = 2 };

static void setup_grid(md_sys *s) {
    int ncells = 1;
    for (int d = 0; d < 3; ++d) {
        const double ext = s->hi[d] - s->lo[d] + 2.0 * s->rn;
        int n = (int)(ext * NB_SUB / s->rn);
        if (n < 1) n = 1;
        if (n > 1024) n = 1024;
        s->ncell[d] = n;
        s->clo[d] = s->lo[d] - s->rn;
        s->cinv[d] = (double)n / ext;
        ncells *= n;
    }
    s->ncells = ncells;
    s->cells_cap = ncells + 1;
    s->cell_start = kc_malloc(s->ctx, (size_t)s->cells_cap * sizeof(int));
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
        int a = (int)floor((x[3 * i] - c0) * i0);
        int b = (int)floor((x[3 * i + 1] - c1) * i1);
        int c = (int)floor((x[3 * i + 2] - c2) * i2);
        a = a < 0 ? 0 : (a >= n0 ? n0 - 1 : a);
        b = b < 0 ? 0 : (b >= n1 ? n1 - 1 : b);
        c = c < 0 ? 0 : (c >= n2 ? n2 - 1 : c);
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

/* dst[k] = src[perm[k]] for n 3-vectors (threads share the rows). */
static void gather3(double *restrict dst, const double *restrict src, const int *perm, int n) {
#pragma omp parallel for schedule(static)
    for (int k = 0; k < n; ++k) {
        const int i = perm[k];
        dst[3 * k] = src[3 * i];
        dst[3 * k + 1] = src[3 * i + 1];
        dst[3 * k + 2] = src[3 * i + 2];
    }
}

/* Spatial sort of the owned atoms by bin (after migration, before the ghosts
 * are built), so that atoms close in space are close in memory.  Uses f as
 * scratch: forces are dead between move_a and the next compute_forces. */
static void sort_owned(md_sys *s) {
    const int n = s->nlocal;
    bin_atoms(s, 0, n);
    count_sort(s, n);
    const int *perm = s->cell_atoms;
    double *tmp = s->f;
    for (int q = 0; q < 2; ++q) {
        double *a = q == 0 ? s->x : s->v;
        gather3(tmp, a, perm, n);
        memcpy(a, tmp, (size_t)n * 3 * sizeof(double));
    }
    for (int k = 0; k < n; ++k) s->idtmp[k] = s->id[perm[k]];
    memcpy(s->id, s->idtmp, (size_t)n * sizeof(long));
}

/* Cell binning of owned + ghost atoms and Verlet lists (r < rc + skin). */
static void build_neighbours(md_sys *s) {
    const int nall = s->nall, nlocal = s->nlocal;
    const double *x = s->x;
    const int *atom_cell = s->atom_cell;
    const int n0 = s->ncell[0], n1 = s->ncell[1], n2 = s->ncell[2];
    bin_atoms(s, 0, nall);
    count_sort(s, nall);
    const int *start = s->cell_start;
    /* binned coordinates, contiguous per bin */
    gather3(s->xb, x, s->cell_atoms, nall);

    if (nlocal > s->nbr_rows || !s->nbr) {
        s->nbr_rows = nlocal + nlocal / 4 + 16;
        free(s->nbr);
        free(s->numtwo);
        free(s->numone);
        free(s->rowmax);
        free(s->fthr);
        s->nbr = kc_malloc(s->ctx, (size_t)s->nbr_rows * (size_t)s->maxn * sizeof(int));
        s->numtwo = kc_malloc(s->ctx, (size_t)s->nbr_rows * sizeof(int));
        s->numone = kc_malloc(s->ctx, (size_t)s->nbr_rows * sizeof(int));
        s->rowmax = kc_malloc(s->ctx, (size_t)s->nbr_rows * sizeof(int));
        s->fthr = NULL;
        if (!s->full && s->ctx->threads > 1)
            s->fthr = kc_malloc(s->ctx, (size_t)s->ctx->threads * 3 * (size_t)s->nbr_rows * sizeof(double));
    }
    for (;;) {
        const int maxn = s->maxn;
        int *nbr = s->nbr, *numtwo = s->numtwo, *numone = s->numone, *rowmax = s->rowmax;
        const int *cell_atoms = s->cell_atoms;
        const double rn2 = s->rn2;
        const int full = s->full;
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
                            } else {
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
                free(s->scratch);
                s->scratch = kc_malloc(s->ctx, (size_t)s->ctx->threads * 6 * (size_t)maxn * sizeof(double));
                free(s->jscratch);
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

/* Neumaier-compensated accumulation: the step-0 energy and virial must agree
 * across decompositions and thread counts to ~1e-12, which a plain running sum
 * of ~1e6 same-signed terms does not give (its rounding errors are systematic). */
static inline void acc(double *sum, double *comp, double term) {
    const double t = *sum + term;
    if (fabs(*sum) >= fabs(term)) *comp += (*sum - t) + term;
    else *comp += (term - t) + *sum;
    *sum = t;
}

/* Forces on owned atoms; returns the potential energy and virial
 * sum_{pairs} r.f of this rank's share (a pair with a ghost counts half on
 * each of its two sides).  Two-sided neighbours (half list) also receive the
 * reaction force: with several threads into per-thread arrays that are summed
 * afterwards, so no two threads write the same element.  Per atom the ~50 pair
 * terms are summed plainly; the atoms' sums are accumulated with compensation
 * per thread and then OpenMP-reduced. */
/* The forces of owned atom i from its neighbour row: the pairs within the
 * cutoff are compacted into the thread's buffers `buf` ([6][maxn]: separations
 * and reaction forces) and `bj` by scalar loads (cheaper than vector gathers;
 * branch-free), two-sided [0, m2), one-sided [m2, m); a vectorised pass
 * computes them and a scalar pass adds the reaction forces to fl[j] (different
 * j of a row never alias).  Returns the row's energy and virial shares. */
static inline __attribute__((always_inline)) void
force_row(int i, const double *restrict x, const int *restrict row, int n2, int n1, int maxn,
          double rc2, double ecut, int full, double *restrict fl, double *restrict buf,
          int *restrict bj, double *e_row, double *w_row) {
    double *restrict tx = buf;
    double *restrict ty = tx + maxn, *restrict tz = ty + maxn;
    double *restrict bx = tz + maxn, *restrict by = bx + maxn, *restrict bz = by + maxn;
    const double xi = x[3 * i], yi = x[3 * i + 1], zi = x[3 * i + 2];
    double fx = 0.0, fy = 0.0, fz = 0.0, e2 = 0.0, w2 = 0.0, e1 = 0.0, w1 = 0.0;
    const int *restrict back = row + maxn - n1;
    int m = 0;
    for (int k = 0; k < n2; ++k) {
        const int j = row[k];
        const double dx = xi - x[3 * j], dy = yi - x[3 * j + 1], dz = zi - x[3 * j + 2];
        bx[m] = dx;
        by[m] = dy;
        bz[m] = dz;
        bj[m] = j;
        m += dx * dx + dy * dy + dz * dz < rc2;
    }
    const int m2 = m;
    for (int k = 0; k < n1; ++k) {
        const int j = back[k];
        const double dx = xi - x[3 * j], dy = yi - x[3 * j + 1], dz = zi - x[3 * j + 2];
        bx[m] = dx;
        by[m] = dy;
        bz[m] = dz;
        m += dx * dx + dy * dy + dz * dz < rc2;
    }
#pragma omp simd reduction(+ : fx, fy, fz, e2, w2)
    for (int k = 0; k < m2; ++k) {
        const double dx = bx[k], dy = by[k], dz = bz[k];
        const double r2 = dx * dx + dy * dy + dz * dz;
        const double r2i = 1.0 / r2;
        const double r6i = r2i * r2i * r2i;
        const double fpair = 48.0 * r6i * (r6i - 0.5) * r2i;
        const double ddx = dx * fpair, ddy = dy * fpair, ddz = dz * fpair;
        fx += ddx;
        fy += ddy;
        fz += ddz;
        tx[k] = ddx;
        ty[k] = ddy;
        tz[k] = ddz;
        e2 += 4.0 * r6i * (r6i - 1.0) - ecut;
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
        const double r2i = 1.0 / r2;
        const double r6i = r2i * r2i * r2i;
        const double fpair = 48.0 * r6i * (r6i - 0.5) * r2i;
        fx += dx * fpair;
        fy += dy * fpair;
        fz += dz * fpair;
        e1 += 4.0 * r6i * (r6i - 1.0) - ecut;
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
    *w_row = w2 + 0.5 * w1;
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

static void compute_forces(md_sys *s, double *epot_out, double *vir_out) {
    const int nlocal = s->nlocal, maxn = s->maxn, nthr = s->ctx->threads;
    const double *restrict x = s->x;
    double *f = s->f, *fthr = s->fthr;
    const int *nbr = s->nbr, *numtwo = s->numtwo, *numone = s->numone, *rowmax = s->rowmax;
    int *trange = s->trange;
    const double rc2 = s->rc2, ecut = s->ecut;
    const size_t stride = 3 * (size_t)s->nbr_rows;
    const int full = s->full;
    const int private_f = !full && nthr > 1;
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
        const int ib = (int)((long)nlocal * tid / nt), ie = (int)((long)nlocal * (tid + 1) / nt);
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
                      fl, buf, bj, &e_row, &w_row);
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

/* movea: v += dt/2 f; x += dt v */
static void move_a(md_sys *s, double dt) {
    const int n = s->nlocal;
    double *x = s->x, *v = s->v;
    const double *f = s->f;
    const double h = 0.5 * dt;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < 3 * n; ++k) {
        v[k] += h * f[k];
        x[k] += dt * v[k];
    }
}

/* moveb: v += dt/2 f; returns the local kinetic energy */
static double move_b(md_sys *s, double dt) {
    const int n = s->nlocal;
    double *v = s->v;
    const double *f = s->f;
    const double h = 0.5 * dt;
    double ks = 0.0, kc = 0.0;
#pragma omp parallel reduction(+ : ks, kc)
    {
        double s1 = 0.0, c1 = 0.0;
#pragma omp for schedule(static)
        for (int i = 0; i < n; ++i) {
            double e = 0.0;
            for (int k = 3 * i; k < 3 * i + 3; ++k) {
                v[k] += h * f[k];
                e += v[k] * v[k];
            }
            acc(&s1, &c1, e);
        }
        ks += s1;
        kc += c1;
    }
    return 0.5 * (ks + kc);
}

static double kinetic(const md_sys *s) {
    const int n = s->nlocal;
    const double *v = s->v;
    double ks = 0.0, kc = 0.0;
#pragma omp parallel reduction(+ : ks, kc)
    {
        double s1 = 0.0, c1 = 0.0;
#pragma omp for schedule(static)
        for (int i = 0; i < n; ++i)
            acc(&s1, &c1, v[3 * i] * v[3 * i] + v[3 * i + 1] * v[3 * i + 1] + v[3 * i + 2] * v[3 * i + 2]);
        ks += s1;
        kc += c1;
    }
    return 0.5 * (ks + kc);
}

/* Global momentum (3 components). */
static void momentum(const md_sys *s, double p[3]) {
    double loc[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i < s->nlocal; ++i)
        for (int d = 0; d < 3; ++d) loc[d] += s->v[3 * i + d];
    MPI_Allreduce(loc, p, 3, MPI_DOUBLE, MPI_SUM, s->cart);
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
                    int mine = 1;
                    for (int d = 0; d < 3; ++d)
                        if (!(p[d] >= s->lo[d] && p[d] < s->hi[d])) mine = 0;
                    if (!mine) continue;
                    ensure_atoms(s, s->nlocal + 1);
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
    momentum(s, pm);
    for (int i = 0; i < s->nlocal; ++i)
        for (int d = 0; d < 3; ++d) s->v[3 * i + d] -= pm[d] / natoms;
    double ke_loc = kinetic(s), ke = 0.0;
    MPI_Allreduce(&ke_loc, &ke, 1, MPI_DOUBLE, MPI_SUM, s->cart);
    const double tcur = 2.0 * ke / (3.0 * natoms - 3.0);
    const double scale = tcur > 0.0 ? sqrt(o->temp / tcur) : 0.0;
    for (int i = 0; i < 3 * s->nlocal; ++i) s->v[i] *= scale;
}

/* Brute-force O(N^2) minimum-image check of forces, energy and virial on rank
 * 0 (owned atoms of every rank gathered by global id).  Returns the largest
 * relative error on every rank. */
static double check_forces(md_sys *s, long natoms, double epot, double vir) {
    const kc_ctx *ctx = s->ctx;
    const int n = s->nlocal;
    double *pack = kc_malloc(ctx, (size_t)(n ? n : 1) * 7 * sizeof(double));
    for (int i = 0; i < n; ++i) {
        for (int k = 0; k < 3; ++k) {
            pack[7 * i + k] = s->x[3 * i + k];
            pack[7 * i + 3 + k] = s->f[3 * i + k];
        }
        pack[7 * i + 6] = (double)s->id[i];
    }
    int cnt = 7 * n;
    int *counts = NULL, *displs = NULL;
    double *all = NULL;
    if (ctx->rank == 0) {
        counts = kc_malloc(ctx, (size_t)ctx->nranks * sizeof(int));
        displs = kc_malloc(ctx, (size_t)ctx->nranks * sizeof(int));
    }
    MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, s->cart);
    long total = 0;
    if (ctx->rank == 0) {
        for (int r = 0; r < ctx->nranks; ++r) {
            displs[r] = (int)total;
            total += counts[r];
        }
        all = kc_malloc(ctx, (size_t)(total ? total : 1) * sizeof(double));
    }
    MPI_Gatherv(pack, cnt, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, s->cart);
    double worst = 0.0;
    if (ctx->rank == 0) {
        const long N = natoms;
        double *xg = kc_malloc(ctx, (size_t)N * 3 * sizeof(double));
        double *fc = kc_malloc(ctx, (size_t)N * 3 * sizeof(double));
        double *fb = kc_malloc(ctx, (size_t)N * 3 * sizeof(double));
        char *seen = calloc((size_t)N, 1);
        if (!seen) kc_abort(ctx, "out of memory");
        int bad_ids = total != 7 * N;
        for (long r = 0; r < total / 7; ++r) {
            const double *p = all + 7 * r;
            const long g = (long)p[6];
            if (g < 0 || g >= N || seen[g]) {
                bad_ids = 1;
                continue;
            }
            seen[g] = 1;
            for (int k = 0; k < 3; ++k) {
                xg[3 * g + k] = p[k];
                fc[3 * g + k] = p[3 + k];
            }
        }
        if (bad_ids) {
            worst = INFINITY;
        } else {
            const double box = s->box, rc2 = s->rc2, ecut = s->ecut;
            double eb = 0.0, wb = 0.0;
            memset(fb, 0, (size_t)N * 3 * sizeof(double));
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
                    const double r2i = 1.0 / r2, r6i = r2i * r2i * r2i;
                    const double fpair = 48.0 * r6i * (r6i - 0.5) * r2i;
                    for (int k = 0; k < 3; ++k) {
                        fb[3 * i + k] += dr[k] * fpair;
                        fb[3 * j + k] -= dr[k] * fpair;
                    }
                    eb += 4.0 * r6i * (r6i - 1.0) - ecut;
                    wb += fpair * r2;
                }
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
        free(xg);
        free(fc);
        free(fb);
        free(seen);
    }
    MPI_Bcast(&worst, 1, MPI_DOUBLE, 0, s->cart);
    free(pack);
    free(counts);
    free(displs);
    free(all);
    return worst;
}

enum { T_FORCE, T_MOVOUT, T_SUM, T_MOVEA, T_MOVEB, T_NEIGH, T_COUNT };
static const char *const timer_keys[T_COUNT] = {"t_force", "t_movout", "t_sum",
                                                 "t_movea", "t_moveb", "t_neigh"};
#define MD_MAX_STEPS 1000000000L /* --min-time's cap: --steps' own limit */

/* ---- the run: set-up, steps, verification, report -------------------------- */

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

/* Initial capacity: owned + ghosts of the extended sub-box, first-touched by
 * the threads with the schedule of the compute loops. */
static void alloc_atoms(md_sys *s, const options *o) {
    s->trange = kc_malloc(s->ctx, 2 * (size_t)s->ctx->threads * sizeof(int));
    double ext = 1.0;
    for (int d = 0; d < 3; ++d) ext *= s->hi[d] - s->lo[d] + 2.0 * s->rn;
    const double est = 1.3 * ext * o->density + 1024.0;
    const int cap = est > 2e9 ? 2000000000 : (int)est;
    ensure_atoms(s, cap);
    double *x = s->x, *v = s->v, *f = s->f;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < 3 * cap; ++k) x[k] = v[k] = f[k] = 0.0;
    s->maxn = (int)(1.5 * o->density * 4.0 / 3.0 * 3.14159265358979 * s->rn2 * s->rn) + 16;
}

/* Sums over ranks of the kinetic energy, potential energy and virial. */
static void global_sums(const md_sys *s, double ke, double pe, double vir, double glob[3]) {
    double loc[3] = {ke, pe, vir};
    MPI_Allreduce(loc, glob, 3, MPI_DOUBLE, MPI_SUM, s->cart);
}

/* Thermodynamic state per atom. */
typedef struct { double ke, pe, vir, e, temp, press; } thermo;

static thermo thermo_of(const double glob[3], double N, double V) {
    thermo t;
    t.ke = glob[0] / N;
    t.pe = glob[1] / N;
    t.vir = glob[2] / N;
    t.e = t.ke + t.pe;
    t.temp = 2.0 * glob[0] / (3.0 * N - 3.0);
    t.press = (2.0 * glob[0] + glob[2]) / (3.0 * V); /* as LAMMPS: dof T = 2 KE */
    return t;
}

/* What the timed steps gave. */
typedef struct {
    long steps;            /* steps run (--steps, or more with --min-time) */
    double t_loop;         /* this rank's wall time of the steps */
    double tph[T_COUNT];   /* this rank's phase sums */
    double drift_max;      /* largest relative energy drift seen */
    double epot, vir;      /* this rank's share after the last step */
    long calib_steps;      /* --min-time: steps that set the count (0: none) */
    double calib_pace;     /* their seconds per step on this rank */
    kc_call_stat call;     /* median and trimmed mean of the steps' wall times,
                              slowest rank per step (kc_call_stats) */
} run_t;

/* One velocity-Verlet step, each phase charged to its timer as miniMD's
 * timer.stamp() does; returns the total energy per atom after it. */
static double md_step(md_sys *s, const options *o, long step, double N, kc_timer *tm,
                      run_t *r) {
    kc_stamp_skip(tm);
    move_a(s, o->dt);
    kc_stamp(tm, T_MOVEA);
    if (step % o->rebuild == 0) {
        migrate(s);
        borders(s);
        kc_stamp(tm, T_MOVOUT);
        build_neighbours(s);
        kc_stamp(tm, T_NEIGH);
    } else {
        update_ghosts(s);
        kc_stamp(tm, T_MOVOUT);
    }
    compute_forces(s, &r->epot, &r->vir);
    kc_stamp(tm, T_FORCE);
    const double kel = move_b(s, o->dt);
    kc_stamp(tm, T_MOVEB);
    double glob[3];
    global_sums(s, kel, r->epot, r->vir, glob);
    kc_stamp(tm, T_SUM);
    return (glob[0] + glob[1]) / N;
}

/* The timed steps.  --min-time: the first min(--steps, --rebuild-every) steps
 * calibrate; the count becomes max(--steps, enough steps for min_time seconds),
 * the same on every rank. */
static void run_steps(md_sys *s, const options *o, double N, double e0, run_t *r) {
    kc_timer tm;
    const long calib = o->min_time > 0.0 ? (o->steps < o->rebuild ? o->steps : o->rebuild) : 0;
    long steps = o->steps;
    double *step_wall = kc_malloc(s->ctx, (size_t)steps * sizeof *step_wall);
    r->drift_max = 0.0;
    MPI_Barrier(s->cart);
    kc_timer_start(&tm);
    const double t_start = tm.last;
    double stamp = t_start;
    for (long step = 1; step <= steps; ++step) {
        const double dr = fabs(md_step(s, o, step, N, &tm, r) - e0) / fabs(e0);
        if (dr > r->drift_max) r->drift_max = dr;
        if (step == calib) {
            const double t_calib = kc_now() - t_start;
            r->calib_steps = calib;
            r->calib_pace = t_calib / (double)calib;
            steps = kc_min_time_count(s->ctx, o->steps, o->min_time, t_calib, calib, MD_MAX_STEPS);
            if (steps > o->steps) { /* room for the steps --min-time added */
                double *more = kc_malloc(s->ctx, (size_t)steps * sizeof *more);
                memcpy(more, step_wall, (size_t)(step - 1) * sizeof *more);
                free(step_wall);
                step_wall = more;
            }
        }
        const double now = kc_now();
        step_wall[step - 1] = now - stamp;
        stamp = now;
    }
    r->t_loop = kc_now() - t_start;
    r->steps = steps;
    r->call = kc_call_stats(s->ctx, step_wall, steps);
    free(step_wall);
    memcpy(r->tph, tm.t, sizeof r->tph);
}

/* The checks every run makes, and their figures. */
typedef struct {
    thermo end;
    long count, lost;
    double pmax, drift, force_err;
    int ok_count, ok_mom, ok_drift, ok_lost, ok_forces, verified;
} verdict;

static void verify(md_sys *s, const options *o, long natoms, double e0, const run_t *r,
                   verdict *v) {
    const kc_ctx *ctx = s->ctx;
    const double N = (double)natoms, V = s->box * s->box * s->box;
    if (KC_FAULT_INJECTED && ctx->rank == 0 && s->nlocal > 0) s->v[0] += 1.0;
    double pm[3], glob[3];
    momentum(s, pm);
    long nl = s->nlocal;
    MPI_Allreduce(&nl, &v->count, 1, MPI_LONG, MPI_SUM, s->cart);
    MPI_Allreduce(&s->lost, &v->lost, 1, MPI_LONG, MPI_SUM, s->cart);
    global_sums(s, kinetic(s), r->epot, r->vir, glob);
    v->end = thermo_of(glob, N, V);
    v->drift = fabs(v->end.e - e0) / fabs(e0);
    v->pmax = 0.0;
    for (int d = 0; d < 3; ++d) v->pmax = fmax(v->pmax, fabs(pm[d]) / N);
    v->ok_count = v->count == natoms;
    v->ok_mom = v->pmax < 1e-10;
    v->ok_drift = v->drift < o->drift_tol;
    v->ok_lost = v->lost == 0;
    v->force_err = 0.0;
    v->ok_forces = 1;
    if (o->check_forces) {
        migrate(s);
        borders(s);
        build_neighbours(s);
        double ep = 0.0, vr = 0.0;
        compute_forces(s, &ep, &vr);
        if (KC_FAULT_INJECTED && ctx->rank == 0 && s->nlocal > 0) s->f[0] += 1.0;
        double l2[2] = {ep, vr}, g2[2];
        MPI_Allreduce(l2, g2, 2, MPI_DOUBLE, MPI_SUM, s->cart);
        v->force_err = check_forces(s, natoms, g2[0], g2[1]);
        v->ok_forces = v->force_err <= 1e-10;
        long l3 = s->lost, g3 = 0;
        MPI_Allreduce(&l3, &g3, 1, MPI_LONG, MPI_SUM, s->cart);
        v->lost = g3;
    }
    v->verified = v->ok_count && v->ok_mom && v->ok_drift && v->ok_lost && v->ok_forces;
}

static void print_start(const md_sys *s, const options *o, long natoms, long ghosts0,
                        const thermo *t0) {
    printf("md: %ld atoms (fcc L=%ld, density %g), box %.6g, cutoff %g, skin %g, dt %g, "
           "%ld steps, rebuild every %ld, %s lists, preset %s\n",
           natoms, o->L, o->density, s->box, o->cutoff, o->skin, o->dt, o->steps, o->rebuild,
           o->full_list ? "full" : "half", o->preset);
    printf("md: %d ranks (%dx%dx%d) x %d threads, mode %s, %ld ghost atoms at step 0\n",
           s->ctx->nranks, s->dims[0], s->dims[1], s->dims[2], s->ctx->threads,
           kc_mode_name(s->ctx->mode), ghosts0);
    printf("md: step 0: pe_0 = %.17g virial_0 = %.17g\n", t0->pe, t0->vir);
    printf("md: step 0: T %.6f  e_kin %.8f  e_pot %.8f  e_total %.8f  press %.8f\n", t0->temp,
           t0->ke, t0->pe, t0->e, t0->press);
}

/* Timings over ranks. */
typedef struct {
    kc_stat st[T_COUNT];
    double t_total, t_comm, t_comp, fom;
} md_times;

static void print_end(const options *o, long natoms, const run_t *r, const verdict *v,
                      const md_times *t) {
    const kc_stat *st = t->st;
    printf("md: step %ld: T %.6f  e_kin %.8f  e_pot %.8f  e_total %.8f  press %.8f\n", r->steps,
           v->end.temp, v->end.ke, v->end.pe, v->end.e, v->end.press);
    printf("md: phases (max over ranks, s): force %.4f movout %.4f sum %.4f movea %.4f "
           "moveb %.4f neigh %.4f; total %.4f\n",
           st[T_FORCE].max, st[T_MOVOUT].max, st[T_SUM].max, st[T_MOVEA].max, st[T_MOVEB].max,
           st[T_NEIGH].max, t->t_total);
    printf("md: %.6g atom-steps/s\n", t->fom);
    printf("md: verification %s: atoms %ld of %ld, lost %ld, |P|/N %.3e (limit 1e-10), "
           "drift %.3e (limit %g), max drift %.3e%s\n",
           v->verified ? "PASSED" : "FAILED", v->count, natoms, v->lost, v->pmax, v->drift,
           o->drift_tol, r->drift_max,
           o->check_forces ? (v->ok_forces ? ", forces match brute force" : ", FORCES DIFFER") : "");
}

static void json_number_17g(kc_json *j, const char *key, double value) {
    char num[64];
    snprintf(num, sizeof num, "%.17g", value);
    kc_json_raw(j, key, isfinite(value) ? num : "null");
}

static void report(const md_sys *s, const options *o, long natoms, const thermo *t0,
                   const run_t *r, const verdict *v, const md_times *t) {
    const kc_ctx *ctx = s->ctx;
    if (ctx->rank == 0) print_end(o, natoms, r, v, t);
    kc_json j;
    kc_json_begin(&j);
    kc_json_common(&j, ctx);
    kc_json_int(&j, "size", natoms);
    kc_json_int(&j, "atoms", natoms);
    kc_json_int(&j, "steps", r->steps);
    kc_json_int(&j, "cells_per_side", o->L);
    kc_json_str(&j, "preset", o->preset);
    kc_json_num(&j, "density", o->density);
    kc_json_num(&j, "cutoff", o->cutoff);
    kc_json_num(&j, "skin", o->skin);
    kc_json_num(&j, "dt", o->dt);
    kc_json_int(&j, "rebuild_every", o->rebuild);
    kc_json_str(&j, "neighbour_list", o->full_list ? "full" : "half");
    char dims[64];
    snprintf(dims, sizeof dims, "[%d,%d,%d]", s->dims[0], s->dims[1], s->dims[2]);
    kc_json_raw(&j, "decomposition", dims);
    kc_json_num(&j, "t_total_s", t->t_total);
    kc_json_num(&j, "t_comp_s", t->t_comp);
    kc_json_num(&j, "t_comm_s", t->t_comm);
    for (int k = 0; k < T_COUNT; ++k) kc_json_stat(&j, timer_keys[k], t->st[k]);
    kc_json_num(&j, "fom", t->fom);
    kc_json_str(&j, "fom_unit", "atom-steps/s");
    kc_json_num(&j, "e_kin_0", t0->ke);
    kc_json_num(&j, "e_pot_0", t0->pe);
    kc_json_num(&j, "e_total_0", t0->e);
    kc_json_num(&j, "e_kin_end", v->end.ke);
    kc_json_num(&j, "e_pot_end", v->end.pe);
    kc_json_num(&j, "e_total_end", v->end.e);
    json_number_17g(&j, "pe_0", t0->pe);
    json_number_17g(&j, "virial_0", t0->vir);
    kc_json_num(&j, "drift", v->drift);
    kc_json_num(&j, "drift_max", r->drift_max);
    kc_json_num(&j, "drift_tol", o->drift_tol);
    kc_json_num(&j, "momentum", v->pmax);
    kc_json_num(&j, "temp_0", t0->temp);
    kc_json_num(&j, "temp_end", v->end.temp);
    kc_json_num(&j, "press_0", t0->press);
    kc_json_num(&j, "press_end", v->end.press);
    kc_json_int(&j, "atoms_end", v->count);
    kc_json_int(&j, "lost", v->lost);
    if (o->check_forces) kc_json_num(&j, "force_check_rel_err", v->force_err);
    /* added: per-step times (sums / steps) and the --min-time that set the count */
    kc_json_int(&j, "steps_requested", o->steps);
    kc_json_num(&j, "min_time_s", o->min_time);
    kc_json_int(&j, "calib_steps", r->calib_steps);
    kc_json_num(&j, "calib_t_step_s", r->calib_pace);
    kc_json_num(&j, "t_step_s", t->t_total / (double)r->steps);
    char key[40];
    for (int k = 0; k < T_COUNT; ++k) {
        snprintf(key, sizeof key, "%s_step_s", timer_keys[k]);
        kc_json_num(&j, key, t->st[k].max / (double)r->steps);
    }
    kc_json_call_stat(&j, r->call); /* per step: t_call_median_s, t_call_trimmed_s */
    kc_json_bool(&j, "verified", v->verified);
    kc_json_emit(&j, ctx);
}

static void free_system(md_sys *s) {
    for (int q = 0; q < 6; ++q) free(s->swap[q].list);
    void *arrays[] = {s->x, s->v, s->f, s->id, s->cell_start, s->cell_atoms, s->atom_cell,
                      s->xb, s->idtmp, s->nbr, s->numtwo, s->numone, s->rowmax, s->trange,
                      s->fthr, s->scratch, s->jscratch, s->sbuf, s->rbuf};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; ++k) free(arrays[k]);
    MPI_Comm_free(&s->cart);
}

static void fail_verification(const kc_ctx *ctx, const options *o, long natoms, const verdict *v) {
    char why[256] = "";
    const size_t cap = sizeof why;
    if (!v->ok_count) snprintf(why + strlen(why), cap - strlen(why), " atoms %ld != %ld;", v->count, natoms);
    if (!v->ok_mom) snprintf(why + strlen(why), cap - strlen(why), " |P|/N %.3e >= 1e-10;", v->pmax);
    if (!v->ok_drift) snprintf(why + strlen(why), cap - strlen(why), " energy drift %.3e >= %g;", v->drift, o->drift_tol);
    if (!v->ok_lost) snprintf(why + strlen(why), cap - strlen(why), " %ld atoms outside their sub-box;", v->lost);
    if (!v->ok_forces) snprintf(why + strlen(why), cap - strlen(why), " forces differ from brute force by %.3e;", v->force_err);
    kc_fail(ctx, 3, "verification FAILED:%s", why);
}

int main(int argc, char **argv) {
    options o;
    int help = 0;
    char errbuf[256];
    const char *err = parse(argc, argv, &o, &help, errbuf, sizeof errbuf);
    kc_ctx ctx;
    kc_init(&ctx, &argc, &argv, "md", o.mode, err, help ? HELP : NULL);

    md_sys s;
    memset(&s, 0, sizeof s);
    s.ctx = &ctx;
    s.full = o.full_list;
    s.box = (double)o.L * cbrt(4.0 / o.density);
    s.rc2 = o.cutoff * o.cutoff;
    s.rn = o.cutoff + o.skin;
    s.rn2 = s.rn * s.rn;
    const double r6i = 1.0 / (s.rc2 * s.rc2 * s.rc2);
    s.ecut = 4.0 * r6i * (r6i - 1.0);
    const long natoms = 4 * o.L * o.L * o.L;
    const double N = (double)natoms, V = s.box * s.box * s.box;
    setup_decomposition(&s);
    setup_grid(&s);
    alloc_atoms(&s, &o);
    create_atoms(&s, &o);

    /* step 0 (untimed set-up): ghosts, lists, forces, sums */
    run_t r;
    memset(&r, 0, sizeof r);
    migrate(&s);
    borders(&s);
    build_neighbours(&s);
    compute_forces(&s, &r.epot, &r.vir);
    double glob[3];
    global_sums(&s, kinetic(&s), r.epot, r.vir, glob);
    const thermo t0 = thermo_of(glob, N, V);
    long ghosts_loc = s.nall - s.nlocal, ghosts0 = 0;
    MPI_Reduce(&ghosts_loc, &ghosts0, 1, MPI_LONG, MPI_SUM, 0, s.cart);
    if (ctx.rank == 0) print_start(&s, &o, natoms, ghosts0, &t0);

    run_steps(&s, &o, N, t0.e, &r);
    verdict v;
    verify(&s, &o, natoms, t0.e, &r, &v);

    md_times t;
    MPI_Allreduce(&r.t_loop, &t.t_total, 1, MPI_DOUBLE, MPI_MAX, s.cart);
    for (int k = 0; k < T_COUNT; ++k) t.st[k] = kc_stat_over_ranks(&ctx, r.tph[k]);
    double comm_loc = r.tph[T_MOVOUT] + r.tph[T_SUM];
    MPI_Allreduce(&comm_loc, &t.t_comm, 1, MPI_DOUBLE, MPI_MAX, s.cart);
    t.t_comp = t.t_total - t.t_comm;
    t.fom = N * (double)r.steps / t.t_total;
    report(&s, &o, natoms, &t0, &r, &v, &t);

    free_system(&s);
    if (!v.verified) fail_verification(&ctx, &o, natoms, &v);
    return kc_finalize(&ctx);
}
