/* spmv reporting: sums over ranks, readable lines, RESULT, --times-file. */
#include "spmv.h"

#include <stdlib.h>

void spmv_summarise(const kc_ctx *ctx, const problem *P, const timing *tm, spmv_result *r) {
    for (int k = 0; k < PH_COUNT; ++k) r->st[k] = kc_stat_over_ranks(ctx, tm->sum[k]);
    r->wall = kc_stat_over_ranks(ctx, tm->wall);
    long long loc[2] = {P->nnz, P->rows}, glob[2] = {0, 0};
    MPI_Allreduce(loc, glob, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    r->nnz = glob[0];
    r->rows = glob[1];
    const double flops = 2.0 * (double)glob[0] * (double)tm->calls;
    r->gflops = flops / r->wall.max / 1e9;
    r->bytes_model = 12.0 * (double)glob[0] + 20.0 * (double)glob[1];
    r->traffic_gbs = r->bytes_model * (double)tm->calls / r->wall.max / 1e9;
}

void spmv_write_times(FILE *tf, const problem *P, const timing *tm) {
    fprintf(tf, "# spmv rank 0 per-call times (s): call pack comm comp%s\n",
            P->funneled ? " overlap" : "");
    for (long it = 0; it < tm->calls; ++it) {
        const double *t = tm->per_call[it].t;
        fprintf(tf, "%ld %.9e %.9e %.9e", it, t[PH_PACK], t[PH_COMM], t[PH_COMP]);
        if (P->funneled) fprintf(tf, " %.9e", t[PH_OVL]);
        fputc('\n', tf);
    }
}

static void print_lines(const kc_ctx *ctx, const options *o, const problem *P,
                        const timing *tm, const spmv_result *r) {
    const kc_stat *st = r->st;
    printf("spmv: %d ranks x %d threads, mode %s, rank grid %dx%dx%d, box %dx%dx%d per rank "
           "(decomposition of %d threads), global grid %lldx%lldx%lld\n",
           ctx->nranks, ctx->threads, kc_mode_name(o->mode), P->px, P->py, P->pz, P->nx, P->ny,
           P->nz, P->decomp, P->Gx, P->Gy, P->Gz);
    printf("spmv: %lld rows, %lld nonzeros; rank 0: %d neighbours, %lld halo bytes/call\n",
           r->rows, r->nnz, P->nnb, (long long)P->nsend * 8);
    printf("spmv: rank 0: %d interior rows%s, %d boundary rows\n", P->nint,
           P->funneled ? " overlap the exchange" : "", P->rows - P->nint);
    printf("spmv: %ld calls (+%ld warm-up): pack %.6f s, comm %.6f s, comp %.6f s "
           "(sums, max over ranks)%s; wall %.6f s\n",
           tm->calls, o->warmup, st[PH_PACK].max, st[PH_COMM].max, st[PH_COMP].max,
           P->funneled ? " [comp includes the overlapped interior]" : "", r->wall.max);
    if (tm->calib_calls)
        printf("spmv: --min-time %g s: %ld calls requested, %ld timed after %ld calibration "
               "calls\n", o->min_time, o->iters, tm->calls, tm->calib_calls);
    printf("spmv: comp split: interior %.6f s, boundary %.6f s (sums, max over ranks)\n",
           st[PH_INT].max, st[PH_BND].max);
    printf("spmv: %.3f GFLOP/s, %.3f GB/s of modelled traffic (%.0f bytes per call)\n",
           r->gflops, r->traffic_gbs, r->bytes_model);
    if (r->shared_core)
        printf("spmv: WARNING: a rank may run on fewer cores than it has threads: the "
               "launcher bound it too narrowly (Open MPI: --map-by slot:PE=%d or "
               "--bind-to none); timings are not meaningful\n",
               ctx->threads);
    printf("spmv: verification %s (max|y-yref|/max|yref| = %.3g, bound %.0e)\n",
           r->verified ? "PASSED" : "FAILED", r->rel_err, REL_TOL);
}

void spmv_report(const kc_ctx *ctx, const options *o, const problem *P, const timing *tm,
                 const spmv_result *r) {
    if (ctx->rank == 0) print_lines(ctx, o, P, tm, r);
    const kc_stat *st = r->st;
    kc_json j;
    kc_json_open(&j, ctx);
    kc_json_int(&j, "size", o->n);
    kc_json_int(&j, "iters", tm->calls);
    kc_json_int(&j, "warmup", o->warmup);
    kc_json_int(&j, "decomp_threads", P->decomp);
    const long long box[3] = {P->nx, P->ny, P->nz}, dims[3] = {P->px, P->py, P->pz},
                    grid[3] = {P->Gx, P->Gy, P->Gz};
    kc_json_int_array(&j, "box", box, 3);
    kc_json_int_array(&j, "dims", dims, 3);
    kc_json_int_array(&j, "global_grid", grid, 3);
    kc_json_int(&j, "rows", r->rows);
    kc_json_int(&j, "nnz", r->nnz);
    kc_json_num(&j, "t_total_s", r->wall.max);
    kc_json_num(&j, "t_pack_s", st[PH_PACK].max);
    kc_json_num(&j, "t_comm_s", st[PH_COMM].max);
    kc_json_num(&j, "t_comp_s", st[PH_COMP].max);
    kc_json_stat(&j, "t_total", r->wall);
    kc_json_stat(&j, "t_pack", st[PH_PACK]);
    kc_json_stat(&j, "t_comm", st[PH_COMM]);
    kc_json_stat(&j, "t_comp", st[PH_COMP]);
    kc_json_num(&j, "t_comp_interior_s", st[PH_INT].max);
    kc_json_num(&j, "t_comp_boundary_s", st[PH_BND].max);
    kc_json_stat(&j, "t_comp_interior", st[PH_INT]);
    kc_json_stat(&j, "t_comp_boundary", st[PH_BND]);
    if (P->funneled) {
        kc_json_num(&j, "t_overlap_s", st[PH_OVL].max);
        kc_json_stat(&j, "t_overlap", st[PH_OVL]);
    }
    kc_json_int(&j, "interior_rows", P->nint); /* rank 0's */
    kc_json_int(&j, "boundary_rows", P->rows - P->nint);
    kc_json_fom(&j, r->gflops, "GFLOP/s");
    kc_json_num(&j, "bytes_per_iter_model", r->bytes_model);
    kc_json_num(&j, "traffic_gbs", r->traffic_gbs);
    kc_json_int(&j, "halo_bytes", (long long)P->nsend * 8);
    kc_json_int(&j, "neighbours", P->nnb);
    const size_t nt = tm->calls > MAX_TIMES_IN_JSON ? MAX_TIMES_IN_JSON : (size_t)tm->calls;
    double *comm = kc_malloc(ctx, nt * sizeof *comm);
    for (size_t it = 0; it < nt; ++it) comm[it] = tm->per_call[it].t[PH_COMM];
    kc_json_num_array(&j, "comm_times_s", comm, nt);
    free(comm);
    kc_json_bool(&j, "comm_times_complete", (long)nt == tm->calls);
    kc_json_bool(&j, "threads_share_core", r->shared_core);
    kc_json_num(&j, "rel_error", r->rel_err);
    kc_json_num(&j, "rel_error_bound", REL_TOL);
    kc_json_int(&j, "interior_halo_reads", r->interior_halo_reads);
    /* added for --min-time: the count asked for, the calibration, and per-call
     * times (sums over the timed calls / calls, max over ranks) */
    const double calls = (double)tm->calls;
    kc_json_int(&j, "iters_requested", o->iters);
    kc_json_num(&j, "min_time_s", o->min_time);
    kc_json_int(&j, "calib_calls", tm->calib_calls);
    kc_json_num(&j, "calib_t_call_s", tm->calib_pace);
    kc_json_num(&j, "t_call_s", r->wall.max / calls);
    kc_json_num(&j, "t_pack_call_s", st[PH_PACK].max / calls);
    kc_json_num(&j, "t_comm_call_s", st[PH_COMM].max / calls);
    kc_json_num(&j, "t_comp_call_s", st[PH_COMP].max / calls);
    kc_json_call_stat(&j, tm->call);
    kc_json_bool(&j, "verified", r->verified);
    kc_json_emit(&j, ctx);
}
