/* stream: STREAM triad a = b + s*c, the node's memory bandwidth for rooflines.
 *
 * Every rank runs the triad on its own arrays (n elements per core, so a rank
 * with T threads owns T*n), first-touched by the threads that use them.  Each
 * repetition is fenced by barriers and timed as the slowest rank; the figure of
 * merit is the aggregate bandwidth of the best repetition, counting 24 bytes
 * per element (read b and c, write a) as STREAM does.
 *
 * Verification as McCalpin's STREAM does it: independent of the timed loop.
 * Repetition r (the warm-up is r = 0) writes dst = src + s*c and then the
 * roles of a and b swap (pointers only: every repetition is still one triad
 * over two read arrays and one written array, 24 bytes per element), so each
 * repetition reads what the previous one wrote and the values move on:
 * after R = iters + 1 repetitions the array written last holds
 * b0 + R*3*c0, the other b0 + (R-1)*3*c0, c holds c0 (b0 = 1 + i%7,
 * c0 = 2 + i%5).  These are integers below 2^53 for every allowed --iters,
 * so the check is exact equality, and a repetition that skips elements, a
 * wrong scalar or a wrong number of repetitions leaves wrong values.
 */
#include "kernel_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static const char *HELP =
    "usage: stream [--mode mpi|masteronly] [--n ELEMENTS] [--iters K]\n"
    "  STREAM triad bandwidth of the node (GB/s, 24 bytes per element).\n"
    "  --mode   mpi: one thread per rank; masteronly: OMP_NUM_THREADS threads\n"
    "           per rank, MPI only outside parallel regions (default mpi)\n"
    "  --n      array elements per core (default 16777216 = 128 MiB per array)\n"
    "  --iters  timed repetitions after one warm-up (default 10); the best counts\n"
    "  Verification: a and b swap roles after every repetition; at the end every\n"
    "  element must equal its value computed from the initial arrays, the scalar 3\n"
    "  and the number of repetitions (exactly, as STREAM checks its arrays).\n"
    "  --help   this text\n";

static const struct option longopts[] = {KC_ARG("n", 'n'), KC_ARG("iters", 'i'), KC_END};

typedef struct {
    kc_mode mode;
    long n;
    long iters;
} options;

/* One option with its value; NULL or the message written into err. */
static const char *parse_one(int c, const char *arg, void *opts, char *err, size_t cap) {
    options *o = opts;
    if (c == 'n') return kc_opt_long("n", arg, 1, 1L << 34, &o->n, err, cap);
    return kc_opt_long("iters", arg, 1, 1000000, &o->iters, err, cap);
}

int main(int argc, char **argv) {
    const kc_cli cli = {"stream", HELP, longopts, parse_one, NULL,
                        KC_MODE_BIT(KC_MODE_MPI) | KC_MODE_BIT(KC_MODE_MASTERONLY), NULL};
    options o = {.mode = KC_MODE_MPI, .n = 16777216L, .iters = 10};
    kc_ctx ctx;
    kc_start(&ctx, &argc, &argv, &cli, &o, &o.mode);

    /* the bandwidth counts rank 0's arrays on every rank, and RESULT's threads
     * is one count: ranks of different thread counts (MPMD) are refused */
    kc_need_same_threads(&ctx, 0, "every rank must own the same arrays (--n per thread)");
    const long n = o.n * ctx.threads;
    char what[64], arrays[96];
    snprintf(what, sizeof what, "--n %ld", o.n);
    snprintf(arrays, sizeof arrays, "for 3 arrays of %ld doubles per rank", n);
    kc_need_node_memory(&ctx, 3.0 * (double)n * sizeof(double), what, arrays, "");
    const double scalar = 3.0;
    /* The verification's own copy of the triad scalar: deliberately not
     * `scalar`, so a wrong scalar in the loop cannot hide in the check. */
    const double check_scalar = 3.0;
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
    double *dst = a, *src = b; /* swap after every repetition (see the top) */
    /* KERNEL_FAULT=stream_half_triad: later repetitions cover half the array */
    const int half_fault = KC_FAULT("stream_half_triad");
    for (long it = 0; it <= o.iters; ++it) {
        const long len = half_fault && it > 0 ? n / 2 : n;
        const double t0 = kc_fenced_now();
#pragma omp parallel
        {
#pragma omp for schedule(static)
            for (long i = 0; i < len; ++i) dst[i] = src[i] + scalar * c[i];
            kc_record_cpu(&ctx);
        }
        const double slowest = kc_max_over_ranks(&ctx, kc_now() - t0);
        double *const last = dst;
        dst = src;
        src = last; /* src: the array written last */
        if (it == 0) continue; /* warm-up */
        total += slowest;
        if (slowest < best) best = slowest;
    }

    if (KC_FAULT_INJECTED && ctx.rank == 0) src[n / 2] += 1.0;
    const double reps = (double)(o.iters + 1);
    long bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
    for (long i = 0; i < n; ++i) {
        const double b0 = (double)(1 + i % 7), c0 = (double)(2 + i % 5);
        bad += src[i] != b0 + reps * check_scalar * c0;
        bad += dst[i] != b0 + (reps - 1.0) * check_scalar * c0;
        bad += c[i] != c0;
    }
    const long bad_total = kc_sum_over_ranks(&ctx, bad);
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
    kc_json_open(&j, &ctx);
    kc_json_int(&j, "size", o.n);
    kc_json_int(&j, "iters", o.iters);
    kc_json_num(&j, "t_total_s", total);
    kc_json_num(&j, "t_comp_s", total);
    kc_json_num(&j, "t_comm_s", 0.0);
    kc_json_num(&j, "t_best_s", best);
    kc_json_fom(&j, gbs, "GB/s");
    kc_json_int(&j, "wrong_values", bad_total);
    kc_json_bool(&j, "verified", verified);
    kc_json_emit(&j, &ctx);

    KC_FREE_ALL(a, b, c);
    if (!verified)
        kc_fail(&ctx, 3, "verification FAILED: %ld wrong values in a, b, c after %ld triads "
                         "a = b + 3c with a and b swapped (expected b0 + 3 r c0)",
                bad_total, o.iters + 1);
    return kc_finalize(&ctx);
}
