/* md: the pieces of the hybrid Lennard-Jones MD (see ../md.c for the method).
 * One file per phase, as Mantevo miniMD's ref/ does:
 *   atom.c       the atom arrays and buffers, and their growth
 *   setup.c      the rank grid and the sub-boxes, the fcc lattice and velocities
 *   comm.c       migration, ghost build, per-step halo refresh (six face exchanges)
 *   neighbor.c   cell binning, the spatial sort, the Verlet lists
 *   force.c      Lennard-Jones forces, energy and virial
 *   integrate.c  velocity Verlet, the timed steps (--min-time)
 *   thermo.c     kinetic energy, momentum, sums over ranks, thermodynamic state
 *   verify.c     the checks of every run, the brute-force force check
 *   report.c     readable lines, the RESULT line, the failure message
 */
#ifndef MD_H
#define MD_H

#include "kernel_common.h"

#include <limits.h>
#include <math.h>

/* The most atoms (owned + ghosts) one rank holds: the arrays are indexed by
 * int, with 3 doubles per atom in the loops over coordinates.  md_alloc_atoms
 * refuses a system whose estimate exceeds it (status 2); growth beyond it aborts. */
#define MD_MAX_ATOMS (INT_MAX / 3)

#define MD_MAX_STEPS 1000000000L /* --steps' limit, and --min-time's cap */
/* Steps that --drift-tol bounds as it is; a longer run's bound is --drift-tol x
 * steps / MD_DRIFT_REF_STEPS (md_drift_bound in verify.c says why). */
#define MD_DRIFT_REF_STEPS 5000L

/* The most pairs within the cutoff that lists not rebuilt at the last step may
 * lack, as a fraction of them (md_verify says why). */
#define MD_STALE_MAX 0.01

typedef struct {
    kc_mode mode;
    long L, steps, rebuild;
    double density, temp, cutoff, skin, dt, drift_tol, min_time;
    int check_forces, full_list;
    int L_given; /* --cells-per-side given: --preset leaves L alone */
    const char *preset;
} options;

/* One face exchange of the ghost build and the per-step halo refresh. */
typedef struct {
    int dim;         /* the dimension of the face (0 x, 1 y, 2 z) */
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
    double need;            /* bytes of the arrays per rank, the largest over ranks
                             * (md_alloc_atoms' check): md_need_step_times adds to it */
} md_sys;

/* Phase timers as in the paper. */
enum { T_FORCE, T_MOVOUT, T_SUM, T_MOVEA, T_MOVEB, T_NEIGH, T_COUNT };

/* Thermodynamic state per atom. */
typedef struct { double ke, pe, vir, e, temp, press; } thermo;

/* What the timed steps gave. */
typedef struct {
    long steps;            /* steps run (--steps, or more with --min-time) */
    double t_loop;         /* this rank's wall time of the steps */
    double tph[T_COUNT];   /* this rank's phase sums */
    double drift_max;      /* largest energy drift seen (md_drift_scale) */
    double epot, vir;      /* this rank's share after the last step */
    long calib_steps;      /* --min-time: steps that set the count (0: none) */
    double calib_pace;     /* their seconds per step on this rank */
    kc_call_stat call;     /* median and trimmed mean of the steps' wall times,
                              slowest rank per step (kc_call_stats) */
} run_t;

/* The checks every run makes, and their figures. */
typedef struct {
    thermo end;
    long count, lost;
    double pmax, drift, force_err;
    double drift_bound;    /* the drift's bound for the steps run (md_drift_bound) */
    long count_0;          /* atoms at step 0, all ranks */
    double temp_err;       /* |T_0 - --temp| / --temp (absolute if --temp is 0) */
    double pe_lat, vir_lat; /* the fcc lattice's energy and virial per atom */
    double pe_err, vir_err; /* |x_0 - x_lattice| / (sum of |pair terms| per atom) */
    int vir_at_cutoff;     /* a lattice shell lies on the cutoff: virial not compared */
    long list_0;           /* pairs within cutoff+skin missing from (or repeated in) the step-0 lists */
    long list_bad;         /* the same for the last step's lists if it rebuilt them */
    long list_dangerous;   /* else pairs within the cutoff missing from them */
    long list_within;      /* ... of the pairs within the cutoff (the cell search's) */
    int list_fresh;        /* the last step rebuilt the lists */
    int ok_count, ok_mom, ok_drift, ok_lost, ok_forces, verified;
    int ok_temp, ok_lattice, ok_list, ok_stale;
} verdict;

/* Timings over ranks. */
typedef struct {
    kc_stat st[T_COUNT];
    double t_total, t_comm, t_comp, fom;
} md_times;

/* Neumaier-compensated accumulation: the step-0 energy and virial must agree
 * across decompositions and thread counts to ~1e-12, which a plain running sum
 * of ~1e6 same-signed terms does not give (its rounding errors are systematic). */
static inline void acc(double *sum, double *comp, double term) {
    const double t = *sum + term;
    if (fabs(*sum) >= fabs(term)) *comp += (*sum - t) + term;
    else *comp += (term - t) + *sum;
    *sum = t;
}

/* Whether the point p lies inside this rank's sub-box [lo, hi) in every dimension. */
static inline int md_inside(const md_sys *s, const double p[3]) {
    for (int d = 0; d < 3; ++d)
        if (!(p[d] >= s->lo[d] && p[d] < s->hi[d])) return 0;
    return 1;
}

/* The truncated and shifted Lennard-Jones pair at squared distance r2 (inside
 * the cutoff): returns fpair, the force on i is fpair * (x_i - x_j), and adds
 * the pair energy (shifted by ecut) to *e.  The force loops and the
 * brute-force check share it. */
static inline __attribute__((always_inline)) double lj_pair(double r2, double ecut, double *e) {
    const double r2i = 1.0 / r2;
    const double r6i = r2i * r2i * r2i;
    *e += 4.0 * r6i * (r6i - 1.0) - ecut;
    return 48.0 * r6i * (r6i - 0.5) * r2i;
}

/* atom.c */
void md_ensure_atoms(md_sys *s, int n);
void md_ensure_buf(const kc_ctx *ctx, double **buf, size_t *cap, size_t n);
void md_ensure_list(const kc_ctx *ctx, swap_t *w, int n);
void md_alloc_atoms(md_sys *s, const options *o);
void md_gather3(double *restrict dst, const double *restrict src, const int *restrict idx, int n,
                int d, double shift, int min_par);
void md_free_system(md_sys *s);
/* The per-step times of the timed steps (kc_calls: a double per step), `steps`
 * of them plus `held` while kc_calls_reserve copies the first ones, with the
 * system's arrays (s->need) must fit in the node's memory as the system does
 * (kc_need_node_memory; collective, status 2): md_alloc_atoms checks --steps,
 * md_run_steps the count that --min-time raised. */
void md_need_step_times(const md_sys *s, const options *o, long steps, long held);

/* setup.c */
void md_setup(md_sys *s, const options *o, kc_ctx *ctx);

/* comm.c */
void md_migrate(md_sys *s);
void md_borders(md_sys *s);
void md_update_ghosts(md_sys *s);

/* neighbor.c */
void md_setup_grid(md_sys *s, const options *o);
void md_sort_owned(md_sys *s);
void md_build_neighbours(md_sys *s);
long md_list_mismatches(md_sys *s, double r2, long *pairs);

/* force.c */
void md_compute_forces(md_sys *s, double *epot_out, double *vir_out);

/* integrate.c */
void md_run_steps(md_sys *s, const options *o, double N, const thermo *t0, run_t *r);

/* thermo.c */
double md_half_kick(double *v, const double *f, double h, int n);
double md_kinetic(const md_sys *s);
void md_momentum(const md_sys *s, double p[3]);
void md_global_sums(const md_sys *s, double ke, double pe, double vir, double glob[3]);
thermo md_thermo_of(const double glob[3], double N, double V);
double md_drift_scale(const thermo *t0);

/* verify.c */
void md_verify(md_sys *s, const options *o, long natoms, const thermo *t0, long count_0,
               long list_0, const run_t *r, verdict *v);

/* report.c */
void md_print_start(const md_sys *s, const options *o, long natoms, long ghosts0,
                    const thermo *t0);
void md_summarise(const kc_ctx *ctx, long natoms, const run_t *r, md_times *t);
void md_report(const md_sys *s, const options *o, long natoms, const thermo *t0, const run_t *r,
               const verdict *v, const md_times *t);
void md_fail_verification(const kc_ctx *ctx, const options *o, long natoms, const verdict *v)
    __attribute__((noreturn));

#endif
