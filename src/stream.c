/* stream: STREAM triad a = b + s*c, the node's memory bandwidth for rooflines.
 *
 * Every rank runs the triad on its own arrays (n elements per core, so a rank
 * with T threads owns T*n), first-touched by the threads that use them.  Each
 * repetition is fenced by barriers and timed as the slowest rank; the figure of
 * merit is the aggregate bandwidth of the best repetition, counting 24 bytes
 * per element (read b and c, write a) as STREAM does.
 */
#include "kernel_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *HELP =
    "usage: stream [--mode mpi|masteronly] [--n ELEMENTS] [--iters K]\n"
    "  STREAM triad bandwidth of the node (GB/s, 24 bytes per element).\n"
    "  --mode   mpi: one thread per rank; masteronly: OMP_NUM_THREADS threads\n"
    "           per rank, MPI only outside parallel regions (default mpi)\n"
    "  --n      array elements per core (default 16777216 = 128 MiB per array)\n"
    "  --iters  timed repetitions after one warm-up (default 10); the best counts\n"
    "  --help   this text\n";

typedef struct {
    kc_mode mode;
    long n;
    long iters;
} options;

static const char *parse(int argc, char **argv, options *o, int *help) {
    static char err[256];
    static const struct option longopts[] = {
        {"mode", required_argument, NULL, 'm'}, {"n", required_argument, NULL, 'n'},
        {"iters", required_argument, NULL, 'i'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    o->mode = KC_MODE_MPI;
    o->n = 16777216L;
    o->iters = 10;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (kc_parse_mode(optarg, &o->mode) != 0 ||
                (o->mode != KC_MODE_MPI && o->mode != KC_MODE_MASTERONLY)) {
                snprintf(err, sizeof err, "unknown or unsupported mode '%s' (mpi, masteronly)", optarg);
                return err;
            }
            break;
        case 'n':
            if (kc_opt_long("n", optarg, 1, 1L << 34, &o->n, err, sizeof err)) return err;
            break;
        case 'i':
            if (kc_opt_long("iters", optarg, 1, 1000000, &o->iters, err, sizeof err)) return err;
            break;
        case 'h': *help = 1; break;
        default: return kc_opt_unknown(argv, err, sizeof err);
        }
    }
    if (kc_opt_leftover(argc, argv, err, sizeof err)) return err;
    return NULL;
}

int main(int argc, char **argv) {
    options o;
    int help = 0;
    const char *err = parse(argc, argv, &o, &help);
    kc_ctx ctx;
    kc_init(&ctx, &argc, &argv, "stream", o.mode, err, help ? HELP : NULL);

    const long n = o.n * ctx.threads;
    const double scalar = 3.0;
    double *a = kc_malloc(&ctx, (size_t)n * sizeof *a);
    double *b = kc_malloc(&ctx, (size_t)n * sizeof *b);
    double *c = kc_malloc(&ctx, (size_t)n * sizeof *c);

    /* First touch by the threads that use the data (same static schedule). */
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) {
        a[i] = 0.0;
        b[i] = (double)(1 + i % 7);
        c[i] = (double)(2 + i % 5);
    }

    double best = 1e300, total = 0.0;
    for (long it = 0; it <= o.iters; ++it) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = kc_now();
#pragma omp parallel
        {
#pragma omp for schedule(static)
            for (long i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
            kc_record_cpu(&ctx);
        }
        double dt = kc_now() - t0, slowest = 0.0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (it == 0) continue; /* warm-up */
        total += slowest;
        if (slowest < best) best = slowest;
    }

    if (KC_FAULT_INJECTED && ctx.rank == 0) a[n / 2] += 1.0;
    long bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
    for (long i = 0; i < n; ++i)
        if (a[i] != (double)(1 + i % 7) + scalar * (double)(2 + i % 5)) ++bad;
    long bad_total = 0;
    MPI_Allreduce(&bad, &bad_total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    const int verified = bad_total == 0;

    const double bytes = 24.0 * (double)n * ctx.nranks;
    const double gbs = bytes / best / 1e9;
    if (ctx.rank == 0) {
        printf("stream: %d ranks x %d threads, %ld elements per core, %ld repetitions\n",
               ctx.nranks, ctx.threads, o.n, o.iters);
        printf("stream: triad best %.4f s, %.2f GB/s; verification %s (%ld wrong values)\n",
               best, gbs, verified ? "PASSED" : "FAILED", bad_total);
    }
    kc_json j;
    kc_json_begin(&j);
    kc_json_common(&j, &ctx);
    kc_json_int(&j, "size", o.n);
    kc_json_int(&j, "iters", o.iters);
    kc_json_num(&j, "t_total_s", total);
    kc_json_num(&j, "t_comp_s", total);
    kc_json_num(&j, "t_comm_s", 0.0);
    kc_json_num(&j, "t_best_s", best);
    kc_json_num(&j, "fom", gbs);
    kc_json_str(&j, "fom_unit", "GB/s");
    kc_json_int(&j, "wrong_values", bad_total);
    kc_json_bool(&j, "verified", verified);
    kc_json_emit(&j, &ctx);

    free(a);
    free(b);
    free(c);
    if (!verified) kc_fail(&ctx, 3, "verification FAILED: %ld wrong values in a = b + s*c", bad_total);
    return kc_finalize(&ctx);
}
