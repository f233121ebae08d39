/* Implementation of the shared kernel contract; see kernel_common.h. */
#define _GNU_SOURCE
#include "kernel_common.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const char *const mode_names[KC_MODE_COUNT] = {
    "mpi", "masteronly", "funneled", "multiple", "serial"};

const char *kc_mode_name(kc_mode mode) {
    return (mode >= 0 && mode < KC_MODE_COUNT) ? mode_names[mode] : "?";
}

int kc_name_index(const char *const *names, int n, const char *text) {
    for (int i = 0; i < n; ++i)
        if (strcmp(text, names[i]) == 0) return i;
    return -1;
}

static int required_level(kc_mode mode) {
    switch (mode) {
    case KC_MODE_MULTIPLE: return MPI_THREAD_MULTIPLE;
    case KC_MODE_MASTERONLY:
    case KC_MODE_FUNNELED: return MPI_THREAD_FUNNELED;
    default: return MPI_THREAD_SINGLE;
    }
}

static const char *level_name(int level) {
    if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
    if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
    if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
    if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
    return "unknown";
}

/* Whether `text` is a number in plain decimal: an optional '-', then digits;
 * with `real` also a fraction ("2.5", "2.", ".5") and an exponent ("1e-3",
 * "1E+3").  strtol and strtod take more: leading blanks, a '+' sign, and
 * strtod hexadecimal ("0x1p-2"), "inf" and "nan"; an option refuses those. */
static int plain_decimal(const char *text, int real) {
    const char *p = text + (*text == '-');
    const size_t whole = strspn(p, "0123456789");
    p += whole;
    if (!real) return whole > 0 && *p == '\0';
    size_t frac = 0;
    if (*p == '.') {
        frac = strspn(p + 1, "0123456789");
        p += 1 + frac;
    }
    if (whole + frac == 0) return 0;
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '+' || p[1] == '-');
        const size_t exp = strspn(p, "0123456789");
        if (exp == 0) return 0;
        p += exp;
    }
    return *p == '\0';
}

int kc_parse_long(const char *text, long lo, long hi, long *out) {
    if (!text || !plain_decimal(text, 0)) return -1;
    errno = 0;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *text, double lo, double hi, double *out) {
    if (!text || !plain_decimal(text, 1)) return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    /* ERANGE: beyond a double, or an underflow to (nearly) 0: both refused */
    if (errno != 0 || *end != '\0' || !isfinite(v) || v < lo || v > hi) return -1;
    *out = v == 0.0 ? 0.0 : v; /* "-0" is 0, not -0 (RESULT would print -0) */
    return 0;
}

/* What the messages of a value that is not plain decimal add. */
#define PLAIN_LONG " (plain decimal digits only)"
#define PLAIN_REAL " (plain decimal only, e.g. 0.25 or 2.5e-1)"

const char *kc_errf(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return err;
}

const char *kc_opt_long_as(const char *opt, const char *text, long lo, long hi, const char *what,
                           long *out, char *err, size_t cap) {
    if (kc_parse_long(text, lo, hi, out) == 0) return NULL;
    const char *form = text && plain_decimal(text, 0) ? "" : PLAIN_LONG;
    if (what) return kc_errf(err, cap, "--%s must be %s, got '%s'%s", opt, what, text, form);
    return kc_errf(err, cap, "--%s must be an integer in [%ld, %ld], got '%s'%s", opt, lo, hi,
                   text, form);
}

const char *kc_opt_long(const char *opt, const char *text, long lo, long hi, long *out,
                        char *err, size_t cap) {
    return kc_opt_long_as(opt, text, lo, hi, NULL, out, err, cap);
}

const char *kc_opt_double(const char *opt, const char *text, double lo, int lo_open, double hi,
                          const char *what, double *out, char *err, size_t cap) {
    double v = 0.0;
    if (parse_double(text, lo, hi, &v) == 0 && !(lo_open && v <= lo)) {
        *out = v;
        return NULL;
    }
    const char *form = text && plain_decimal(text, 1) ? "" : PLAIN_REAL;
    if (what) return kc_errf(err, cap, "--%s must be %s, got '%s'%s", opt, what, text, form);
    return kc_errf(err, cap, "--%s must be a number in %c%g, %g], got '%s'%s", opt,
                   lo_open ? '(' : '[', lo, hi, text, form);
}

const char *kc_opt_min_time(const char *text, double *out, char *err, size_t cap) {
    return kc_opt_double("min-time", text, 0.0, 0, 3600.0, NULL, out, err, cap);
}

/* --mode: one of cli->modes (the messages: kc_cli.unsupported). */
static const char *opt_mode(const char *text, const kc_cli *cli, kc_mode *out, char *err,
                            size_t cap) {
    const int m = kc_name_index(mode_names, KC_MODE_COUNT, text);
    const int known = m >= 0;
    if (known && (cli->modes & KC_MODE_BIT(m))) {
        *out = (kc_mode)m;
        return NULL;
    }
    char names[96] = "";
    for (int k = 0; k < KC_MODE_COUNT; ++k)
        if (cli->modes & KC_MODE_BIT(k))
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     names[0] ? ", " : "", mode_names[k]);
    if (!cli->unsupported)
        return kc_errf(err, cap, "unknown or unsupported mode '%s' (%s)", text, names);
    if (!known) return kc_errf(err, cap, "unknown mode '%s' (%s)", text, names);
    return kc_errf(err, cap, "mode %s is not supported%s", text, cli->unsupported);
}

/* Whether `arg` is a cluster of short options ("-xy") that holds `c`. */
static int short_cluster_has(const char *arg, int c) {
    return arg[0] == '-' && arg[1] != '\0' && arg[1] != '-' && c > 0 && c <= UCHAR_MAX &&
           strchr(arg + 1, c) != NULL;
}

/* The message of getopt_long's '?'.  No kernel has short options, so a short
 * one is unknown: getopt_long puts it in optopt, and its cluster ("-x", "-xy")
 * is the argument just passed (argv[optind - 1]) or, where more letters of the
 * cluster are left, the current one (argv[optind]).  Else a long option is
 * unknown or lacks its value: the argument just passed. */
static const char *unknown_option(int argc, char **argv, char *err, size_t cap) {
    const char *last = optind - 1 < argc ? argv[optind - 1] : "";
    if (optopt > 0 && (short_cluster_has(last, optopt) ||
                       (optind < argc && short_cluster_has(argv[optind], optopt))))
        return kc_errf(err, cap, "unknown option '-%c' (all options are long: --name)", optopt);
    return kc_errf(err, cap, "unknown option or missing value '%s'", last);
}

/* The option loop of kc_start over cli->longopts, --mode and --help: NULL or err. */
#define OPT_MODE 'm'
static const char *parse_args(int argc, char **argv, const kc_cli *cli, void *opts,
                              kc_mode *mode, int *help, char *err, size_t cap) {
    struct option all[KC_MAX_OPTS + 3] = {KC_ARG("mode", OPT_MODE)};
    int n = 1;
    for (const struct option *o = cli->longopts; o->name; ++o) {
        if (n > KC_MAX_OPTS)    /* a kernel's table, not the user's input */
            return kc_errf(err, cap, "more than KC_MAX_OPTS (%d) options declared",
                           KC_MAX_OPTS);
        all[n++] = *o;
    }
    all[n] = (struct option)KC_FLAG("help", 'h');
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", all, NULL)) != -1) {
        if (c == 'h') {
            *help = 1;
            continue;
        }
        if (c == '?' || c == ':') return unknown_option(argc, argv, err, cap);
        const char *wrong = c == OPT_MODE ? opt_mode(optarg, cli, mode, err, cap)
                                          : cli->one(c, optarg, opts, err, cap);
        if (wrong) return wrong;
    }
    if (optind >= argc) return NULL;
    return kc_errf(err, cap, "unexpected argument '%s'", argv[optind]);
}

/* MPI_Finalize watchdog.  MPICH 4.0.x ch4:ucx over TCP (Debian 12's MPICH
 * with UCX_TLS=tcp,self) sometimes never returns from MPI_Finalize: one rank
 * spins in the UCX disconnect while its peer already waits in the process
 * manager's barrier.  By then the results are printed and verified, so after
 * KERNEL_FINALIZE_TIMEOUT seconds (default 20, 0 = wait forever) the rank says
 * so on stderr and exits with the status it was finalising with (0 after a
 * verified run); the checks record it per run. */
static const char finalize_msg[] =
    ": warning: MPI_Finalize did not return within the finalize timeout "
    "(KERNEL_FINALIZE_TIMEOUT); the results above are complete; exiting\n";

/* The only process-wide state: what the signal handler needs, written once
 * just before MPI_Finalize. */
static const char *volatile finalize_kernel = "kernel";
static volatile sig_atomic_t finalize_status = 0;

static void finalize_timeout(int sig) {
    (void)sig;
    const char *name = finalize_kernel;
    ssize_t rc = write(STDERR_FILENO, name, strlen(name));
    rc = write(STDERR_FILENO, finalize_msg, sizeof finalize_msg - 1);
    (void)rc;
    _exit(finalize_status);
}

static void arm_finalize_watchdog(const char *kernel, int status) {
    long seconds = 20;
    const char *env = getenv("KERNEL_FINALIZE_TIMEOUT");
    if (env && kc_parse_long(env, 0, 86400, &seconds) != 0) seconds = 20;
    if (seconds == 0) return;
    finalize_kernel = kernel;
    finalize_status = status;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = finalize_timeout;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)seconds);
}

static void __attribute__((noreturn)) finish(const char *kernel, int status) {
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    fflush(stdout);
    fflush(stderr);
    if (up && !down) {
        arm_finalize_watchdog(kernel, status);
        MPI_Finalize();
    }
    exit(status);
}

#ifdef KC_FAULT_INJECT
/* Whether this fault-injected run corrupts a value (set once in kc_start). */
static int fault_corrupts = 1;
int kc_fault_corrupts(void) { return fault_corrupts; }
/* The named fault of KERNEL_FAULT (set once in kc_start; "" for none). */
static const char *fault_name = "";
int kc_fault(const char *name) { return strcmp(fault_name, name) == 0; }
/* The named faults (docs/pages/kernels.md); "none": no fault, nothing corrupted. */
static const char *const FAULT_NAMES[] = {
    "none", "spmv_halo_once", "spmv_face_as_interior", "md_list_no_skin", "md_thermo_max",
    "md_drop_ghost_pairs", "md_virial_double", "ring_msg_bytes", "ring_bw_slot",
    "stream_half_triad"};

/* KERNEL_FAULT and KERNEL_FAULT_HANG (kernel_common.h), read once MPI runs: a
 * name that is not in FAULT_NAMES fails (status 2).  A hung rank 0 leaves the
 * other ranks waiting for it in their first collective. */
static void read_fault_env(const kc_ctx *ctx) {
    const char *kernel = ctx->kernel;
    const char *named = getenv("KERNEL_FAULT");
    if (named && named[0] != '\0') {
        if (kc_name_index(FAULT_NAMES, (int)(sizeof FAULT_NAMES / sizeof FAULT_NAMES[0]),
                          named) < 0) {
            if (ctx->rank == 0)
                fprintf(stderr, "%s: KERNEL_FAULT=%s is not a named fault (see "
                        "docs/pages/kernels.md; none: no fault)\n", kernel, named);
            finish(kernel, 2);
        }
        fault_name = strcmp(named, "none") == 0 ? "" : named;
        fault_corrupts = 0;
    }
    const char *hang = getenv("KERNEL_FAULT_HANG");
    if (hang && hang[0] != '\0') {
        fault_corrupts = 0;
        if (strcmp(hang, kernel) == 0 && ctx->rank == 0) {
            fprintf(stderr, "%s: KERNEL_FAULT_HANG=%s: rank 0 hangs on purpose\n",
                    kernel, hang);
            fflush(stderr);
            for (;;) sleep(60);
        }
    }
}
#endif

/* ctx->threads_asked and ctx->threads (kc_ctx): modes mpi and serial run one
 * thread per rank; the team that runs may be smaller than the threads asked
 * for (OMP_THREAD_LIMIT, OMP_DYNAMIC or the runtime), and every kernel reports
 * (and sizes its per-thread data by) the threads that ran. */
static void count_threads(kc_ctx *ctx) {
    ctx->threads = ctx->threads_asked = 1;
#ifdef _OPENMP
    if (ctx->mode == KC_MODE_MPI || ctx->mode == KC_MODE_SERIAL) omp_set_num_threads(1);
    ctx->threads_asked = omp_get_max_threads();
    int team = 1;
#pragma omp parallel
    {
#pragma omp single
        team = omp_get_num_threads();
    }
    ctx->threads = team;
#endif
}

/* ---- Cores of the logical CPUs ------------------------------------------
 * Read once in kc_start, before any timer: sched_getcpu() gives a logical CPU
 * (a hardware thread), and two threads on the two hardware threads of one core
 * share that core as much as two threads on one CPU do. */

/* A non-negative integer from /sys/devices/system/cpu/cpu<cpu>/topology/<name>,
 * or -1 (no such file, or not a non-negative integer). */
static long topology_value(int cpu, const char *name) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[32];
    const int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got) return -1;
    line[strcspn(line, "\n")] = '\0';
    long v = -1;
    return kc_parse_long(line, 0, LONG_MAX, &v) == 0 ? v : -1;
}

/* A logical CPU and where it sits: package, die (0 where the kernel has no
 * die_id) and core (core_id); pkg < 0 where the package or the core is unreadable. */
typedef struct {
    long pkg, die, core;
    int cpu;
} cpu_place;

static int cmp_place(const void *a, const void *b) {
    const cpu_place *x = a, *y = b;
    if (x->pkg != y->pkg) return (x->pkg > y->pkg) - (x->pkg < y->pkg);
    if (x->die != y->die) return (x->die > y->die) - (x->die < y->die);
    if (x->core != y->core) return (x->core > y->core) - (x->core < y->core);
    return (x->cpu > y->cpu) - (x->cpu < y->cpu);
}

/* Whether two places are on one core. */
static int same_core(const cpu_place *x, const cpu_place *y) {
    return x->pkg == y->pkg && x->die == y->die && x->core == y->core;
}

/* malloc, or the rank aborts with "out of memory". */
static void *malloc_or_abort(const kc_ctx *ctx, size_t bytes) {
    void *p = malloc(bytes);
    if (!p) kc_abort(ctx, "out of memory");
    return p;
}

/* ctx->cpu_core and ctx->ncpus (kc_ctx): every configured logical CPU's core. */
static void read_cpu_cores(kc_ctx *ctx) {
    const long conf = sysconf(_SC_NPROCESSORS_CONF);
    const int n = conf > 0 && conf < INT_MAX ? (int)conf : 1;
    ctx->ncpus = n;
    ctx->cpu_core = malloc_or_abort(ctx, (size_t)n * sizeof *ctx->cpu_core);
    cpu_place *place = malloc_or_abort(ctx, (size_t)n * sizeof *place);
    for (int c = 0; c < n; ++c) {
        cpu_place p = {.pkg = topology_value(c, "physical_package_id"),
                       .die = topology_value(c, "die_id"),
                       .core = topology_value(c, "core_id"),
                       .cpu = c};
        if (p.die < 0) p.die = 0;   /* kernels before 5.2 have no die_id */
        if (p.core < 0) p.pkg = -1;
        place[c] = p;
    }
    /* Sorted by core, then CPU: each core's CPUs in a row, its lowest first. */
    qsort(place, (size_t)n, sizeof *place, cmp_place);
    int first = -1; /* the lowest CPU of place[i]'s core */
    for (int i = 0; i < n; ++i) {
        if (i == 0 || !same_core(&place[i], &place[i - 1])) first = place[i].cpu;
        ctx->cpu_core[place[i].cpu] = place[i].pkg < 0 ? -1 : first;
    }
    free(place);
}

void kc_start(kc_ctx *ctx, int *argc, char ***argv, const kc_cli *cli, void *opts,
              kc_mode *mode) {
    char errbuf[KC_ERR_CAP];
    int help = 0;
    const char *arg_error = parse_args(*argc, *argv, cli, opts, mode, &help, errbuf, sizeof errbuf);
    if (!arg_error && cli->done) arg_error = cli->done(opts, errbuf, sizeof errbuf);
    const char *kernel = cli->kernel;
    memset(ctx, 0, sizeof *ctx);
    ctx->kernel = kernel;
    ctx->mode = *mode;
    int required = arg_error ? MPI_THREAD_SINGLE : required_level(*mode);
    if (MPI_Init_thread(argc, argv, required, &ctx->provided) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init_thread failed\n", kernel);
        exit(1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &ctx->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ctx->nranks);
    if (arg_error) {
        if (ctx->rank == 0)
            fprintf(stderr, "%s: %s (try --help)\n", kernel, arg_error);
        finish(kernel, 2);
    }
    if (help) {
        if (ctx->rank == 0) fputs(cli->help, stdout);
        finish(kernel, 0);
    }
    if (ctx->provided < required) {
        if (ctx->rank == 0)
            fprintf(stderr,
                    "%s: mode %s needs %s but the MPI library provides only %s\n",
                    kernel, kc_mode_name(*mode), level_name(required),
                    level_name(ctx->provided));
        finish(kernel, 1);
    }
#ifdef KC_FAULT_INJECT
    read_fault_env(ctx);
#endif
    count_threads(ctx);
    read_cpu_cores(ctx);
    ctx->thread_cpu = malloc_or_abort(ctx, (size_t)ctx->threads * sizeof *ctx->thread_cpu);
    for (int t = 0; t < ctx->threads; ++t) ctx->thread_cpu[t] = -1;
    kc_record_cpu(ctx);
}

void kc_fail(const kc_ctx *ctx, int status, const char *fmt, ...) {
    if (ctx->rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: ", ctx->kernel);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    finish(ctx->kernel, status);
}

void kc_abort(const kc_ctx *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: rank %d: ", ctx->kernel, ctx->rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* not reached */
}

void *kc_malloc(const kc_ctx *ctx, size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 1;
    if (posix_memalign(&p, 64, bytes) != 0 || !p)
        kc_abort(ctx, "cannot allocate %zu bytes", bytes);
    return p;
}

void kc_record_cpu(kc_ctx *ctx) {
    const int t = kc_thread_num();
    if (ctx->thread_cpu && t < ctx->threads) ctx->thread_cpu[t] = sched_getcpu();
}

/* `value` reduced with `op` over all ranks. */
static double over_ranks(double value, MPI_Op op) {
    MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return value;
}

kc_stat kc_stat_over_ranks(const kc_ctx *ctx, double value) {
    kc_stat s = {.min = over_ranks(value, MPI_MIN)};
    s.max = over_ranks(value, MPI_MAX);
    s.mean = over_ranks(value, MPI_SUM) / ctx->nranks;
    return s;
}

void kc_need_same_threads(const kc_ctx *ctx, int asked_too, const char *why) {
    const kc_stat t = kc_stat_over_ranks(ctx, ctx->threads);
    if (asked_too) {
        const kc_stat a = kc_stat_over_ranks(ctx, ctx->threads_asked);
        if (t.min != t.max || a.min != a.max)
            kc_fail(ctx, 2, "ranks run different thread counts (%d..%d of %d..%d asked for, "
                    "OMP_NUM_THREADS): %s", (int)t.min, (int)t.max, (int)a.min, (int)a.max, why);
    } else if (t.min != t.max) {
        kc_fail(ctx, 2, "ranks run different thread counts (%d..%d): %s", (int)t.min,
                (int)t.max, why);
    }
}

double kc_max_over_ranks(const kc_ctx *ctx, double value) {
    (void)ctx;
    return over_ranks(value, MPI_MAX);
}

long kc_sum_over_ranks(const kc_ctx *ctx, long value) {
    (void)ctx;
    MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return value;
}

int kc_all_true(const kc_ctx *ctx, int ok) { return kc_sum_over_ranks(ctx, !ok) == 0; }

void kc_need_node_memory(const kc_ctx *ctx, double bytes, const char *what, const char *detail,
                         const char *advice) {
    MPI_Comm node;
    int local = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    const double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (!kc_all_true(ctx, !(phys > 0) || bytes * local <= 0.9 * phys))
        kc_fail(ctx, 2, "%s does not fit: %d rank(s) per node x %.3g GB %s exceed 90%% of the "
                "node's %.3g GB%s", what, local, bytes / 1e9, detail, phys / 1e9, advice);
}

long kc_gather_counts(const kc_ctx *ctx, MPI_Comm comm, int count, int **counts, int **displs) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    *counts = *displs = NULL;
    if (rank == 0) {
        *counts = malloc_or_abort(ctx, (size_t)size * sizeof **counts);
        *displs = malloc_or_abort(ctx, (size_t)size * sizeof **displs);
    }
    MPI_Gather(&count, 1, MPI_INT, *counts, 1, MPI_INT, 0, comm);
    long total = 0;
    if (rank == 0)
        for (int r = 0; r < size; ++r) {
            (*displs)[r] = (int)total;
            total += (*counts)[r];
        }
    return total;
}

/* ---- JSON --------------------------------------------------------------- */

static void jgrow(kc_json *j, size_t extra) {
    if (j->len + extra + 1 <= j->cap) return;
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + extra + 1) cap *= 2;
    char *nb = realloc(j->buf, cap);
    if (!nb) {
        fprintf(stderr, "kernel: out of memory building the RESULT line\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    j->buf = nb;
    j->cap = cap;
}

static void jappend(kc_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jappend(kc_json *j, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    jgrow(j, (size_t)n);
    vsnprintf(j->buf + j->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    j->len += (size_t)n;
}

static void jstring(kc_json *j, const char *s) {
    jappend(j, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
        if (*p == '"' || *p == '\\') jappend(j, "\\%c", *p);
        else if (*p < 0x20) jappend(j, "\\u%04x", *p);
        else jappend(j, "%c", *p);
    }
    jappend(j, "\"");
}

/* ,"key": (no comma before the first key); returns j. */
static kc_json *jkey(kc_json *j, const char *key) {
    if (!j->first) jappend(j, ",");
    j->first = 0;
    jstring(j, key);
    jappend(j, ":");
    return j;
}

static void jnumber(kc_json *j, double v) {
    if (isfinite(v)) jappend(j, "%.9g", v);
    else jappend(j, "null");
}

void kc_json_str(kc_json *j, const char *key, const char *v) { jstring(jkey(j, key), v); }
void kc_json_int(kc_json *j, const char *key, long long v) { jappend(jkey(j, key), "%lld", v); }
void kc_json_num(kc_json *j, const char *key, double v) { jnumber(jkey(j, key), v); }
void kc_json_bool(kc_json *j, const char *key, int v) { kc_json_raw(j, key, v ? "true" : "false"); }
void kc_json_raw(kc_json *j, const char *key, const char *v) { jappend(jkey(j, key), "%s", v); }

void kc_json_stat(kc_json *j, const char *key, kc_stat s) {
    jappend(jkey(j, key), "{\"min\":");
    jnumber(j, s.min);
    jappend(j, ",\"mean\":");
    jnumber(j, s.mean);
    jappend(j, ",\"max\":");
    jnumber(j, s.max);
    jappend(j, "}");
}

void kc_json_num_array(kc_json *j, const char *key, const double *v, size_t n) {
    jappend(jkey(j, key), "[");
    for (size_t i = 0; i < n; ++i) {
        if (i) jappend(j, ",");
        jnumber(j, v[i]);
    }
    jappend(j, "]");
}

void kc_json_int_array(kc_json *j, const char *key, const long long *v, size_t n) {
    jappend(jkey(j, key), "[");
    for (size_t i = 0; i < n; ++i) jappend(j, i ? ",%lld" : "%lld", v[i]);
    jappend(j, "]");
}

void kc_json_fom(kc_json *j, double fom, const char *unit) {
    kc_json_num(j, "fom", fom);
    kc_json_str(j, "fom_unit", unit);
}

/* The first line of the library version string ("Open MPI v4.1.4, ...",
 * "MPICH Version: 4.0.2", "MVAPICH2 Version : 2.3.7"), white space folded. */
static void library_version(char *out, size_t cap) {
    char raw[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(raw, &len);
    size_t o = 0;
    int space = 0;
    for (int i = 0; i < len && raw[i] && raw[i] != '\n' && o + 1 < cap; ++i) {
        unsigned char c = (unsigned char)raw[i];
        if (isspace(c)) {
            space = 1;
            continue;
        }
        if (space && o > 0 && o + 2 < cap) out[o++] = ' ';
        space = 0;
        out[o++] = (char)c;
    }
    out[o] = '\0';
}

/* "key":[[rank 0's values],...]: v[displs[r] .. displs[r] + counts[r]) per rank. */
static void json_per_thread(kc_json *j, const char *key, const int *v, const int *counts,
                            const int *displs, int nranks) {
    jappend(jkey(j, key), "[");
    for (int r = 0; r < nranks; ++r) {
        jappend(j, r ? ",[" : "[");
        for (int t = 0; t < counts[r]; ++t)
            jappend(j, t ? ",%d" : "%d", v[displs[r] + t]);
        jappend(j, "]");
    }
    jappend(j, "]");
}

/* "hosts": the processor name of every rank (gathered on rank 0; collective). */
static void json_hosts(kc_json *j, const kc_ctx *ctx) {
    char host[MPI_MAX_PROCESSOR_NAME] = {0};
    int hlen = 0;
    MPI_Get_processor_name(host, &hlen);
    char *hosts = NULL;
    if (ctx->rank == 0) hosts = malloc_or_abort(ctx, (size_t)ctx->nranks * MPI_MAX_PROCESSOR_NAME);
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME,
               MPI_CHAR, 0, MPI_COMM_WORLD);
    if (ctx->rank == 0) {
        jappend(jkey(j, "hosts"), "[");
        for (int r = 0; r < ctx->nranks; ++r) {
            if (r) jappend(j, ",");
            jstring(j, hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        }
        jappend(j, "]");
    }
    free(hosts);
}

/* "cpus" and "cores": the logical CPU of every thread of every rank and its
 * core (the table read in kc_start), gathered on rank 0 (collective). */
static void json_cpus_and_cores(kc_json *j, const kc_ctx *ctx) {
    int *core = malloc_or_abort(ctx, (size_t)ctx->threads * sizeof *core);
    for (int t = 0; t < ctx->threads; ++t) {
        const int cpu = ctx->thread_cpu[t];
        core[t] = cpu >= 0 && cpu < ctx->ncpus ? ctx->cpu_core[cpu] : -1;
    }
    int *counts = NULL, *displs = NULL, *cpus = NULL, *cores = NULL;
    const long total = kc_gather_counts(ctx, MPI_COMM_WORLD, ctx->threads, &counts, &displs);
    if (ctx->rank == 0) {
        cpus = malloc_or_abort(ctx, (size_t)(total ? total : 1) * sizeof *cpus);
        cores = malloc_or_abort(ctx, (size_t)(total ? total : 1) * sizeof *cores);
    }
    MPI_Gatherv(ctx->thread_cpu, ctx->threads, MPI_INT, cpus, counts, displs, MPI_INT,
                0, MPI_COMM_WORLD);
    MPI_Gatherv(core, ctx->threads, MPI_INT, cores, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    if (ctx->rank == 0) {
        json_per_thread(j, "cpus", cpus, counts, displs, ctx->nranks);
        json_per_thread(j, "cores", cores, counts, displs, ctx->nranks);
    }
    KC_FREE_ALL(cpus, cores, core, counts, displs);
}

void kc_json_open(kc_json *j, const kc_ctx *ctx) {
    *j = (kc_json){.first = 1};
    jappend(j, "{");
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    library_version(lib, sizeof lib);
    kc_json_str(j, "kernel", ctx->kernel);
    kc_json_str(j, "mode", kc_mode_name(ctx->mode));
    kc_json_int(j, "ranks", ctx->nranks);
    kc_json_int(j, "threads", ctx->threads);
    kc_json_str(j, "thread_level", level_name(ctx->provided));
    kc_json_str(j, "mpi_library", lib);
#ifdef KC_FAULT_INJECT
    /* 1 where a value is corrupted or a named fault (KERNEL_FAULT) is active */
    kc_json_int(j, "fault_injected", kc_fault_corrupts() || fault_name[0] != '\0');
#else
    kc_json_int(j, "fault_injected", 0);
#endif
    json_hosts(j, ctx);
    json_cpus_and_cores(j, ctx);
}

void kc_json_emit(kc_json *j, const kc_ctx *ctx) {
    jappend(j, "}");
    if (ctx->rank == 0) {
        printf("RESULT %s\n", j->buf);
        fflush(stdout);
    }
    free(j->buf);
    memset(j, 0, sizeof *j);
}

double kc_now(void) { return MPI_Wtime(); }

double kc_fenced_now(void) {
    MPI_Barrier(MPI_COMM_WORLD);
    return kc_now();
}

int kc_thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

int kc_num_threads(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

long kc_min_time_count(const kc_ctx *ctx, long requested, double min_time, double calib_s,
                       long calib_calls, long cap) {
    (void)ctx;
    if (!(min_time > 0.0)) return requested;
    long mine = requested; /* never fewer */
    if (calib_calls > 0) {
        const double per_call = calib_s / (double)calib_calls;
        /* a calibration too short to read (0 s) asks for the cap */
        const double want = per_call > 0.0 ? ceil(min_time / per_call) : (double)cap;
        const long capped = want >= (double)cap ? cap : (long)want;
        if (capped > mine) mine = capped;
    }
    long agreed = mine;
    MPI_Allreduce(&mine, &agreed, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    return agreed;
}

kc_calibration kc_min_time_calibrate(kc_ctx *ctx, long requested, double min_time, long cap,
                                     double (*batch)(kc_ctx *ctx, void *arg, long n), void *arg) {
    kc_calibration c = {0};
    for (long n = 1;; n *= 2) {
        c.last_s = batch(ctx, arg, n);
        c.last_n = n;
        c.calib_calls += n;
        if (c.last_s >= min_time / 10.0 || 2 * n > cap) {
            c.count = kc_min_time_count(ctx, requested, min_time, c.last_s, n, cap);
            return c;
        }
    }
}

void kc_timer_start(kc_timer *tm) { *tm = (kc_timer){.last = kc_now()}; }

void kc_stamp(kc_timer *tm, int phase) {
    const double now = kc_now();
    if (phase >= 0 && phase < KC_MAX_PHASES) tm->t[phase] += now - tm->last;
    tm->last = now;
}

void kc_stamp_skip(kc_timer *tm) { tm->last = kc_now(); }

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median and trimmed mean of the slowest rank's times t[0..n) (sorted here). */
static kc_call_stat call_stats(const kc_ctx *ctx, double *t, long n) {
    kc_call_stat s = {NAN, NAN};
    if (n <= 0) return s;
    if (n > (long)INT_MAX) kc_abort(ctx, "%ld calls are too many for the per-call times", n);
    if (MPI_Allreduce(MPI_IN_PLACE, t, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        kc_abort(ctx, "MPI_Allreduce of the per-call times failed");
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    s.median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    const long cut = n >= 10 ? n / 10 : 0;
    double sum = 0.0;
    for (long i = cut; i < n - cut; ++i) sum += t[i];
    s.trimmed = sum / (double)(n - 2 * cut);
    return s;
}

void kc_json_call_stat(kc_json *j, kc_call_stat s) {
    kc_json_num(j, "t_call_median_s", s.median);
    kc_json_num(j, "t_call_trimmed_s", s.trimmed);
}

void kc_calls_init(const kc_ctx *ctx, kc_calls *c, long cap) {
    *c = (kc_calls){.t = kc_malloc(ctx, (size_t)cap * sizeof *c->t), .cap = cap};
}

void kc_calls_reserve(const kc_ctx *ctx, kc_calls *c, long cap) {
    if (cap <= c->cap) return;
    double *more = kc_malloc(ctx, (size_t)cap * sizeof *more);
    memcpy(more, c->t, (size_t)c->n * sizeof *more);
    free(c->t);
    c->t = more;
    c->cap = cap;
}

void kc_calls_start(kc_calls *c) { c->stamp = kc_now(); }

void kc_calls_mark(kc_calls *c) {
    const double now = kc_now();
    if (c->n < c->cap) c->t[c->n++] = now - c->stamp;
    c->stamp = now;
}

kc_call_stat kc_calls_end(const kc_ctx *ctx, kc_calls *c) {
    const kc_call_stat s = call_stats(ctx, c->t, c->n);
    free(c->t);
    memset(c, 0, sizeof *c);
    return s;
}

void kc_block(long n, int part, int parts, int *lo, int *hi) {
    *lo = (int)((long long)n * part / parts);
    *hi = (int)((long long)n * (part + 1) / parts);
}

int kc_finalize(kc_ctx *ctx) {
    KC_FREE_ALL(ctx->thread_cpu, ctx->cpu_core);
    ctx->thread_cpu = ctx->cpu_core = NULL;
    ctx->ncpus = 0;
    fflush(stdout);
    fflush(stderr);
    arm_finalize_watchdog(ctx->kernel, 0);
    MPI_Finalize();
    alarm(0);
    return 0;
}
