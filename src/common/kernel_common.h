/* Shared contract of the harness kernels (spmv, md, ring, stream).
 *
 * Every kernel:
 *   - starts with kc_start(): its options are parsed before MPI starts (so
 *     MPI_Init_thread can ask for the thread level its --mode needs);
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
#include <stdint.h>
#include <stdlib.h> /* free() of KC_FREE_ALL */

typedef enum {
    KC_MODE_MPI = 0,    /* one single-threaded rank per core */
    KC_MODE_MASTERONLY, /* MPI outside parallel regions only (FUNNELED) */
    KC_MODE_FUNNELED,   /* master communicates while other threads compute */
    KC_MODE_MULTIPLE,   /* several threads call MPI (MULTIPLE) */
    KC_MODE_SERIAL,     /* hybrid decomposition, one thread per rank */
    KC_MODE_COUNT
} kc_mode;

/* Per-process context, filled by kc_start(). */
typedef struct {
    const char *kernel;   /* "spmv", "md", ... : prefix of every message */
    kc_mode mode;
    int rank, nranks;
    int threads;          /* OpenMP threads per rank actually used: the size of the
                           * team a parallel region gets, measured in kc_start */
    int threads_asked;    /* threads per rank asked for (omp_get_max_threads():
                           * OMP_NUM_THREADS); OMP_THREAD_LIMIT, OMP_DYNAMIC or the
                           * runtime may give a smaller team (threads) */
    int provided;         /* MPI thread level provided */
    int *thread_cpu;      /* [threads]: logical CPU each thread ran on (kc_record_cpu) */
    int *cpu_core;        /* [ncpus]: the core of each logical CPU of this node, read at
                           * start-up (kc_start): the lowest logical CPU of the same
                           * physical_package_id, die_id and core_id (so a CPU without a
                           * hardware-thread sibling is its own core); -1 where unreadable */
    int ncpus;            /* entries of cpu_core */
} kc_ctx;

/* The name of a mode ("mpi", "masteronly", ...). */
const char *kc_mode_name(kc_mode mode);
/* The index of `text` in names[0..n), or -1. */
int kc_name_index(const char *const *names, int n, const char *text);
#define KC_MODE_BIT(m) (1u << (m))

/* Checked conversion of an option value: 0 on success, -1 if `text` is not an
 * integer within [lo, hi] written in plain decimal (an optional '-', then
 * digits only: no blanks, '+' sign or other base, which strtol would take). */
int kc_parse_long(const char *text, long lo, long hi, long *out);

/* Writes the message into err (cap bytes) and returns err: what the option
 * parsers below return where a value is wrong (NULL where all is well). */
const char *kc_errf(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*   kc_opt_long:     "--<opt> must be an integer in [lo, hi], got '<text>'"
 *   kc_opt_long_as:  kc_opt_long with its own <what> (NULL: the default text)
 *   kc_opt_double:   "--<opt> must be <what>, got '<text>'", <what> by default
 *                    "a number in [lo, hi]"; with `lo_open` lo itself is refused
 *                    ("a number in (lo, hi]")
 *   kc_opt_min_time: --min-time SECONDS, a number in [0, 3600]
 * Every value is plain decimal: integers as kc_parse_long, numbers an optional
 * '-', digits with an optional fraction and exponent ("0.25", ".5", "2.5e-1";
 * "-0" is 0).  Leading or trailing blanks, a '+' sign, hexadecimal ("0x10",
 * "0x1p-2"), "inf" and "nan" are refused, and a value not in that form has
 * " (plain decimal digits only)" (integers) or " (plain decimal only, e.g. 0.25
 * or 2.5e-1)" (numbers) after its message. */
const char *kc_opt_long(const char *opt, const char *text, long lo, long hi, long *out,
                        char *err, size_t cap);
const char *kc_opt_long_as(const char *opt, const char *text, long lo, long hi, const char *what,
                           long *out, char *err, size_t cap);
const char *kc_opt_double(const char *opt, const char *text, double lo, int lo_open, double hi,
                          const char *what, double *out, char *err, size_t cap);
const char *kc_opt_min_time(const char *text, double *out, char *err, size_t cap);

/* A kernel's command line, for kc_start.  `one` stores one option and its
 * value (NULL for a flag) in `opts`; `done` runs after the last option (derived
 * values, checks across options).  Both return NULL or the message they wrote
 * into err. */
struct option;
typedef const char *(*kc_opt_fn)(int c, const char *arg, void *opts, char *err, size_t cap);
typedef const char *(*kc_done_fn)(void *opts, char *err, size_t cap);
typedef struct {
    const char *kernel;            /* its name: the prefix of every message */
    const char *help;              /* the --help text */
    const struct option *longopts; /* its options but --mode and --help (at most KC_MAX_OPTS: more is an error) */
    kc_opt_fn one;                 /* each of them */
    kc_done_fn done;               /* NULL if there is nothing to do after the options */
    unsigned modes;                /* the modes --mode accepts (KC_MODE_BIT mask) */
    /* NULL: "unknown or unsupported mode '<text>' (<the accepted names, comma
     * separated>)" for every refused mode; else an unknown mode is "unknown mode
     * '<text>' (<names>)" and a known one "mode <text> is not supported<this>" */
    const char *unsupported;
} kc_cli;
#define KC_MAX_OPTS 32
/* Entries of kc_cli.longopts: an option with a value, a flag, the end. */
#define KC_ARG(name, val) {name, required_argument, NULL, val}
#define KC_FLAG(name, val) {name, no_argument, NULL, val}
#define KC_END {NULL, 0, NULL, 0}

/* How every kernel starts.  getopt_long over argv (long options only, getopt's
 * own messages off) takes --mode (into *mode, which points into opts) and
 * --help itself and hands every other option to cli->one, into `opts` (whose
 * defaults the caller has set); the first message stops the parsing, and an
 * unknown option or a missing value and an operand after the options are
 * messages too.  Then cli->done.  Then MPI starts at the thread level the mode
 * needs and ctx is filled: a message (at most KC_ERR_CAP - 1 characters) is
 * printed by rank 0 with " (try --help)" and the program exits with status 2
 * after a clean MPI_Finalize; --help prints the help text on rank 0 and exits
 * with status 0; a library that provides less than the mode needs is a clear
 * message and status 1.  Modes mpi and serial run one thread per rank whatever
 * OMP_NUM_THREADS says.  ctx->threads is the size of the team that a parallel
 * region really gets (measured once), not what OMP_NUM_THREADS asks for. */
#define KC_ERR_CAP 320
void kc_start(kc_ctx *ctx, int *argc, char ***argv, const kc_cli *cli, void *opts,
              kc_mode *mode);

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

/* Record the logical CPU each OpenMP thread runs on (sched_getcpu; no file is
 * read).  Call it from inside a parallel region of the timed phase (every
 * thread calls it); outside a parallel region it records thread 0 only. */
void kc_record_cpu(kc_ctx *ctx);

/* Logical AND of `ok` over all ranks. */
int kc_all_true(const kc_ctx *ctx, int ok);

/* Fails (status 2, collective) unless `bytes` on every rank, times the ranks of
 * its node (MPI_COMM_TYPE_SHARED), fit in 90% of every node's physical memory (a
 * node whose memory cannot be read fits): "<what> does not fit: <n> rank(s) per
 * node x <bytes> GB <detail> exceed 90% of the node's <memory> GB<advice>". */
void kc_need_node_memory(const kc_ctx *ctx, double bytes, const char *what, const char *detail,
                         const char *advice);

/* min/mean/max of a per-rank value over all ranks. */
typedef struct { double min, mean, max; } kc_stat;
kc_stat kc_stat_over_ranks(const kc_ctx *ctx, double value);

/* Fails (status 2, collective) unless every rank runs the same team
 * (ctx->threads) and, with `asked_too`, asked for the same threads
 * (ctx->threads_asked): "ranks run different thread counts (<min>..<max>[ of
 * <min>..<max> asked for, OMP_NUM_THREADS]): <why>" (an MPMD launch of
 * several OMP_NUM_THREADS). */
void kc_need_same_threads(const kc_ctx *ctx, int asked_too, const char *why);

/* The largest value over all ranks, the sum of a count over all ranks
 * (MPI_Allreduce over MPI_COMM_WORLD; collective). */
double kc_max_over_ranks(const kc_ctx *ctx, double value);
long kc_sum_over_ranks(const kc_ctx *ctx, long value);

/* Rank 0 gathers every rank's `count` (over `comm`, collective): it gets
 * (*counts)[r] and the prefix sums (*displs)[r] for an MPI_Gatherv and the
 * total is returned; elsewhere *counts = *displs = NULL and 0 is returned.
 * The caller frees both arrays. */
long kc_gather_counts(const kc_ctx *ctx, MPI_Comm comm, int count, int **counts, int **displs);

/* ----- RESULT line --------------------------------------------------------
 * A small JSON object builder.  Keys are emitted in call order.  The builder
 * lives on rank 0 only in practice, but all calls are safe on every rank. */
typedef struct {
    char *buf;
    size_t len, cap;
    int first;
} kc_json;

void kc_json_str(kc_json *j, const char *key, const char *value);
void kc_json_int(kc_json *j, const char *key, long long value);
void kc_json_num(kc_json *j, const char *key, double value);
void kc_json_bool(kc_json *j, const char *key, int value);
void kc_json_raw(kc_json *j, const char *key, const char *json); /* value is JSON already */
void kc_json_stat(kc_json *j, const char *key, kc_stat s);        /* {"min":..,"mean":..,"max":..} */
void kc_json_num_array(kc_json *j, const char *key, const double *v, size_t n);
void kc_json_int_array(kc_json *j, const char *key, const long long *v, size_t n);
/* "fom":value,"fom_unit":unit: the figure of merit of every RESULT line. */
void kc_json_fom(kc_json *j, double fom, const char *unit);

/* How every RESULT line starts: a new builder with the keys every RESULT line
 * must carry and that the context knows: kernel, mode, ranks, threads,
 * thread_level, mpi_library, fault_injected, hosts, cpus (the logical CPU of
 * each thread, [[rank 0 threads], ...]) and cores (the same shape: the core
 * of each of those CPUs, ctx->cpu_core, -1 where unknown; two hardware threads
 * of one core give the same core).  Collective: every rank must call it (it
 * gathers the CPUs, cores and hosts). */
void kc_json_open(kc_json *j, const kc_ctx *ctx);

/* Prints "RESULT {...}" on stdout (rank 0 only) and frees the builder. */
void kc_json_emit(kc_json *j, const kc_ctx *ctx);

/* Wall clock in seconds. */
double kc_now(void);

/* The start of a repetition that every rank runs together: MPI_Barrier over
 * MPI_COMM_WORLD, then kc_now().  With kc_max_over_ranks(ctx, kc_now() - t0)
 * at its end it gives the repetition's time on the slowest rank. */
double kc_fenced_now(void);

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

/* --min-time's calibration: `batch(ctx, arg, n)` runs n calls and returns their
 * time on the slowest rank (the same on every rank); batches of 1, 2, 4, ...
 * calls run until one lasts a tenth of min_time or the next would pass `cap`,
 * and the count is kc_min_time_count's for the last one. */
typedef struct {
    long count;       /* the calls to time */
    long calib_calls; /* the calls the calibration ran */
    double last_s;    /* its last batch's time, slowest rank */
    long last_n;      /* and calls */
} kc_calibration;
kc_calibration kc_min_time_calibrate(kc_ctx *ctx, long requested, double min_time, long cap,
                                     double (*batch)(kc_ctx *ctx, void *arg, long n), void *arg);

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
 * much, from the per-call wall times on this rank: kc_calls_init makes room
 * for `cap` calls, kc_calls_start starts the clock (just before the loop),
 * kc_calls_mark records the time since the previous mark (or the start) after
 * each call, kc_calls_reserve makes room for more calls (a count that
 * --min-time raised).  kc_calls_end (collective: the same number of calls on
 * every rank) takes for each call the slowest rank's time (one MPI_Allreduce
 * MAX of the whole array, after the loop), frees the times and returns
 *   median:  the middle value (mean of the two middle ones for even n);
 *   trimmed: the mean after dropping the fastest and the slowest 10% of the
 *            calls (floor(n/10) each side, so at least one where n >= 10;
 *            none below 10 calls).
 * No calls give NaN for both (a RESULT line prints null). */
typedef struct { double median, trimmed; } kc_call_stat;

/* RESULT keys "t_call_median_s" and "t_call_trimmed_s". */
void kc_json_call_stat(kc_json *j, kc_call_stat s);

typedef struct {
    double *t;
    long n, cap;
    double stamp;
} kc_calls;
void kc_calls_init(const kc_ctx *ctx, kc_calls *c, long cap);
void kc_calls_reserve(const kc_ctx *ctx, kc_calls *c, long cap);
void kc_calls_start(kc_calls *c);
void kc_calls_mark(kc_calls *c);
kc_call_stat kc_calls_end(const kc_ctx *ctx, kc_calls *c);

/* The splitmix64 finaliser, a bijection of 64 bits: the kernels' deterministic
 * data patterns and pseudo-random numbers. */
static inline uint64_t kc_mix64(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The block [lo, hi) of n items that part `part` of `parts` owns: parts
 * contiguous blocks in order, sizes differing by one at most. */
void kc_block(long n, int part, int parts, int *lo, int *hi);

/* free() every pointer of the list. */
#define KC_FREE_ALL(...)                                                     \
    do {                                                                     \
        void *kc_free_list_[] = {__VA_ARGS__};                               \
        for (size_t kc_i_ = 0; kc_i_ < sizeof kc_free_list_ / sizeof kc_free_list_[0]; ++kc_i_) \
            free(kc_free_list_[kc_i_]);                                      \
    } while (0)

/* Finalise MPI and release the context. */
int kc_finalize(kc_ctx *ctx);

/* When the kernels are built with -DKERNEL_FAULT_INJECT=ON every kernel
 * deliberately corrupts one computed value before it verifies its result,
 * so the harness can prove that a wrong result fails its check.
 * KERNEL_FAULT_HANG=<kernel> injects a hang instead: rank 0 of that kernel
 * sleeps forever after MPI init (proof that a check's time limit ends a hung
 * run), and no kernel corrupts its values.
 * KERNEL_FAULT=<name> injects one named fault instead of the corrupted value
 * (no kernel corrupts a value then): a defect that a weaker verification let
 * pass, reproduced on purpose so that a test proves the verification now
 * catches it.  The names (each kernel checks its own with KC_FAULT):
 *   spmv_halo_once       the halo is exchanged on the first call only
 *   spmv_face_as_interior  rows of the upper x face count as interior rows
 *   md_list_no_skin      neighbour lists (and ghosts) built to the cutoff, no skin
 *   md_thermo_max        the global energy/virial sums use MPI_MAX, not MPI_SUM
 *   md_drop_ghost_pairs  half lists leave out the pairs with ghosts
 *   md_virial_double     the pairs with ghosts count their whole virial, not half
 *   ring_msg_bytes       masteronly ring sends size bytes, not k x size
 *   ring_bw_slot         bw's verified window: the last message lands in the
 *                        slot of its round's first one
 *   stream_half_triad    the triad covers half the array after the first repetition */
#ifdef KC_FAULT_INJECT
int kc_fault_corrupts(void);
int kc_fault(const char *name);
#define KC_FAULT_INJECTED kc_fault_corrupts()
#define KC_FAULT(name) kc_fault(name)
#else
#define KC_FAULT_INJECTED 0
#define KC_FAULT(name) 0
#endif

#endif
