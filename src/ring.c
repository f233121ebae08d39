/* ring: point-to-point communication kernel (latency, bandwidth, node ring).
 *
 * Patterns (--pattern):
 *   pingpong  ranks 0 and P-1 exchange blocking messages; latency = half the
 *             round trip (Xu & Hwang, seed 003).
 *   bw        as osu_bw: rank 0 streams a window of MPI_Isend to rank P-1, which
 *             posts the matching MPI_Irecv window; after each window rank P-1
 *             answers with a 4-byte ack.  bandwidth = size*window*iters / time.
 *             As osu_bw (its default single buffer), every message of a timed
 *             window lands in the same receive buffer.  The verified exchanges
 *             tell the messages apart instead: message j of the window carries
 *             the pattern from word j on, and each is received into its own
 *             slot, in rounds of at most BW_RECV_CAP bytes of slots (each round
 *             poisoned, then checked), so a missing or misplaced message is
 *             caught at every size with bounded memory (64 MiB of receive slots
 *             at 16 MiB, 4 per round; the sender's buffer is 8 x (window-1)
 *             bytes longer than a message).
 *   ring      Rabenseifner's ring (seed 002, Sect. 3.1): nodes (MPI_COMM_TYPE_SHARED
 *             groups, or single ranks with --rank-as-node) form a logical ring; the
 *             k communicating CPUs of a node each MPI_Sendrecv a message to their
 *             counterpart on the next node and from the previous node.
 *             mpi: local ranks 0..k-1 communicate (k <= ranks per node);
 *             masteronly: the master of every rank sends ONE message k times larger
 *             (k <= threads) outside parallel regions, the threads fill/check buffers;
 *             multiple: k threads of every rank call MPI_Sendrecv concurrently
 *             (MPI_THREAD_MULTIPLE), thread t with tag TAG_DATA+t.
 *             Aggregated bandwidth per node = bytes of all ring messages / time / nodes.
 *
 * Measurement, per message size.  pingpong and bw: as osu_latency and osu_bw
 * 5.9 (see base_counts and osu_loop): each of --reps repetitions is a barrier,
 * `skip` untimed iterations and `iters` timed ones, each timed iteration
 * bracketed by MPI_Wtime on the sender (rank 0) and summed; the sample is that
 * sum over `iters`.  ring: warm-up iterations (discarded), then --reps timed
 * loops of `iters` iterations, each fenced by a barrier; the sample of a
 * repetition is the per-iteration time of the slowest rank.  The headline figures
 * (latency_us, bandwidth_MBps, fom) come from the best (minimum) repetition;
 * min/mean/max and the raw samples are in the RESULT line, one line per size,
 * sizes ascending (so the last RESULT line is the largest size).
 *
 * Verification, per size and outside the timed region: every received buffer is
 * checked against a pattern that depends on (source rank, thread lane, size,
 * iteration) on the first exchange, after the timed loops (the data of the last
 * timed exchange) and on a final separate exchange; receive buffers are poisoned
 * before each of these phases so a missing message is caught too.  The bytes
 * the figures count must also be the bytes the MPI messages carried: the sum
 * over ranks of every message's count per iteration must equal the model
 * (ring: bytes_per_node_per_iter x nodes; pingpong/bw: size), else the size
 * fails its verification (RESULT bytes_counted_per_iter, bytes_sent_per_iter).
 */
#include "kernel_common.h"

#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING_MAX_SIZE (16L * 1024 * 1024) /* largest message size (per CPU) */
#define RING_MAX_SIZES 64                 /* entries in --sizes (repeated ones too) */
#define RING_MAX_K 64                     /* largest --k (the default k is not capped) */
#define BW_RECV_CAP (64L * 1024 * 1024)   /* bw: receive slots of one verified round */
#define TAG_DATA 100
#define TAG_ACK 99
#define POISON 0xA5

static const char *HELP =
    "usage: ring [--pattern pingpong|bw|ring] [--mode mpi|masteronly|multiple]\n"
    "            [--sizes LIST|MIN:MAX] [--reps R] [--iters-scale F | --iters N]\n"
    "            [--skip N] [--min-time S] [--window W] [--k K] [--rank-as-node]\n"
    "  Point-to-point communication kernel.\n"
    "  --pattern  pingpong: ranks 0 and P-1, latency = half round trip (us), as\n"
    "             osu_latency 5.9 measures it\n"
    "             bw: streaming bandwidth rank 0 -> P-1 (MB/s, 1e6 B), as osu_bw 5.9\n"
    "             measures it (windows of W Isend, a 4-byte ack after each)\n"
    "             ring: nodes form a logical ring, k CPUs per node MPI_Sendrecv with\n"
    "             their counterparts; aggregated bandwidth per node (default ring)\n"
    "  --mode     mpi (default): one thread per rank;\n"
    "             masteronly: OMP_NUM_THREADS threads, MPI only outside parallel\n"
    "             regions (ring: one message k times larger per rank);\n"
    "             multiple: ring only, k threads per rank call MPI (THREAD_MULTIPLE)\n"
    "  --sizes    message sizes in bytes: comma list with optional K/M suffix\n"
    "             (KiB/MiB), e.g. 8,1K,1M, or a power-of-two range MIN:MAX, e.g.\n"
    "             1:16M; each within 1 B .. 16 MiB (default 1:16M); sorted ascending;\n"
    "             a list has at most 64 entries, repeated sizes included (each size\n"
    "             is measured once)\n"
    "  --reps     timed repetitions per size (default 3); the best one is reported\n"
    "             (pingpong/bw: each repetition is one OSU measurement)\n"
    "  --iters-scale  multiplier of the iteration counts (default 1.0; > 0).\n"
    "             pingpong (OSU): 10000 timed after 100 skipped up to 8 KiB, then\n"
    "             1000 after 10; bw (OSU, windows): 100 after 10, then 20 after 2;\n"
    "             ring: 1000 up to 8 KiB, then 1000*8KiB/size, at least 20, after\n"
    "             a warm-up of a tenth, at least 1.  The skipped counts scale too.\n"
    "  --iters    timed iterations per repetition at every size (as OSU's -i)\n"
    "  --skip     skipped warm-up iterations per repetition (as OSU's -x; ring:\n"
    "             the warm-up before the repetitions)\n"
    "  --min-time ring only: after the warm-up, each repetition runs at least S\n"
    "             seconds, judged from a calibration of 1, 2, 4, ... exchanges until\n"
    "             one batch lasts S/10 (default 0: off)\n"
    "  --window   bw: messages in flight per window (default 64)\n"
    "  --k        ring: communicating CPUs per node (mpi: ranks per node, default\n"
    "             all; masteronly/multiple: threads per rank, default all)\n"
    "  --rank-as-node  ring: every rank is its own node (ring on one machine)\n"
    "  --help     this text\n"
    "  One RESULT line per size; the last one is the largest size.\n";

static const struct option longopts[] = {
    KC_ARG("pattern", 'p'), KC_ARG("sizes", 's'), KC_ARG("reps", 'r'), KC_ARG("iters-scale", 'f'),
    KC_ARG("window", 'w'), KC_ARG("k", 'k'), KC_FLAG("rank-as-node", 'n'), KC_ARG("iters", 'i'),
    KC_ARG("skip", 'x'), KC_ARG("min-time", 't'), KC_END};

typedef enum { PAT_PINGPONG = 0, PAT_BW, PAT_RING, PAT_COUNT } pattern_t;
static const char *const pattern_names[PAT_COUNT] = {"pingpong", "bw", "ring"};

typedef struct {
    kc_mode mode;
    pattern_t pattern;
    long sizes[RING_MAX_SIZES];
    int nsizes;
    /* k, window, iters, iters_scale 0 and skip -1: not given (options_done sets
     * the defaults of window and iters_scale after the checks across options) */
    double iters_scale, min_time;
    long reps, window, k, iters, skip;
    int rank_as_node;
} options;

/* ---- option parsing (before MPI starts) ---------------------------------- */

/* What parse_one_size makes of one size. */
enum { SIZE_OK, SIZE_NOT_A_SIZE, SIZE_OUT_OF_RANGE };

/* One size "N", "NK" or "NM" (KiB, MiB) of `len` characters into *out:
 * SIZE_NOT_A_SIZE if it is empty or not a number, SIZE_OUT_OF_RANGE if it is
 * not within 1 B .. 16 MiB. */
static int parse_one_size(const char *text, size_t len, long *out) {
    char tmp[32];
    if (len == 0) return SIZE_NOT_A_SIZE;
    while (len > 1 && text[0] == '0' && isdigit((unsigned char)text[1])) { /* 0008 is 8 */
        ++text;
        --len;
    }
    if (len >= sizeof tmp) { /* too long for any size in range, if a number at all */
        size_t digits = strspn(text, "0123456789");
        if (digits == len - 1 && strchr("KkMm", text[len - 1])) ++digits;
        return digits == len && isdigit((unsigned char)text[0]) ? SIZE_OUT_OF_RANGE
                                                                : SIZE_NOT_A_SIZE;
    }
    memcpy(tmp, text, len);
    tmp[len] = '\0';
    long mult = 1;
    char last = tmp[len - 1];
    if (last == 'K' || last == 'k') mult = 1024;
    else if (last == 'M' || last == 'm') mult = 1024 * 1024;
    if (mult != 1) tmp[--len] = '\0';
    long v = 0;
    if (kc_parse_long(tmp, 0, LONG_MAX, &v) != 0) /* digits only: beyond a long, too large */
        return len > 0 && strspn(tmp, "0123456789") == len ? SIZE_OUT_OF_RANGE : SIZE_NOT_A_SIZE;
    if (v < 1 || v > RING_MAX_SIZE / mult) return SIZE_OUT_OF_RANGE; /* v * mult cannot overflow */
    *out = v * mult;
    return SIZE_OK;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* parse_one_size with the message of --sizes; NULL or the message written into err. */
static const char *size_arg(const char *text, size_t len, long *out, char *err, size_t cap) {
    const int code = parse_one_size(text, len, out);
    if (code == SIZE_OK) return NULL;
    return kc_errf(err, cap, code == SIZE_NOT_A_SIZE
                   ? "--sizes: '%.*s' is not a size (integer bytes, optional K or M suffix)"
                   : "--sizes: size '%.*s' is out of range (1 B .. 16 MiB)",
                   (int)(len > 40 ? 40 : len), text);
}

/* --sizes into o->sizes; NULL or the message written into err. */
static const char *parse_sizes(const char *arg, options *o, char *err, size_t cap) {
    const char *colon = strchr(arg, ':');
    o->nsizes = 0;
    if (colon) {
        long lo = 0, hi = 0;
        if (size_arg(arg, (size_t)(colon - arg), &lo, err, cap) ||
            size_arg(colon + 1, strlen(colon + 1), &hi, err, cap))
            return err;
        if (lo > hi) return kc_errf(err, cap, "--sizes: range '%s' has MIN > MAX", arg);
        /* MIN, doubling, lands on MAX only for powers of two: MAX never measured */
        if ((lo & (lo - 1)) != 0 || (hi & (hi - 1)) != 0)
            return kc_errf(err, cap, "--sizes: range '%s' is not of powers of two (MIN, "
                           "doubling up to MAX; a comma list takes any sizes)", arg);
        for (long s = lo; s <= hi && o->nsizes < RING_MAX_SIZES; s *= 2) o->sizes[o->nsizes++] = s;
        return NULL;
    }
    for (const char *p = arg;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (o->nsizes == RING_MAX_SIZES) /* entries given, repeated sizes included */
            return kc_errf(err, cap, "--sizes: more than %d entries (repeated sizes count too)",
                           RING_MAX_SIZES);
        long v = 0;
        if (size_arg(p, len, &v, err, cap)) return err;
        o->sizes[o->nsizes++] = v;
        if (!comma) break;
        p = comma + 1;
    }
    /* ascending, without duplicates: the last RESULT line is the largest size */
    qsort(o->sizes, (size_t)o->nsizes, sizeof o->sizes[0], cmp_long);
    int n = 1;
    for (int i = 1; i < o->nsizes; ++i)
        if (o->sizes[i] != o->sizes[n - 1]) o->sizes[n++] = o->sizes[i];
    o->nsizes = n;
    return NULL;
}

/* One option with its value; NULL or the message written into err. */
static const char *parse_one(int c, const char *arg, void *opts, char *err, size_t cap) {
    options *o = opts;
    switch (c) {
    case 'p': {
        const int i = kc_name_index(pattern_names, PAT_COUNT, arg);
        if (i < 0) return kc_errf(err, cap, "unknown pattern '%s' (pingpong, bw, ring)", arg);
        o->pattern = (pattern_t)i;
        return NULL;
    }
    case 's': return parse_sizes(arg, o, err, cap);
    case 'r': return kc_opt_long("reps", arg, 1, 1000, &o->reps, err, cap);
    case 'f':
        return kc_opt_double("iters-scale", arg, 0.0, 1, 1000.0, NULL, &o->iters_scale, err, cap);
    case 'i': return kc_opt_long("iters", arg, 1, 100000000, &o->iters, err, cap);
    case 'x': return kc_opt_long("skip", arg, 0, 100000000, &o->skip, err, cap);
    case 't': return kc_opt_min_time(arg, &o->min_time, err, cap);
    case 'w': return kc_opt_long("window", arg, 1, 1024, &o->window, err, cap);
    case 'k': return kc_opt_long("k", arg, 1, RING_MAX_K, &o->k, err, cap);
    default: /* 'n' */
        o->rank_as_node = 1;
        return NULL;
    }
}

/* After the options: the default --sizes, and the checks across options. */
static const char *options_done(void *opts, char *err, size_t cap) {
    options *o = opts;
    if (o->nsizes == 0) parse_sizes("1:16M", o, err, cap);
    if (o->mode == KC_MODE_MULTIPLE && o->pattern != PAT_RING)
        return kc_errf(err, cap, "mode multiple is only available with --pattern ring");
    if (o->k && o->pattern != PAT_RING)
        return kc_errf(err, cap, "--k applies only to --pattern ring");
    if (o->window && o->pattern != PAT_BW)
        return kc_errf(err, cap, "--window applies only to --pattern bw");
    if (o->rank_as_node && o->pattern != PAT_RING)
        return kc_errf(err, cap, "--rank-as-node applies only to --pattern ring");
    if (o->iters && o->iters_scale > 0.0)
        return kc_errf(err, cap, "--iters and --iters-scale exclude each other");
    if (o->min_time > 0.0 && o->pattern != PAT_RING)
        return kc_errf(err, cap, "--min-time applies only to --pattern ring (pingpong and bw "
                                 "count as OSU does; use --iters)");
    if (!o->window) o->window = 64;
    if (!(o->iters_scale > 0.0)) o->iters_scale = 1.0;
    return NULL;
}

/* ---- data pattern --------------------------------------------------------- */

/* Seed of the message sent by world rank `src`, thread lane `lane`, for
 * message size `size` at exchange `iter`. */
static uint64_t pattern_seed(int src, int lane, long size, long iter) {
    uint64_t s = kc_mix64((uint64_t)(unsigned)src + 0x9E3779B97F4A7C15ull);
    s = kc_mix64(s ^ ((uint64_t)(unsigned)lane << 40) ^ (uint64_t)size);
    return kc_mix64(s + (uint64_t)iter);
}

#define PATTERN_STEP 0x9E3779B97F4A7C15ull

/* The seed of the pattern from word j on: pattern_word(shifted_seed(s, j), i)
 * is pattern_word(s, j + i) (bw: message j of a verified window). */
static inline uint64_t shifted_seed(uint64_t seed, uint64_t j) { return seed + j * PATTERN_STEP; }

/* Word j of the pattern (a bijection of seed + j*C, so two seeds differ in every word). */
static inline uint64_t pattern_word(uint64_t seed, size_t j) {
    const uint64_t x = shifted_seed(seed, j);
    return x ^ (x >> 29);
}

/* The words of an n-byte buffer (the last one may be partial) and the bytes of word j. */
static size_t words(size_t n) { return (n + 7) / 8; }
static size_t word_bytes(size_t n, size_t j) { return n - 8 * j < 8 ? n - 8 * j : 8; }

/* Words [w0, w1) of the pattern into the n-byte buffer. */
static void fill_words(unsigned char *buf, size_t n, uint64_t seed, size_t w0, size_t w1) {
    for (size_t j = w0; j < w1; ++j) {
        const uint64_t w = pattern_word(seed, j);
        memcpy(buf + 8 * j, &w, word_bytes(n, j));
    }
}

/* Wrong bytes in words [w0, w1) of the n-byte buffer. */
static long check_words(const unsigned char *buf, size_t n, uint64_t seed, size_t w0, size_t w1) {
    long bad = 0;
    for (size_t j = w0; j < w1; ++j) {
        const uint64_t w = pattern_word(seed, j);
        uint64_t got = 0, want = 0; /* the word's bytes, the rest zero in both */
        memcpy(&got, buf + 8 * j, word_bytes(n, j));
        memcpy(&want, &w, word_bytes(n, j));
        for (uint64_t x = got ^ want; x; x >>= 8) bad += (x & 0xFF) != 0;
    }
    return bad;
}

/* Work-shared over all threads of the rank (one in mpi mode): the pattern
 * written into the n-byte buffer, or (check) its wrong bytes counted. */
static long words_par(kc_ctx *ctx, unsigned char *buf, size_t n, uint64_t seed, int check) {
    const long nw = (long)words(n);
    long bad = 0;
#pragma omp parallel reduction(+ : bad)
    {
        kc_record_cpu(ctx);
#pragma omp for schedule(static)
        for (long j = 0; j < nw; ++j) {
            if (check) bad += check_words(buf, n, seed, (size_t)j, (size_t)j + 1);
            else fill_words(buf, n, seed, (size_t)j, (size_t)j + 1);
        }
    }
    return bad;
}

/* The n-byte buffer poisoned by all threads of the rank, in chunks of 64 KiB. */
static void poison_par(unsigned char *buf, size_t n) {
    const size_t chunk = 64 * 1024;
    const long nchunks = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunks; ++c) {
        const size_t begin = (size_t)c * chunk;
        memset(buf + begin, POISON, n - begin < chunk ? n - begin : chunk);
    }
}

/* ---- topology ------------------------------------------------------------- */

typedef struct {
    MPI_Comm node;  /* ranks of my node */
    MPI_Comm lane;  /* ranks with my local rank, one per node, ranked by node index */
    int local_rank, ppn, node_index, nnodes;
    int ppn_min, ppn_max;
} topology;

static void topology_init(const kc_ctx *ctx, int rank_as_node, topology *t) {
    if (rank_as_node) MPI_Comm_dup(MPI_COMM_SELF, &t->node);
    else MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &t->node);
    MPI_Comm_rank(t->node, &t->local_rank);
    MPI_Comm_size(t->node, &t->ppn);
    MPI_Comm leaders = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, t->local_rank == 0 ? 0 : MPI_UNDEFINED, ctx->rank, &leaders);
    int info[2] = {0, 0};
    if (leaders != MPI_COMM_NULL) {
        MPI_Comm_rank(leaders, &info[0]);
        MPI_Comm_size(leaders, &info[1]);
        MPI_Comm_free(&leaders);
    }
    MPI_Bcast(info, 2, MPI_INT, 0, t->node);
    t->node_index = info[0];
    t->nnodes = info[1];
    MPI_Allreduce(&t->ppn, &t->ppn_min, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&t->ppn, &t->ppn_max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Comm_split(MPI_COMM_WORLD, t->local_rank, t->node_index, &t->lane);
}

static void topology_free(topology *t) {
    MPI_Comm_free(&t->lane);
    MPI_Comm_free(&t->node);
}

/* ---- the exchanges -------------------------------------------------------- */

typedef struct {
    pattern_t pat;
    kc_mode mode;
    MPI_Comm comm;
    int role;       /* pingpong/bw: 0 sender (rank 0), 1 receiver (rank P-1); ring: 1 active; -1 idle */
    int peer;       /* pingpong/bw partner (rank in comm) */
    int next, prev; /* ring neighbours (ranks in comm) */
    int src_world;  /* world rank whose data this rank receives */
    int kthreads;   /* multiple: communicating threads */
    long window;
    long size;      /* per-CPU message size of the current step */
    size_t msg;     /* bytes per MPI message (masteronly ring: k * size) */
    /* the message as MPI count and datatype: msg bytes, or where msg exceeds an
     * int count (masteronly ring, k >= 128 at 16 MiB), msg / size units of size bytes */
    int count;
    MPI_Datatype unit;
    unsigned char *sbuf, *rbuf;
    unsigned char **tsbuf, **trbuf;
    MPI_Request *reqs;
    MPI_Status *stats; /* real array: MPICH's MPI_STATUSES_IGNORE trips gcc -Wstringop-overflow */
    char ack[4];
} exch;

/* pingpong: n round trips, one loop per role, as OSU times it. */
static void pingpong_iters(const exch *e, long n) {
    if (e->role == 0) {
        for (long it = 0; it < n; ++it) {
            MPI_Send(e->sbuf, e->count, e->unit, e->peer, TAG_DATA, e->comm);
            MPI_Recv(e->rbuf, e->count, e->unit, e->peer, TAG_DATA, e->comm, MPI_STATUS_IGNORE);
        }
    } else if (e->role == 1) {
        for (long it = 0; it < n; ++it) {
            MPI_Recv(e->rbuf, e->count, e->unit, e->peer, TAG_DATA, e->comm, MPI_STATUS_IGNORE);
            MPI_Send(e->sbuf, e->count, e->unit, e->peer, TAG_DATA, e->comm);
        }
    }
}

/* bw sender: one window, message j sent from byte `stride` x j of the send
 * buffer, then the receiver's ack. */
static void bw_send_window(exch *e, size_t stride) {
    for (long j = 0; j < e->window; ++j)
        MPI_Isend(e->sbuf + stride * (size_t)j, e->count, e->unit, e->peer, TAG_DATA, e->comm,
                  &e->reqs[j]);
    MPI_Waitall((int)e->window, e->reqs, e->stats);
    MPI_Recv(e->ack, 4, MPI_BYTE, e->peer, TAG_ACK, e->comm, MPI_STATUS_IGNORE);
}

/* bw: n windows of messages, each answered by the receiver's ack. */
static void bw_iters(exch *e, long n) {
    if (e->role == 0) {
        for (long it = 0; it < n; ++it) bw_send_window(e, 0);
    } else if (e->role == 1) {
        for (long it = 0; it < n; ++it) {
            for (long j = 0; j < e->window; ++j)
                MPI_Irecv(e->rbuf, e->count, e->unit, e->peer, TAG_DATA, e->comm, &e->reqs[j]);
            MPI_Waitall((int)e->window, e->reqs, e->stats);
            MPI_Send(e->ack, 4, MPI_BYTE, e->peer, TAG_ACK, e->comm);
        }
    }
}

/* ring: n exchanges with the previous and the next node (multiple: by each
 * of the k threads, on its own tag). */
static void ring_iters(kc_ctx *ctx, const exch *e, long n) {
    if (e->role != 1) return;
    if (e->mode != KC_MODE_MULTIPLE) {
        for (long it = 0; it < n; ++it)
            MPI_Sendrecv(e->sbuf, e->count, e->unit, e->next, TAG_DATA, e->rbuf, e->count,
                         e->unit, e->prev, TAG_DATA, e->comm, MPI_STATUS_IGNORE);
        return;
    }
#pragma omp parallel
    {
        const int t = kc_thread_num();
        kc_record_cpu(ctx);
        if (t < e->kthreads)
            for (long it = 0; it < n; ++it)
                MPI_Sendrecv(e->tsbuf[t], e->count, e->unit, e->next, TAG_DATA + t, e->trbuf[t],
                             e->count, e->unit, e->prev, TAG_DATA + t, e->comm, MPI_STATUS_IGNORE);
    }
}

/* n iterations of the pattern; no timing, no buffer work. */
static void run_iters(kc_ctx *ctx, exch *e, long n) {
    if (e->pat == PAT_PINGPONG) pingpong_iters(e, n);
    else if (e->pat == PAT_BW) bw_iters(e, n);
    else ring_iters(ctx, e, n);
}

static int sends(const exch *e) { return e->role == 0 || (e->role == 1 && e->pat != PAT_BW); }
static int receives(const exch *e) { return e->role == 1 || (e->role == 0 && e->pat == PAT_PINGPONG); }
/* The bytes of the send buffer that prepare fills: bw, one message and a word
 * more per further message of a window (bw_verified_window: message j from word j). */
static size_t send_fill_bytes(const exch *e) {
    return e->msg + (e->pat == PAT_BW ? 8 * (size_t)(e->window - 1) : 0);
}

/* Fill the send buffer(s) with the pattern of exchange `iter`, poison the receive buffer(s).
 * multiple: thread t the buffers of lane t (and of t + team, ... should a team
 * be smaller than k: then every lane is still prepared and checked, and a lane
 * that no thread ran fails its check). */
static void prepare(kc_ctx *ctx, exch *e, long iter) {
    if (e->pat == PAT_RING && e->mode == KC_MODE_MULTIPLE) {
        if (e->role != 1) return;
#pragma omp parallel
        {
            kc_record_cpu(ctx);
            for (int t = kc_thread_num(); t < e->kthreads; t += kc_num_threads()) {
                fill_words(e->tsbuf[t], e->msg, pattern_seed(ctx->rank, t, e->size, iter), 0,
                           words(e->msg));
                memset(e->trbuf[t], POISON, e->msg);
            }
        }
        return;
    }
    if (sends(e))
        words_par(ctx, e->sbuf, send_fill_bytes(e), pattern_seed(ctx->rank, 0, e->size, iter), 0);
    if (receives(e)) poison_par(e->rbuf, e->msg);
}

/* Wrong bytes received in exchange `iter`; `inject` corrupts one byte first. */
static long check(kc_ctx *ctx, exch *e, long iter, int inject) {
    long bad = 0;
    if (e->pat == PAT_RING && e->mode == KC_MODE_MULTIPLE) {
        if (e->role != 1) return 0;
        if (inject) e->trbuf[0][e->msg / 2] ^= 0x5A;
#pragma omp parallel reduction(+ : bad)
        for (int t = kc_thread_num(); t < e->kthreads; t += kc_num_threads())
            bad += check_words(e->trbuf[t], e->msg, pattern_seed(e->src_world, t, e->size, iter),
                               0, words(e->msg));
        return bad;
    }
    if (!receives(e)) return 0;
    if (inject) e->rbuf[e->msg / 2] ^= 0x5A;
    return words_par(ctx, e->rbuf, e->msg, pattern_seed(e->src_world, 0, e->size, iter), 1);
}

/* The lowest world rank that received wrong bytes, and the rank whose message
 * it was ({-1, -1} if none).  One MPI_MIN over a long long that encodes
 * (rank, source): MPI_MINLOC on MPI_2INT is refused by some builds (MVAPICH2
 * 2.3.7 ch3:sock configured with --disable-fortran), MPI_MIN on
 * MPI_LONG_LONG is supported by every MPI library. */
typedef struct { int rank, src; } first_bad;
static first_bad first_wrong_rank(long bad, int rank, int src) {
    const long long none = LLONG_MAX;
    long long mine = bad ? ((long long)rank << 32) | (long long)(unsigned)src : none, low = none;
    MPI_Allreduce(&mine, &low, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    first_bad f = {-1, -1};
    if (low != none) {
        f.rank = (int)(low >> 32);
        f.src = (int)(unsigned)(low & 0xFFFFFFFFLL);
    }
    return f;
}

/* Iterations per repetition: timed ones and skipped (warm-up) ones.
 * pingpong and bw take OSU 5.9's counts (util/osu_util.h): osu_latency times
 * 10000 round trips after 100 skipped up to LARGE_MESSAGE_SIZE (8 KiB) and
 * 1000 after 10 above; osu_bw 100 windows after 10 skipped, and 20 after 2.
 * ring: 1000 up to 8 KiB, then 1000*8KiB/size (constant bytes), at least 20;
 * warm-up a tenth of the timed count, at least 1. */
#define OSU_LARGE_MESSAGE_SIZE 8192
typedef struct { long iters, skip; } counts;

static counts base_counts(pattern_t p, long size) {
    const int large = size > OSU_LARGE_MESSAGE_SIZE;
    if (p == PAT_BW) return large ? (counts){20, 2} : (counts){100, 10};
    if (p == PAT_PINGPONG) return large ? (counts){1000, 10} : (counts){10000, 100};
    long it = large ? 1000L * OSU_LARGE_MESSAGE_SIZE / size : 1000;
    return (counts){it < 20 ? 20 : it, 0};
}

/* The counts of one size after --iters, --iters-scale and --skip. */
static counts size_counts(const options *o, long size) {
    const counts b = base_counts(o->pattern, size);
    counts c = {o->iters, o->skip};
    if (!o->iters) {
        c.iters = (long)llround((double)b.iters * o->iters_scale);
        if (c.iters < 1) c.iters = 1;
    }
    if (o->skip < 0) {
        if (o->pattern == PAT_RING) c.skip = c.iters / 10;
        else c.skip = o->iters ? b.skip : (long)llround((double)b.skip * o->iters_scale);
        if (c.skip < 1) c.skip = 1;
    }
    return c;
}

/* bw, verified exchanges: receive slots per round, as many of the window's
 * messages as BW_RECV_CAP holds (at least 1). */
static long bw_slots(long window, long size) {
    if (window * size <= BW_RECV_CAP) return window;
    long s = BW_RECV_CAP / size;
    return s < 1 ? 1 : s;
}

/* A message buffer aligned to a 4 KiB page, as OSU's (alignment changes the
 * copy speed of large messages); freed with free(). */
#define PAGE_BYTES 4096
static unsigned char *page_alloc(const kc_ctx *ctx, size_t bytes) {
    const size_t rounded = (bytes + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES;
    unsigned char *p = aligned_alloc(PAGE_BYTES, rounded ? rounded : PAGE_BYTES);
    if (!p) kc_abort(ctx, "cannot allocate %zu bytes", bytes);
    return p;
}

/* Free the buffers (and the communicator if it is the exchange's own). */
static void release(exch *e, int own_comm) {
    for (int t = 0; e->tsbuf && t < e->kthreads; ++t) KC_FREE_ALL(e->tsbuf[t], e->trbuf[t]);
    KC_FREE_ALL(e->reqs, e->stats, e->sbuf, e->rbuf, e->tsbuf, e->trbuf);
    if (own_comm) MPI_Comm_free(&e->comm);
    memset(e, 0, sizeof *e);
}

/* ---- setup ---------------------------------------------------------------- */

/* pingpong/bw: rank 0 sends, rank P-1 receives, in a copy of MPI_COMM_WORLD. */
static void setup_pt2pt(const kc_ctx *ctx, exch *e) {
    MPI_Comm_dup(MPI_COMM_WORLD, &e->comm);
    if (ctx->rank == 0) {
        e->role = 0;
        e->peer = ctx->nranks - 1;
    } else if (ctx->rank == ctx->nranks - 1) {
        e->role = 1;
        e->peer = 0;
    }
    e->src_world = e->peer;
}

/* ring: the k communicating CPUs of every node and their neighbours in the lane
 * communicator; returns k.  Collective; a bad --k fails on every rank. */
static long setup_ring(const kc_ctx *ctx, const options *o, topology *topo, exch *e) {
    const int hybrid = o->mode != KC_MODE_MPI;
    if (topo->ppn_min != topo->ppn_max) {
        topology_free(topo);
        kc_fail(ctx, 2, "the nodes have different rank counts (%d .. %d); the ring needs "
                        "the same number of ranks on every node", topo->ppn_min, topo->ppn_max);
    }
    /* hybrid: k counts threads, and it must be the same on every rank: a rank
     * with more threads would send a message k times larger (masteronly) or
     * serve a lane that no peer serves (multiple) */
    if (hybrid) {
        char why[80];
        snprintf(why, sizeof why, "mode %s needs the same threads on every rank",
                 kc_mode_name(o->mode));
        kc_need_same_threads(ctx, 1, why);
    }
    /* hybrid: the threads of the team that runs (ctx->threads); multiple's
     * default k is the threads asked for, each of them a lane of its own */
    const long limit = hybrid ? ctx->threads : topo->ppn;
    const long k = o->k ? o->k : (o->mode == KC_MODE_MULTIPLE ? ctx->threads_asked : limit);
    if (k > limit) {
        topology_free(topo);
        if (hybrid && k <= ctx->threads_asked)
            kc_fail(ctx, 2, "mode %s needs %ld threads per rank (k) but the OpenMP team has "
                            "only %d of the %d asked for (OMP_NUM_THREADS); OMP_THREAD_LIMIT, "
                            "OMP_DYNAMIC or the OpenMP runtime limits it",
                    kc_mode_name(o->mode), k, ctx->threads, ctx->threads_asked);
        if (hybrid)
            kc_fail(ctx, 2, "--k %ld is larger than the %d threads per rank (OMP_NUM_THREADS) "
                            "in mode %s", k, ctx->threads, kc_mode_name(o->mode));
        kc_fail(ctx, 2, "--k %ld is larger than the %d ranks per node", k, topo->ppn);
    }
    e->comm = topo->lane;
    e->role = (hybrid || topo->local_rank < k) ? 1 : -1;
    e->next = (topo->node_index + 1) % topo->nnodes;
    e->prev = (topo->node_index + topo->nnodes - 1) % topo->nnodes;
    MPI_Group lg, wg;
    MPI_Comm_group(topo->lane, &lg);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(lg, 1, &e->prev, wg, &e->src_world);
    MPI_Group_free(&lg);
    MPI_Group_free(&wg);
    e->kthreads = o->mode == KC_MODE_MULTIPLE ? (int)k : 1;
    return k;
}

/* Bytes per MPI message of a per-CPU size (masteronly ring: k CPUs' worth). */
static size_t message_bytes(const options *o, long size, long k) {
    if (KC_FAULT("ring_msg_bytes")) return (size_t)size; /* k ignored: too short */
    return (size_t)size * (size_t)(o->mode == KC_MODE_MASTERONLY && o->pattern == PAT_RING ? k : 1);
}

/* Buffers, allocated once for the largest size; first touch by the fills. */
static void alloc_buffers(const kc_ctx *ctx, const options *o, exch *e, long k) {
    const size_t msg_max = message_bytes(o, o->sizes[o->nsizes - 1], k);
    size_t rcap = msg_max, scap = msg_max;
    if (o->pattern == PAT_BW) {
        scap += 8 * (size_t)(o->window - 1); /* send_fill_bytes */
        for (int i = 0; i < o->nsizes; ++i) {
            const size_t b = (size_t)bw_slots(o->window, o->sizes[i]) * (size_t)o->sizes[i];
            if (b > rcap) rcap = b;
        }
    }
    if (e->pat == PAT_RING && e->mode == KC_MODE_MULTIPLE) {
        e->tsbuf = kc_malloc(ctx, (size_t)k * sizeof *e->tsbuf);
        e->trbuf = kc_malloc(ctx, (size_t)k * sizeof *e->trbuf);
        for (long t = 0; t < k; ++t) {
            e->tsbuf[t] = page_alloc(ctx, msg_max);
            e->trbuf[t] = page_alloc(ctx, msg_max);
        }
    } else if (e->role >= 0) {
        e->sbuf = page_alloc(ctx, sends(e) ? scap : 1);
        e->rbuf = page_alloc(ctx, receives(e) ? rcap : 1);
    }
    e->reqs = kc_malloc(ctx, (size_t)o->window * sizeof *e->reqs);
    e->stats = kc_malloc(ctx, (size_t)o->window * sizeof *e->stats);
}

/* ---- measurement ---------------------------------------------------------- */

/* Fault-injection builds (-DKERNEL_FAULT_SLOW=P): the bw sender busy-waits P%
 * of each timed window's own duration inside the window's timer, so the
 * bandwidth it reports falls to 100/(100+P) of the real one while every
 * message still verifies (a performance regression, not a wrong result). */
#ifndef KC_FAULT_SLOW_PCT
#define KC_FAULT_SLOW_PCT 0
#endif

/* One OSU measurement, as osu_latency and osu_bw 5.9 make it: skip + iters
 * iterations (one round trip, or one window and its acknowledgement); the
 * sender (rank 0) reads MPI_Wtime before and after each iteration from the
 * skip-th on and adds the differences.  The sum on the sender, 0 elsewhere. */
static double osu_loop(kc_ctx *ctx, exch *e, counts c) {
    double total = 0.0;
    for (long i = 0; i < c.skip + c.iters; ++i) {
        if (e->role != 0 || i < c.skip) {
            run_iters(ctx, e, 1);
            continue;
        }
        const double t0 = kc_now();
        run_iters(ctx, e, 1);
        double t1 = kc_now();
        if (KC_FAULT_SLOW_PCT > 0 && e->pat == PAT_BW) {
            const double until = t1 + (t1 - t0) * (double)KC_FAULT_SLOW_PCT / 100.0;
            while ((t1 = kc_now()) < until) continue;
        }
        total += t1 - t0;
    }
    return total;
}

/* ring: one repetition of `iters` exchanges fenced by a barrier; the time of
 * the slowest rank (the same on every rank). */
static double ring_rep(kc_ctx *ctx, exch *e, long iters) {
    const double t0 = kc_fenced_now();
    run_iters(ctx, e, iters);
    return kc_max_over_ranks(ctx, kc_now() - t0);
}

#define RING_MAX_ITERS 100000000L /* --min-time's cap on the ring's count */

/* One batch of --min-time's calibration (kc_min_time_calibrate): ring_rep. */
static double rep_batch_time(kc_ctx *ctx, void *e, long n) { return ring_rep(ctx, e, n); }

/* What one message size gave. */
typedef struct {
    counts c;          /* timed and skipped iterations per repetition */
    double *samples;   /* [reps] seconds per iteration */
    double total;      /* seconds timed over all repetitions */
    long bad_total;    /* wrong bytes, all ranks */
    first_bad first;   /* the lowest rank that received some, and from whom */
    long sent_model;   /* bytes the figures count per iteration, over all ranks */
    long sent_actual;  /* bytes the MPI messages carry per iteration, over all ranks */
    size_t msg;        /* bytes per MPI message on this rank */
    long calib_iters;  /* --min-time: exchanges of the calibration (0: none) */
    double calib_s;    /* --min-time: its last batch's time, slowest rank */
} size_run;

/* The bytes per iteration the bandwidth and latency figures count, over all
 * ranks: pingpong and bw one message of `size` from the sender (bw: per
 * message of the window); ring size x k CPUs on every node
 * (bytes_per_node_per_iter x nodes). */
static long model_bytes(const options *o, const topology *topo, long size, long k) {
    if (o->pattern != PAT_RING) return size;
    return size * k * (o->mode != KC_MODE_MPI ? topo->ppn : 1) * topo->nnodes;
}

/* The bytes this rank's MPI messages carry per iteration (its count
 * argument): the pt2pt sender one message, a ring rank one per lane. */
static long sent_bytes(const exch *e) {
    if (e->pat != PAT_RING) return e->role == 0 ? (long)e->msg : 0;
    return e->role == 1 ? (long)e->msg * e->kthreads : 0;
}

/* Exchange ids of the data pattern: first, timed and last exchange. */
#define IT_FIRST 0
#define IT_TIMED 1

/* bw, a verified window of exchange `iter` (after prepare): the sender sends
 * message j from word j of its pattern, so every message differs; the
 * receiver takes them in rounds of bw_slots messages, each into its own slot,
 * poisoned before the round and checked after it, then acknowledges the
 * window.  The wrong bytes on this rank. */
static long bw_verified_window(kc_ctx *ctx, exch *e, long iter) {
    if (e->role == 0) {
        bw_send_window(e, 8);
        return 0;
    }
    if (e->role != 1) return 0;
    const uint64_t seed = pattern_seed(e->src_world, 0, e->size, iter);
    const long slots = bw_slots(e->window, e->size);
    long bad = 0;
    for (long first = 0; first < e->window; first += slots) {
        const long n = e->window - first < slots ? e->window - first : slots;
        poison_par(e->rbuf, (size_t)n * e->msg);
        for (long j = 0; j < n; ++j) {
            /* fault: the window's last message lands in the round's first slot */
            const int misplace = KC_FAULT("ring_bw_slot") && first + j == e->window - 1;
            MPI_Irecv(e->rbuf + (size_t)(misplace ? 0 : j) * e->msg, e->count, e->unit, e->peer,
                      TAG_DATA, e->comm, &e->reqs[j]);
        }
        MPI_Waitall((int)n, e->reqs, e->stats);
        for (long j = 0; j < n; ++j)
            bad += words_par(ctx, e->rbuf + (size_t)j * e->msg, e->msg,
                             shifted_seed(seed, (uint64_t)(first + j)), 1);
    }
    MPI_Send(e->ack, 4, MPI_BYTE, e->peer, TAG_ACK, e->comm);
    return bad;
}

/* Exchange `iter` outside the timed loops, verified: its wrong bytes on this
 * rank (bw: bw_verified_window). */
static long verified_exchange(kc_ctx *ctx, exch *e, long iter) {
    prepare(ctx, e, iter);
    if (e->pat == PAT_BW) return bw_verified_window(ctx, e, iter);
    run_iters(ctx, e, 1);
    return check(ctx, e, iter, 0);
}

/* Time one size (pingpong/bw as OSU; ring: warm-up, then --reps loops) and
 * verify the first exchange, the last timed one and a last separate one. */
static void measure_size(kc_ctx *ctx, const options *o, const topology *topo, exch *e,
                         long size, long k, size_run *r) {
    const int pt2pt = o->pattern != PAT_RING;
    e->size = size;
    e->msg = message_bytes(o, size, k);
    e->count = (int)e->msg;
    e->unit = MPI_BYTE;
    if (e->msg > (size_t)INT_MAX) { /* still one message: k units of size bytes */
        MPI_Type_contiguous((int)size, MPI_BYTE, &e->unit);
        MPI_Type_commit(&e->unit);
        e->count = (int)(e->msg / (size_t)size);
    }
    r->c = size_counts(o, size);
    r->calib_iters = 0;
    r->calib_s = 0.0;
    long bad = verified_exchange(ctx, e, IT_FIRST); /* the first exchange */

    /* warm-up and timed repetitions; bw: one receive buffer, as osu_bw */
    prepare(ctx, e, IT_TIMED);
    if (!pt2pt) {
        run_iters(ctx, e, r->c.skip);
        if (o->min_time > 0.0) {
            /* calibration, discarded: batches of 1, 2, 4, ... exchanges until one
             * lasts a tenth of S on the slowest rank (as spmv's), so the pace is
             * not that of one exchange (--iters 1) that the timer barely reads */
            const kc_calibration cal = kc_min_time_calibrate(ctx, r->c.iters, o->min_time,
                                                             RING_MAX_ITERS, rep_batch_time, e);
            r->c.iters = cal.count;
            r->calib_iters = cal.calib_calls;
            r->calib_s = cal.last_s;
        }
    }
    r->total = 0.0;
    for (long rep = 0; rep < o->reps; ++rep) {
        double t = 0.0;
        if (pt2pt) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = osu_loop(ctx, e, r->c);
            MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* the sender's time */
        } else {
            t = ring_rep(ctx, e, r->c.iters);
        }
        r->samples[rep] = t / (double)r->c.iters;
        r->total += t;
    }
    const int inject = KC_FAULT_INJECTED && size == o->sizes[o->nsizes - 1] &&
                       ctx->rank == (o->pattern == PAT_BW ? ctx->nranks - 1 : 0);
    bad += check(ctx, e, IT_TIMED, inject); /* data of the last timed exchange */

    const long it_last = 2 + o->reps * (r->c.skip + r->c.iters);
    bad += verified_exchange(ctx, e, it_last); /* a last, separate exchange */

    r->bad_total = kc_sum_over_ranks(ctx, bad);
    r->first = first_wrong_rank(bad, ctx->rank, e->src_world);
    /* the bandwidth counts the bytes the messages really carried */
    r->sent_model = model_bytes(o, topo, size, k);
    r->sent_actual = kc_sum_over_ranks(ctx, sent_bytes(e));
    r->msg = e->msg;
    if (e->unit != MPI_BYTE) MPI_Type_free(&e->unit);
}

/* ---- reporting ------------------------------------------------------------ */

/* No wrong byte anywhere, and the messages carried the bytes the figures count. */
static int size_verified(const size_run *r) {
    return r->bad_total == 0 && r->sent_actual == r->sent_model;
}

static void report_size(kc_ctx *ctx, const options *o, const topology *topo, const exch *e,
                        long k, const size_run *r) {
    const long size = e->size;
    double tmin = r->samples[0], tmax = r->samples[0], tsum = 0.0;
    for (long i = 0; i < o->reps; ++i) {
        tmin = fmin(tmin, r->samples[i]);
        tmax = fmax(tmax, r->samples[i]);
        tsum += r->samples[i];
    }
    const double tmean = tsum / (double)o->reps;
    const int verified = size_verified(r);
    double latency_us = NAN, bw_mbps = NAN, bytes_node = 0.0;
    if (o->pattern == PAT_PINGPONG) {
        latency_us = tmin / 2.0 * 1e6;
        bw_mbps = (double)size / (tmin / 2.0) / 1e6;
    } else if (o->pattern == PAT_BW) {
        bw_mbps = (double)size * (double)o->window / tmin / 1e6;
    } else {
        bytes_node = (double)r->sent_model / topo->nnodes; /* model_bytes per node */
        latency_us = tmin * 1e6;
        bw_mbps = bytes_node / tmin / 1e6;
    }
    const double fom = o->pattern == PAT_PINGPONG ? latency_us : bw_mbps;

    if (ctx->rank == 0) {
        printf("ring: %-9s %9ld B  iters %5ld x %ld  t/iter min %.3e s mean %.3e s max %.3e s",
               pattern_names[o->pattern], size, r->c.iters, o->reps, tmin, tmean, tmax);
        if (isfinite(latency_us)) printf("  latency %.3f us", latency_us);
        printf("  bandwidth %.1f MB/s  verification %s\n", bw_mbps, verified ? "PASSED" : "FAILED");
        fflush(stdout);
    }

    kc_json j;
    kc_json_open(&j, ctx);
    kc_json_str(&j, "pattern", pattern_names[o->pattern]);
    kc_json_int(&j, "size", size);
    kc_json_int(&j, "msg_bytes", (long long)e->msg);
    kc_json_int(&j, "iters", r->c.iters);
    kc_json_int(&j, "warmup", r->c.skip);
    kc_json_int(&j, "reps", o->reps);
    if (o->pattern == PAT_BW) kc_json_int(&j, "window", o->window);
    kc_json_int(&j, "nodes", topo->nnodes);
    kc_json_int(&j, "ranks_per_node", topo->ppn);
    kc_json_bool(&j, "rank_as_node", o->rank_as_node);
    kc_json_int(&j, "k", k);
    if (o->pattern == PAT_RING) kc_json_num(&j, "bytes_per_node_per_iter", bytes_node);
    if (isfinite(latency_us)) kc_json_num(&j, "latency_us", latency_us);
    kc_json_num(&j, "bandwidth_MBps", bw_mbps);
    kc_json_num(&j, "t_min_s", tmin);
    kc_json_num(&j, "t_mean_s", tmean);
    kc_json_num(&j, "t_max_s", tmax);
    kc_json_num_array(&j, "samples_s", r->samples, (size_t)o->reps);
    kc_json_num(&j, "t_total_s", r->total);
    kc_json_num(&j, "t_comm_s", r->total);
    kc_json_num(&j, "t_comp_s", 0.0);
    kc_json_fom(&j, fom, o->pattern == PAT_PINGPONG ? "us" : "MB/s");
    kc_json_int(&j, "wrong_bytes", r->bad_total);
    kc_json_int(&j, "bytes_counted_per_iter", r->sent_model);
    kc_json_int(&j, "bytes_sent_per_iter", r->sent_actual);
    /* added: how the figures were taken */
    kc_json_int(&j, "skip", r->c.skip);
    kc_json_str(&j, "timer", o->pattern == PAT_RING ? "slowest rank, per repetition"
                                                    : "sender, per iteration (OSU 5.9)");
    kc_json_num(&j, "t_call_s", r->total / ((double)o->reps * (double)r->c.iters));
    kc_json_int(&j, "calib_iters", r->calib_iters);
    kc_json_num(&j, "calib_t_s", r->calib_s);
    kc_json_num(&j, "min_time_s", o->min_time);
    if (KC_FAULT_SLOW_PCT > 0) kc_json_int(&j, "fault_slow_pct", KC_FAULT_SLOW_PCT);
    kc_json_bool(&j, "verified", verified);
    kc_json_emit(&j, ctx);
}

int main(int argc, char **argv) {
    const kc_cli cli = {"ring", HELP, longopts, parse_one, options_done,
                        KC_MODE_BIT(KC_MODE_MPI) | KC_MODE_BIT(KC_MODE_MASTERONLY) |
                            KC_MODE_BIT(KC_MODE_MULTIPLE),
                        " by the communication kernel (mpi, masteronly, multiple)"};
    options o = {.mode = KC_MODE_MPI, .pattern = PAT_RING, .reps = 3, .skip = -1};
    kc_ctx ctx;
    kc_start(&ctx, &argc, &argv, &cli, &o, &o.mode);
    if (o.pattern != PAT_RING && ctx.nranks < 2)
        kc_fail(&ctx, 2, "pattern %s needs at least 2 ranks (got %d)", pattern_names[o.pattern],
                ctx.nranks);

    topology topo;
    topology_init(&ctx, o.rank_as_node, &topo);
    exch e = {.pat = o.pattern, .mode = o.mode, .window = o.window, .role = -1, .kthreads = 1};
    long k = 1;
    if (o.pattern == PAT_RING) k = setup_ring(&ctx, &o, &topo, &e);
    else setup_pt2pt(&ctx, &e);
    alloc_buffers(&ctx, &o, &e, k);

    if (ctx.rank == 0) {
        printf("ring: pattern %s, mode %s, %d ranks x %d threads, %d node(s) x %d ranks%s",
               pattern_names[o.pattern], kc_mode_name(o.mode), ctx.nranks, ctx.threads,
               topo.nnodes, topo.ppn, o.rank_as_node ? " (rank-as-node)" : "");
        if (o.pattern == PAT_RING) printf(", k=%ld", k);
        if (o.pattern == PAT_BW) printf(", window %ld", o.window);
        printf(", %ld reps, iters-scale %g\n", o.reps, o.iters_scale);
        fflush(stdout);
    }

    size_run r = {.samples = kc_malloc(&ctx, (size_t)o.reps * sizeof *r.samples)};
    int si = 0; /* sizes ascending, up to the first that fails its verification */
    for (; si < o.nsizes && size_verified(&r); ++si) {
        measure_size(&ctx, &o, &topo, &e, o.sizes[si], k, &r);
        report_size(&ctx, &o, &topo, &e, k, &r);
    }

    free(r.samples);
    release(&e, o.pattern != PAT_RING);
    topology_free(&topo);
    if (r.bad_total != 0)
        kc_fail(&ctx, 3, "verification FAILED: size %ld B: %ld wrong byte(s) received; first on "
                         "rank %d in the message from rank %d",
                o.sizes[si - 1], r.bad_total, r.first.rank, r.first.src);
    if (r.sent_actual != r.sent_model)
        kc_fail(&ctx, 3, "verification FAILED: size %ld B: the MPI messages carry %ld bytes per "
                         "iteration over all ranks (msg_bytes %zu) but the bandwidth counts %ld "
                         "(bytes_counted_per_iter)",
                o.sizes[si - 1], r.sent_actual, r.msg, r.sent_model);
    return kc_finalize(&ctx);
}
