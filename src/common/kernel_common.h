/* Shared contract of the harness kernels (spmv, md, ring, stream).
 *
 * Every kernel:
 *   - parses its options before MPI starts (so MPI_Init_thread can ask for the
 *     thread level its --mode needs), then calls kc_init();
 *   - verifies its own result and reports it through the RESULT line;
 *   - prints readable lines plus one or more lines "RESULT <json>";
 *   - on error exits non-zero with a message that starts with its name.
 *
 * No global mutable state: everything lives in a kc_ctx owned by main().
 */
#ifndef KERNEL_COMMON_H
#define KERNEL_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>

typedef enum {
    KC_MODE_MPI = 0,    /* one single-threaded rank per core */
    KC_MODE_MASTERONLY, /* MPI outside parallel regions only (FUNNELED) */
    KC_MODE_FUNNELED,   /* master communicates while other threads compute */
    KC_MODE_MULTIPLE,   /* several threads call MPI (MULTIPLE) */
    KC_MODE_SERIAL,     /* hybrid decomposition, one thread per rank */
    KC_MODE_COUNT
} kc_mode;

/* Per-process context, filled by kc_init(). */
typedef struct {
    const char *kernel;   /* "spmv", "md", ... : prefix of every message */
    kc_mode mode;
    int rank, nranks;
    int threads;          /* OpenMP threads per rank actually used */
    int provided;         /* MPI thread level provided */
    int *thread_cpu;      /* [threads]: core each thread ran on (kc_record_cpus) */
} kc_ctx;

/* Mode names, parsing and the MPI thread level each mode requires. */
const char *kc_mode_name(kc_mode mode);
int kc_parse_mode(const char *text, kc_mode *mode);   /* 0 on success */
int kc_required_level(kc_mode mode);
const char *kc_level_name(int level);

/* Checked conversions for option values: 0 on success, -1 if `text` is not an
 * integer (or number) within [lo, hi]. */
int kc_parse_long(const char *text, long lo, long hi, long *out);
int kc_parse_double(const char *text, double lo, double hi, double *out);

/* Option-parser messages shared by the kernels.  Each writes its message
 * into err (cap bytes) and returns err, or returns NULL when all is well.
 *   kc_opt_long:     "--<opt> must be an integer in [lo, hi], got '<text>'"
 *   kc_opt_unknown:  getopt_long's '?': "unknown option or missing value ..."
 *   kc_opt_leftover: an operand after the options: "unexpected argument ..." */
const char *kc_opt_long(const char *opt, const char *text, long lo, long hi, long *out,
                        char *err, size_t cap);
const char *kc_opt_unknown(char *const argv[], char *err, size_t cap);
/*   kc_opt_double:   "--<opt> must be <what>, got '<text>'", <what> by default
 *                    "a number in [lo, hi]"; with `lo_open` lo itself is refused
 *                    ("a number in (lo, hi]")
 *   kc_opt_long_as:  kc_opt_long with its own <what> (NULL: the default text) */
const char *kc_opt_double(const char *opt, const char *text, double lo, int lo_open, double hi,
                          const char *what, double *out, char *err, size_t cap);
const char *kc_opt_long_as(const char *opt, const char *text, long lo, long hi, const char *what,
                           long *out, char *err, size_t cap);
/*   kc_opt_min_time: --min-time SECONDS, a number in [0, 3600] */
const char *kc_opt_min_time(const char *text, double *out, char *err, size_t cap);
const char *kc_opt_leftover(int argc, char *const argv[], char *err, size_t cap);

/* Start MPI at the level `mode` needs and fill `ctx`.  `arg_error` is a message
 * collected while parsing options (NULL if none): it is printed by rank 0 and
 * the program exits with status 2 after a clean MPI_Finalize.  If `help` is
 * non-NULL it is printed by rank 0 and the program exits with status 0.
 * If the library provides less than the mode needs, a clear message is
 * printed and the program exits with status 1.  Modes mpi and serial run one
 * thread per rank whatever OMP_NUM_THREADS says. */
void kc_init(kc_ctx *ctx, int *argc, char ***argv, const char *kernel,
             kc_mode mode, const char *arg_error, const char *help);

/* Collective failure: rank 0 prints "<kernel>: <message>" on stderr, every
 * rank finalises MPI and exits with `status`.  All ranks must call it. */
void kc_fail(const kc_ctx *ctx, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* Local fatal error (allocation failure, MPI error on one rank): prints
 * "<kernel>: rank R: <message>" and calls MPI_Abort. */
void kc_abort(const kc_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Allocate or abort; memory is not touched (first touch is the caller's). */
void *kc_malloc(const kc_ctx *ctx, size_t bytes);

/* Record the core each OpenMP thread runs on.  Call it from inside a parallel
 * region of the timed phase (every thread calls it); outside a parallel
 * region it records thread 0 only. */
void kc_record_cpu(kc_ctx *ctx);

/* Logical AND of `ok` over all ranks. */
int kc_all_true(const kc_ctx *ctx, int ok);

/* min/mean/max of a per-rank value over all ranks. */
typedef struct { double min, mean, max; } kc_stat;
kc_stat kc_stat_over_ranks(const kc_ctx *ctx, double value);

/* ----- RESULT line --------------------------------------------------------
 * A small JSON object builder.  Keys are emitted in call order.  The builder
 * lives on rank 0 only in practice, but all calls are safe on every rank. */
typedef struct {
    char *buf;
    size_t len, cap;
    int first;
} kc_json;

void kc_json_begin(kc_json *j);
void kc_json_str(kc_json *j, const char *key, const char *value);
void kc_json_int(kc_json *j, const char *key, long long value);
void kc_json_num(kc_json *j, const char *key, double value);
void kc_json_bool(kc_json *j, const char *key, int value);
void kc_json_raw(kc_json *j, const char *key, const char *json); /* value is JSON already */
void kc_json_stat(kc_json *j, const char *key, kc_stat s);        /* {"min":..,"mean":..,"max":..} */
void kc_json_num_array(kc_json *j, const char *key, const double *v, size_t n);

/* Adds the keys every RESULT line must carry and that the context knows:
 * kernel, mode, ranks, threads, thread_level, mpi_library, hosts, cpus.
 * Collective: every rank must call it (it gathers the cores and hosts). */
void kc_json_common(kc_json *j, const kc_ctx *ctx);

/* Prints "RESULT {...}" on stdout (rank 0 only) and frees the builder. */
void kc_json_emit(kc_json *j, const kc_ctx *ctx);

/* Wall clock in seconds. */
double kc_now(void);

/* The calling thread's OpenMP number and the team size (0 and 1 without OpenMP). */
int kc_thread_num(void);
int kc_num_threads(void);

/* --min-time: the number of timed calls that makes a run last at least
 * `min_time` seconds, judged from a calibration that took `calib_s` seconds
 * for `calib_calls` calls on this rank: max(requested, ceil(min_time / per
 * call)), capped at `cap`, the same on every rank (MPI_Allreduce MAX over
 * MPI_COMM_WORLD; collective).  min_time <= 0 returns `requested` unchanged
 * without communicating. */
long kc_min_time_count(const kc_ctx *ctx, long requested, double min_time, double calib_s,
                       long calib_calls, long cap);

/* A phase timer in the spirit of miniMD's timer.stamp(TIME_COMM): kc_stamp
 * adds the time since the previous stamp (or kc_timer_start) to phase
 * `phase` and restarts the clock; kc_stamp_skip restarts it without charging
 * anyone. */
#define KC_MAX_PHASES 16
typedef struct {
    double t[KC_MAX_PHASES];
    double last;
} kc_timer;
void kc_timer_start(kc_timer *tm);
void kc_stamp(kc_timer *tm, int phase);
void kc_stamp_skip(kc_timer *tm);

/* Per-call figures of a timed loop that a few disturbed calls cannot move
 * much.  The caller times every call of its timed loop on this rank (kc_now)
 * into t[0..n); kc_call_stats then replaces each t[i] with the slowest rank's
 * time of call i (one MPI_Allreduce MAX of the whole array, after the loop;
 * collective, every rank passes the same n), sorts t ascending and returns
 *   median:  the middle value (mean of the two middle ones for even n);
 *   trimmed: the mean after dropping the fastest and the slowest 10% of the
 *            calls (floor(n/10) each side, so at least one where n >= 10;
 *            none below 10 calls).
 * n = 0 gives NaN for both (a RESULT line prints null). */
typedef struct { double median, trimmed; } kc_call_stat;
kc_call_stat kc_call_stats(const kc_ctx *ctx, double *t, long n);

/* RESULT keys "t_call_median_s" and "t_call_trimmed_s". */
void kc_json_call_stat(kc_json *j, kc_call_stat s);

/* Finalise MPI and release the context. */
int kc_finalize(kc_ctx *ctx);

/* When the kernels are built with -DKERNEL_FAULT_INJECT=ON every kernel
 * deliberately corrupts one computed value before it verifies its result,
 * so the harness can prove that a wrong result fails its check.
 * KERNEL_FAULT_HANG=<kernel> injects a hang instead: rank 0 of that kernel
 * sleeps forever after MPI init (proof that a check's time limit ends a hung
 * run), and no kernel corrupts its values. */
#ifdef KC_FAULT_INJECT
int kc_fault_corrupts(void);
#define KC_FAULT_INJECTED kc_fault_corrupts()
#else
#define KC_FAULT_INJECTED 0
#endif

#endif
