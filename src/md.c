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
 *
 * Files: this driver (options, the order of the phases) and md/ with one file
 * per phase as in Mantevo miniMD (atom.c, setup.c, comm.c, neighbor.c,
 * force.c, integrate.c, thermo.c, verify.c, report.c; see md/md.h).
 */
#include "md/md.h"

#include <getopt.h>
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
    "  --drift-tol      bound on the relative total-energy drift\n"
    "                   |E_end-E_0| / max(|E_0|, E_kin_0) (per atom; E_kin_0 keeps the\n"
    "                   scale from vanishing where E_0 ~ 0, e.g. --temp 4.2)\n"
    "                   (default 1e-3 x max(1, (dt/0.005)^2); the shifted in.lj fluid\n"
    "                   drifts by 1e-5..4e-5 over 100..1000 steps at dt 0.005, with a\n"
    "                   transient of ~3e-4 while the lattice melts; dt 0.01 gives ~2e-3);\n"
    "                   a run of more than 5000 steps is bounded by TOL x steps/5000:\n"
    "                   dangerous builds leak energy at a steady rate (in.lj: 3e-8 of\n"
    "                   |E_0| per step), so --min-time's extra steps raise the bound too\n"
    "  --preset lammps-in.lj  L=20 (32000 atoms) with the LAMMPS bench/in.lj\n"
    "                   settings (density 0.8442, T 1.44, rc 2.5, skin 0.3,\n"
    "                   dt 0.005, 100 steps, rebuild every 20); explicit options win\n"
    "  --min-time S     after the first min(steps, rebuild-every) steps, raise the\n"
    "                   step count so the timed steps last at least S seconds\n"
    "                   (default 0: exactly --steps; the count is the same on every\n"
    "                   rank; RESULT: steps, steps_requested, t_step_s)\n"
    "  --check-forces   also compare the forces, energy and virial of the last step\n"
    "                   (the lists the run used, so a dangerous build fails), then\n"
    "                   those after a rebuild, with brute-force O(N^2) minimum-image\n"
    "                   sums (small systems,\n"
    "                   at most 32000 atoms; relative tolerance 1e-10)\n"
    "  --help           this text\n"
    "  Verified on every run: particle count = 4 L^3 at step 0 and conserved,\n"
    "  |total momentum|/N < 1e-10, energy drift below --drift-tol, no atom outside\n"
    "  its sub-box after migration; at step 0 the temperature equals --temp (1e-12\n"
    "  relative) and the potential energy and virial (hence the pressure) per atom\n"
    "  equal the fcc lattice's, summed directly over the lattice within the cutoff\n"
    "  (1e-10 relative to the sum of the pair terms' magnitudes); after the steps\n"
    "  the neighbour lists hold every pair within cutoff+skin where they are built\n"
    "  (step 0, and the last step if it rebuilt them), found by a separate cell\n"
    "  search; pairs within the cutoff missing from older lists (the skin too thin\n"
    "  for --rebuild-every: LAMMPS's dangerous builds) are counted, not failed\n"
    "  (RESULT list_pairs_dangerous), up to 1% of the pairs within the cutoff:\n"
    "  more (lists never rebuilt, --rebuild-every above --steps, or a skin far too\n"
    "  thin) fail; --check-forces fails on any.\n"
    "  Quick: md --cells-per-side 8 --steps 50 (2048 atoms).\n";

/* ---- options ------------------------------------------------------------- */

enum { O_L = 1000, O_DENS, O_TEMP, O_CUT, O_SKIN, O_DT, O_STEPS, O_REB, O_TOL, O_PRESET, O_CHECK,
       O_LIST, O_MINTIME };

static const struct option longopts[] = {
    KC_ARG("cells-per-side", O_L), KC_ARG("density", O_DENS), KC_ARG("temp", O_TEMP),
    KC_ARG("cutoff", O_CUT), KC_ARG("skin", O_SKIN), KC_ARG("dt", O_DT), KC_ARG("steps", O_STEPS),
    KC_ARG("rebuild-every", O_REB), KC_ARG("drift-tol", O_TOL), KC_ARG("preset", O_PRESET),
    KC_FLAG("check-forces", O_CHECK), KC_ARG("list", O_LIST), KC_ARG("min-time", O_MINTIME),
    KC_END};

/* One option with its value; NULL or the message written into err. */
static const char *parse_one(int c, const char *arg, void *opts, char *err, size_t cap) {
    options *o = opts;
    switch (c) {
    case O_L:
        o->L_given = 1;
        return kc_opt_long("cells-per-side", arg, 1, 400, &o->L, err, cap);
    case O_DENS: return kc_opt_double("density", arg, 0, 1, 1e300, "a positive number", &o->density, err, cap);
    case O_TEMP: return kc_opt_double("temp", arg, 0, 0, 1e6, "a number in [0, 1e6]", &o->temp, err, cap);
    case O_CUT: return kc_opt_double("cutoff", arg, 0, 1, 1e300, "a positive number", &o->cutoff, err, cap);
    case O_SKIN: return kc_opt_double("skin", arg, 0, 0, 1e300, "a non-negative number", &o->skin, err, cap);
    case O_DT: return kc_opt_double("dt", arg, 0, 1, 1e300, "a positive number", &o->dt, err, cap);
    case O_TOL: return kc_opt_double("drift-tol", arg, 0, 1, 1e300, "a positive number", &o->drift_tol, err, cap);
    case O_MINTIME: return kc_opt_min_time(arg, &o->min_time, err, cap);
    case O_STEPS:
        return kc_opt_long_as("steps", arg, 1, MD_MAX_STEPS, "a positive integer (at most 1e9)",
                              &o->steps, err, cap);
    case O_REB:
        return kc_opt_long_as("rebuild-every", arg, 1, 1000000000L, "a positive integer",
                              &o->rebuild, err, cap);
    case O_CHECK: o->check_forces = 1; return NULL;
    case O_PRESET:
        if (strcmp(arg, "lammps-in.lj") != 0)
            return kc_errf(err, cap, "unknown preset '%s' (lammps-in.lj)", arg);
        o->preset = "lammps-in.lj";
        return NULL;
    default: /* O_LIST */
        if (strcmp(arg, "half") != 0 && strcmp(arg, "full") != 0)
            return kc_errf(err, cap, "--list must be half or full, got '%s'", arg);
        o->full_list = strcmp(arg, "full") == 0;
        return NULL;
    }
}

/* After the options: the defaults that depend on others, and the checks. */
static const char *options_done(void *opts, char *err, size_t cap) {
    options *o = opts;
    if (o->drift_tol == 0.0) o->drift_tol = 1e-3 * fmax(1.0, (o->dt / 0.005) * (o->dt / 0.005));
    /* Every other in.lj setting is already the default; explicit options win. */
    if (strcmp(o->preset, "lammps-in.lj") == 0 && !o->L_given) o->L = 20;
    const double box = (double)o->L * cbrt(4.0 / o->density);
    if (o->cutoff > 0.5 * box)
        return kc_errf(err, cap, "--cutoff %g is larger than half the box side %g (L=%ld, "
                                 "density %g)", o->cutoff, 0.5 * box, o->L, o->density);
    if (o->check_forces && 4 * o->L * o->L * o->L > 32000)
        return kc_errf(err, cap, "--check-forces needs at most 32000 atoms (L <= 20)");
    return NULL;
}

/* ---- the run: set-up, step 0, the timed steps, verification, report -------- */

int main(int argc, char **argv) {
    const kc_cli cli = {"md", HELP, longopts, parse_one, options_done,
                        KC_MODE_BIT(KC_MODE_MPI) | KC_MODE_BIT(KC_MODE_MASTERONLY), NULL};
    /* drift_tol 0: the dt-dependent default (options_done) */
    options o = {.mode = KC_MODE_MPI, .L = 8, .steps = 100, .rebuild = 20, .density = 0.8442,
                 .temp = 1.44, .cutoff = 2.5, .skin = 0.3, .dt = 0.005, .preset = "none"};
    kc_ctx ctx;
    kc_start(&ctx, &argc, &argv, &cli, &o, &o.mode);

    md_sys s;
    md_setup(&s, &o, &ctx);
    const long natoms = 4 * o.L * o.L * o.L;
    const double N = (double)natoms, V = s.box * s.box * s.box;

    /* step 0 (untimed set-up): ghosts, lists, forces, sums */
    run_t r = {0};
    md_migrate(&s);
    md_borders(&s);
    md_build_neighbours(&s);
    /* the lists as built hold every pair within cutoff+skin (of the options) */
    const double rn0 = o.cutoff + o.skin;
    const long list_0 = kc_sum_over_ranks(&ctx, md_list_mismatches(&s, rn0 * rn0, NULL));
    md_compute_forces(&s, &r.epot, &r.vir);
    double glob[3];
    md_global_sums(&s, md_kinetic(&s), r.epot, r.vir, glob);
    const thermo t0 = md_thermo_of(glob, N, V);
    const long ghosts0 = kc_sum_over_ranks(&ctx, s.nall - s.nlocal);
    const long count_0 = kc_sum_over_ranks(&ctx, s.nlocal);
    if (ctx.rank == 0) md_print_start(&s, &o, natoms, ghosts0, &t0);

    md_run_steps(&s, &o, N, &t0, &r);
    verdict v;
    md_verify(&s, &o, natoms, &t0, count_0, list_0, &r, &v);
    md_times t;
    md_summarise(&ctx, natoms, &r, &t);
    md_report(&s, &o, natoms, &t0, &r, &v, &t);

    md_free_system(&s);
    if (!v.verified) md_fail_verification(&ctx, &o, natoms, &v);
    return kc_finalize(&ctx);
}
