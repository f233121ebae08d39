/* spmv: Chow & Hysom's hybrid sparse matrix-vector product (science.md, 000).
 *
 * Matrix: the 27-point stencil of a 3-D PDE on a regular global grid, stored in
 * CSR (double values, 32-bit int column indices and row pointers), assembled by
 * every rank for the points it owns; there is no global matrix anywhere.  The
 * diagonal is 26 and the 26 off-diagonals are -1.  Boundary condition:
 * homogeneous Dirichlet -- grid points outside the global domain are zero, so
 * their matrix entries are simply absent (boundary rows have fewer than 27
 * nonzeros).
 *
 * Decomposition (weak scaling, N^3 rows per core):
 *   - a rank that runs T threads owns a box of (a*N) x (b*N) x (c*N) points where
 *     (a,b,c) are the factors of MPI_Dims_create(T, 3) sorted descending:
 *     2N x N x N for T=2, 2N x 2N x N for T=4, 2N x 2N x 2N for T=8 (the paper's
 *     shapes), 3N x 2N x N for T=6, ...;  the x axis (fastest in memory) is the
 *     longest one.  mpi mode: T = 1.  serial mode: one thread but the box of
 *     T = --decomp-threads (default OMP_NUM_THREADS from the environment), i.e.
 *     the hybrid decomposition run on one thread (needed for e_mt).
 *   - ranks form a px x py x pz grid from MPI_Dims_create(nranks, 3), rank
 *     r = (cx*py + cy)*pz + cz; the global grid is (px*nx) x (py*ny) x (pz*nz).
 *
 * The local x has a ghost layer, (nx+2)(ny+2)(nz+2) values; CSR column indices
 * point into it.  One SpMV call: (1) pack the outgoing faces/edges/corners (an
 * OpenMP loop in the hybrid modes), (2) MPI_Irecv + MPI_Isend with up to 26
 * neighbours, (3) MPI_Waitall and unpack into the ghost layer, (4) y = A x.
 * Modes:
 *   mpi        one thread per rank;
 *   masteronly pack and SpMV are OpenMP loops, MPI only outside parallel regions
 *              (MPI_THREAD_FUNNELED);
 *   funneled   one parallel region per call: all threads pack, barrier, the
 *              master posts/waits/unpacks the halo while the other threads
 *              compute the interior rows (rows that touch no ghost value),
 *              barrier, then all threads compute the boundary rows;
 *   serial     see above.  `multiple` is rejected (no such variant in the paper).
 * All buffers are allocated once before the timed loop and first-touched by
 * the threads that use them with the compute loops' static schedule.
 *
 * Interior / boundary split (all modes): the CSR rows are stored interior rows
 * first (rows that read no ghost value a neighbour sends; rows on the global
 * domain's Dirichlet boundary are interior), then the boundary rows, each group
 * in grid order.  Every mode computes them as two loops and times both per
 * call: in mpi, masteronly and serial the interior loop (static schedule, then
 * its barrier) runs after the exchange and is followed by the boundary loop;
 * in funneled the interior time is the slowest worker's overlapped interior
 * chunk.  This gives, from masteronly runs, Rabenseifner's (001) overlap model
 * fractions of T = t_total: f_comp,overlap = t_comp_interior / T,
 * f_comp,non = (t_comp_boundary + t_pack) / T, f_comm = t_comm / T.
 * t_comp = t_comp_interior + t_comp_boundary per call.
 *
 * Verification (every run): x_i = 1 + ((7 gx + 13 gy + 17 gz) mod 11) from the
 * GLOBAL coordinates of point i.  After the timed loop (untimed) the ghost
 * layer of x and the send and receive buffers are set to NaN and one more call
 * of the same mode is made (x never changes, so without this only the first
 * exchange would really be checked); y of that call is compared with a
 * recomputation that uses neither the CSR matrix nor the halo: for every owned
 * point the 27 stencil offsets are visited in global coordinates, skipping
 * points outside the domain.  Pass: max|y - yref| / max|yref| <= 1e-12 (the
 * 27 terms are small integers: y is exact in any order of summation, so any
 * difference is an error), and no interior row may read a received ghost.
 *
 * Traffic model (bytes_per_iter_model, for the roofline against stream): per
 * call 12 bytes per nonzero (8 value + 4 column index) + 8 bytes per row for
 * y + 8 bytes per row for x (each x value read once from memory) + 4 bytes
 * per row for the row pointer = 12 nnz + 20 rows.
 *
 * Performance: the row loop is an OpenMP simd reduction (AVX gathers; the
 * summation order differs from a sequential loop only by rounding), rows of
 * exactly 27 nonzeros take a fixed-trip-count path with software prefetch of
 * val/col, and the big arrays are 2 MiB aligned with MADV_HUGEPAGE.
 *
 * Figure of merit: GFLOP/s = 2 flops per nonzero x global nnz x calls / t_total,
 * t_total = wall time of the timed loop, max over ranks.
 *
 * --min-time S: after the warm-up the number of timed calls becomes
 * max(--iters, the calls that last S seconds at the pace of a calibration),
 * agreed across ranks; RESULT's "iters" is that count, "iters_requested" the
 * one asked for, and t_call_s / t_{pack,comm,comp}_call_s the per-call times.
 * Every timed call's wall time is kept as well: t_call_median_s and
 * t_call_trimmed_s are the median and the 10% trimmed mean over the calls of
 * the slowest rank's time per call (kc_call_stats).
 *
 * Files: this driver (options, the order of the phases) and spmv/ with one
 * file per phase (problem.c, calls.c, verify.c, report.c; see spmv/spmv.h).
 */
#define _GNU_SOURCE
#include "spmv/spmv.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *HELP =
    "usage: spmv [--mode mpi|masteronly|funneled|serial] [--n N] [--iters K]\n"
    "            [--warmup W] [--min-time S] [--decomp-threads T] [--times-file PATH]\n"
    "  Chow & Hysom hybrid SpMV: y = A x, A the 27-point stencil of a 3-D PDE\n"
    "  (diagonal 26, off-diagonals -1) on a regular grid, homogeneous Dirichlet\n"
    "  boundary (points outside the global domain are zero/absent), CSR with\n"
    "  32-bit indices, halo exchange with up to 26 neighbours per call.\n"
    "  Weak scaling: N^3 rows per core.  A rank with T threads owns a box of\n"
    "  aN x bN x cN points, (a,b,c) = MPI_Dims_create(T,3) sorted descending\n"
    "  (2NxNxN for T=2, 2Nx2NxN for 4, 2Nx2Nx2N for 8); ranks form the grid\n"
    "  MPI_Dims_create(nranks,3).\n"
    "  --mode   mpi: 1 thread per rank (default);\n"
    "           masteronly: OMP_NUM_THREADS threads pack and compute, MPI outside\n"
    "             parallel regions (MPI_THREAD_FUNNELED);\n"
    "           funneled: the master thread exchanges the halo while the other\n"
    "             threads compute the interior rows, then all do the boundary rows;\n"
    "           serial: 1 thread on the box of --decomp-threads threads (the\n"
    "             hybrid decomposition on one thread, for e_mt);\n"
    "           multiple is not supported.\n"
    "  --n N    points per core along one axis, N^3 rows per core (default 16)\n"
    "  --iters K  timed SpMV calls (default 100); times are sums over the calls\n"
    "  --warmup W untimed calls before (default 3)\n"
    "  --min-time S  after the warm-up, time at least S seconds: the calls become\n"
    "           max(K, enough calls for S seconds judged from a calibration of\n"
    "           1, 2, 4, ... calls until one batch lasts S/10), the same on every\n"
    "           rank (default 0: exactly K).  K stays a floor, so a slow call (the\n"
    "           serial box of a whole node) runs K calls after one calibration call\n"
    "  --decomp-threads T  serial mode only: box of T threads (default: the\n"
    "           OMP_NUM_THREADS environment variable, else the online cores)\n"
    "  --times-file PATH  rank 0 writes its per-call pack/comm/comp times there\n"
    "  --help   this text\n"
    "  Verification: x = 1 + ((7gx+13gy+17gz) mod 11) of the global coordinates;\n"
    "  after the timed calls the ghost layer and halo buffers are set to NaN and\n"
    "  one more call is made; its y must match a stencil recomputation to\n"
    "  max|y-yref|/max|yref| <= 1e-12, and no interior row may read a ghost.\n"
    "  RESULT fom: GFLOP/s (2 flops per nonzero, wall time of the timed loop).\n";

static const struct option longopts[] = {
    KC_ARG("n", 'n'), KC_ARG("iters", 'i'), KC_ARG("warmup", 'w'),
    KC_ARG("decomp-threads", 'd'), KC_ARG("times-file", 't'), KC_ARG("min-time", 'T'), KC_END};

/* One option with its value; NULL or the message written into err. */
static const char *parse_one(int c, const char *arg, void *opts, char *err, size_t cap) {
    options *o = opts;
    switch (c) {
    case 'n': return kc_opt_long("n", arg, 1, 100000, &o->n, err, cap);
    case 'i': return kc_opt_long("iters", arg, 1, SPMV_MAX_ITERS, &o->iters, err, cap);
    case 'w': return kc_opt_long("warmup", arg, 0, 1000, &o->warmup, err, cap);
    case 'T': return kc_opt_min_time(arg, &o->min_time, err, cap);
    case 'd': return kc_opt_long("decomp-threads", arg, 1, 4096, &o->decomp, err, cap);
    default: /* 't' */
        if (!*arg) return kc_errf(err, cap, "--times-file needs a path");
        o->times_file = arg;
        return NULL;
    }
}

/* After the options: the checks across them. */
static const char *options_done(void *opts, char *err, size_t cap) {
    const options *o = opts;
    if (o->decomp && o->mode != KC_MODE_SERIAL)
        return kc_errf(err, cap, "--decomp-threads applies to --mode serial only");
    return NULL;
}

/* Leading integer of OMP_NUM_THREADS ("4" or "4,2"); the online cores if unset. */
static long env_threads(void) {
    const char *s = getenv("OMP_NUM_THREADS");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (!s || !*s) return cores;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1) return cores;
    return v > 4096 ? 4096 : v;
}

int main(int argc, char **argv) {
    const kc_cli cli = {"spmv", HELP, longopts, parse_one, options_done,
                        ~KC_MODE_BIT(KC_MODE_MULTIPLE),
                        ": Chow & Hysom's SpMV has one communicating thread (use mpi, masteronly, "
                        "funneled or serial)"};
    options o = {.mode = KC_MODE_MPI, .n = 16, .iters = 100, .warmup = 3};
    const long env_t = env_threads(); /* before kc_start forces 1 thread in serial */
    kc_ctx ctx;
    kc_start(&ctx, &argc, &argv, &cli, &o, &o.mode);

    const int decomp = spmv_decomp_threads(&ctx, &o, env_t);
    problem P;
    spmv_setup(&ctx, &o, decomp, &P);
    FILE *tf = NULL;
    if (o.times_file && ctx.rank == 0) tf = fopen(o.times_file, "w");
    if (!kc_all_true(&ctx, !o.times_file || ctx.rank != 0 || tf))
        kc_fail(&ctx, 2, "cannot open --times-file '%s' for writing", o.times_file);

    timing tm;
    spmv_run(&ctx, &o, &P, &tm);
    spmv_result r;
    spmv_summarise(&ctx, &P, &tm, &r);
    int tf_errno = 0; /* a write or close that failed (a full disk): the file is incomplete */
    if (tf) {
        spmv_write_times(tf, &P, &tm);
        if (ferror(tf)) tf_errno = errno ? errno : EIO;
        if (fclose(tf) != 0 && !tf_errno) tf_errno = errno ? errno : EIO;
    }
    if (!kc_all_true(&ctx, tf_errno == 0))
        kc_fail(&ctx, 2, "cannot write --times-file '%s': %s", o.times_file, strerror(tf_errno));
    r.shared_core = spmv_threads_share_core(&ctx);
    r.rel_err = spmv_rel_error(&ctx, &P);
    r.interior_halo_reads = spmv_interior_halo_reads(&ctx, &P);
    r.verified = kc_all_true(&ctx, r.rel_err <= REL_TOL) && r.interior_halo_reads == 0;
    spmv_report(&ctx, &o, &P, &tm, &r);

    free(tm.per_call);
    spmv_free(&P);
    if (!r.verified && r.interior_halo_reads != 0)
        kc_fail(&ctx, 3, "verification FAILED: %ld matrix entries of interior rows read a ghost "
                         "value that a neighbour sends (max|y-yref|/max|yref| = %.3g)",
                r.interior_halo_reads, r.rel_err);
    if (!r.verified)
        kc_fail(&ctx, 3, "verification FAILED: max|y-yref|/max|yref| = %.3g > %.0e", r.rel_err,
                REL_TOL);
    return kc_finalize(&ctx);
}
