/* md reporting: timings over ranks, readable lines, RESULT, the failure message. */
#include "md.h"

#include <stdio.h>
#include <string.h>

static const char *const timer_keys[T_COUNT] = {"t_force", "t_movout", "t_sum",
                                                 "t_movea", "t_moveb", "t_neigh"};
/* The energies per atom at step 0 and at the end. */
static const char *const energy_keys[6] = {"e_kin_0",   "e_pot_0",   "e_total_0",
                                           "e_kin_end", "e_pot_end", "e_total_end"};

void md_print_start(const md_sys *s, const options *o, long natoms, long ghosts0,
                    const thermo *t0) {
    printf("md: %ld atoms (fcc L=%ld, density %g), box %.6g, cutoff %g, skin %g, dt %g, "
           "%ld steps, rebuild every %ld, %s lists, preset %s\n",
           natoms, o->L, o->density, s->box, o->cutoff, o->skin, o->dt, o->steps, o->rebuild,
           o->full_list ? "full" : "half", o->preset);
    printf("md: %d ranks (%dx%dx%d) x %d threads, mode %s, %ld ghost atoms at step 0\n",
           s->ctx->nranks, s->dims[0], s->dims[1], s->dims[2], s->ctx->threads,
           kc_mode_name(s->ctx->mode), ghosts0);
    printf("md: step 0: pe_0 = %.17g virial_0 = %.17g\n", t0->pe, t0->vir);
    printf("md: step 0: T %.6f  e_kin %.8f  e_pot %.8f  e_total %.8f  press %.8f\n", t0->temp,
           t0->ke, t0->pe, t0->e, t0->press);
}

/* The phase times over ranks, the loop's time (slowest rank), the
 * communication time (movout + sum, slowest rank) and the figure of merit. */
void md_summarise(const kc_ctx *ctx, long natoms, const run_t *r, md_times *t) {
    t->t_total = kc_max_over_ranks(ctx, r->t_loop);
    for (int k = 0; k < T_COUNT; ++k) t->st[k] = kc_stat_over_ranks(ctx, r->tph[k]);
    t->t_comm = kc_max_over_ranks(ctx, r->tph[T_MOVOUT] + r->tph[T_SUM]);
    t->t_comp = t->t_total - t->t_comm;
    t->fom = (double)natoms * (double)r->steps / t->t_total;
}

static void print_end(const options *o, long natoms, const run_t *r, const verdict *v,
                      const md_times *t) {
    const kc_stat *st = t->st;
    printf("md: step %ld: T %.6f  e_kin %.8f  e_pot %.8f  e_total %.8f  press %.8f\n", r->steps,
           v->end.temp, v->end.ke, v->end.pe, v->end.e, v->end.press);
    printf("md: phases (max over ranks, s): force %.4f movout %.4f sum %.4f movea %.4f "
           "moveb %.4f neigh %.4f; total %.4f\n",
           st[T_FORCE].max, st[T_MOVOUT].max, st[T_SUM].max, st[T_MOVEA].max, st[T_MOVEB].max,
           st[T_NEIGH].max, t->t_total);
    printf("md: %.6g atom-steps/s\n", t->fom);
    /* the limit is --drift-tol, and the bound grown with the steps where the
     * drift needed it (a run over MD_DRIFT_REF_STEPS steps, drift >= --drift-tol) */
    char grown[96] = "";
    if (v->drift_bound != o->drift_tol && !(v->drift < o->drift_tol))
        snprintf(grown, sizeof grown, " x %ld/%ld steps = %g", r->steps, MD_DRIFT_REF_STEPS,
                 v->drift_bound);
    printf("md: verification %s: atoms %ld of %ld, lost %ld, |P|/N %.3e (limit 1e-10), "
           "drift %.3e (limit %g%s), max drift %.3e%s\n",
           v->verified ? "PASSED" : "FAILED", v->count, natoms, v->lost, v->pmax, v->drift,
           o->drift_tol, grown, r->drift_max,
           o->check_forces ? (v->ok_forces ? ", forces match brute force" : ", FORCES DIFFER") : "");
    printf("md: checks: T_0 rel. err %.3e (limit 1e-12); fcc lattice pe %.17g virial "
           "%.17g per atom, rel. err %.3e / %.3e (limit 1e-10)%s; neighbour lists: %ld pairs "
           "within cutoff+skin missing at step 0, %ld at the end%s, %ld within the cutoff "
           "(dangerous builds)\n",
           v->temp_err, v->pe_lat, v->vir_lat, v->pe_err, v->vir_err,
           v->vir_at_cutoff ? " (a shell on the cutoff: virial not compared)" : "", v->list_0,
           v->list_bad, v->list_fresh ? "" : " (not rebuilt)", v->list_dangerous);
}

static void json_number_17g(kc_json *j, const char *key, double value) {
    char num[64];
    snprintf(num, sizeof num, "%.17g", value);
    kc_json_raw(j, key, isfinite(value) ? num : "null");
}

void md_report(const md_sys *s, const options *o, long natoms, const thermo *t0, const run_t *r,
               const verdict *v, const md_times *t) {
    const kc_ctx *ctx = s->ctx;
    if (ctx->rank == 0) print_end(o, natoms, r, v, t);
    kc_json j;
    kc_json_open(&j, ctx);
    kc_json_int(&j, "size", natoms);
    kc_json_int(&j, "atoms", natoms);
    kc_json_int(&j, "steps", r->steps);
    kc_json_int(&j, "cells_per_side", o->L);
    kc_json_str(&j, "preset", o->preset);
    kc_json_num(&j, "density", o->density);
    kc_json_num(&j, "cutoff", o->cutoff);
    kc_json_num(&j, "skin", o->skin);
    kc_json_num(&j, "dt", o->dt);
    kc_json_int(&j, "rebuild_every", o->rebuild);
    kc_json_str(&j, "neighbour_list", o->full_list ? "full" : "half");
    const long long dims[3] = {s->dims[0], s->dims[1], s->dims[2]};
    kc_json_int_array(&j, "decomposition", dims, 3);
    kc_json_num(&j, "t_total_s", t->t_total);
    kc_json_num(&j, "t_comp_s", t->t_comp);
    kc_json_num(&j, "t_comm_s", t->t_comm);
    for (int k = 0; k < T_COUNT; ++k) kc_json_stat(&j, timer_keys[k], t->st[k]);
    kc_json_fom(&j, t->fom, "atom-steps/s");
    const double energies[6] = {t0->ke, t0->pe, t0->e, v->end.ke, v->end.pe, v->end.e};
    for (int k = 0; k < 6; ++k) kc_json_num(&j, energy_keys[k], energies[k]);
    json_number_17g(&j, "pe_0", t0->pe);
    json_number_17g(&j, "virial_0", t0->vir);
    kc_json_num(&j, "drift", v->drift);
    kc_json_num(&j, "drift_max", r->drift_max);
    kc_json_num(&j, "drift_tol", o->drift_tol);
    kc_json_num(&j, "momentum", v->pmax);
    kc_json_num(&j, "temp_0", t0->temp);
    kc_json_num(&j, "temp_end", v->end.temp);
    kc_json_num(&j, "press_0", t0->press);
    kc_json_num(&j, "press_end", v->end.press);
    kc_json_int(&j, "atoms_end", v->count);
    kc_json_int(&j, "lost", v->lost);
    if (o->check_forces) kc_json_num(&j, "force_check_rel_err", v->force_err);
    /* added: the step-0 checks against --temp and the fcc lattice, the lists' check */
    kc_json_int(&j, "atoms_0", v->count_0);
    kc_json_num(&j, "temp_0_rel_err", v->temp_err);
    json_number_17g(&j, "pe_lattice", v->pe_lat);
    json_number_17g(&j, "virial_lattice", v->vir_lat);
    kc_json_num(&j, "pe_0_lattice_rel_err", v->pe_err);
    kc_json_num(&j, "virial_0_lattice_rel_err", v->vir_err);
    kc_json_int(&j, "list_pairs_missing_0", v->list_0);
    kc_json_int(&j, "list_pairs_missing", v->list_bad);
    kc_json_int(&j, "list_pairs_dangerous", v->list_dangerous);
    /* added: per-step times (sums / steps) and the --min-time that set the count */
    kc_json_int(&j, "steps_requested", o->steps);
    kc_json_num(&j, "min_time_s", o->min_time);
    kc_json_int(&j, "calib_steps", r->calib_steps);
    kc_json_num(&j, "calib_t_step_s", r->calib_pace);
    kc_json_num(&j, "t_step_s", t->t_total / (double)r->steps);
    char key[40];
    for (int k = 0; k < T_COUNT; ++k) {
        snprintf(key, sizeof key, "%s_step_s", timer_keys[k]);
        kc_json_num(&j, key, t->st[k].max / (double)r->steps);
    }
    kc_json_call_stat(&j, r->call); /* per step: t_call_median_s, t_call_trimmed_s */
    kc_json_bool(&j, "verified", v->verified);
    kc_json_emit(&j, ctx);
}

void md_fail_verification(const kc_ctx *ctx, const options *o, long natoms, const verdict *v) {
    char why[1024] = "";
    const size_t cap = sizeof why;
    if (v->count != natoms) snprintf(why + strlen(why), cap - strlen(why), " atoms %ld != %ld;", v->count, natoms);
    if (v->count_0 != natoms) snprintf(why + strlen(why), cap - strlen(why), " atoms at step 0 %ld != %ld;", v->count_0, natoms);
    if (!v->ok_mom) snprintf(why + strlen(why), cap - strlen(why), " |P|/N %.3e >= 1e-10;", v->pmax);
    if (!v->ok_drift && v->drift_bound != o->drift_tol)
        snprintf(why + strlen(why), cap - strlen(why), " energy drift %.3e >= %g (--drift-tol %g x steps/%ld);",
                 v->drift, v->drift_bound, o->drift_tol, MD_DRIFT_REF_STEPS);
    else if (!v->ok_drift)
        snprintf(why + strlen(why), cap - strlen(why), " energy drift %.3e >= %g;", v->drift, o->drift_tol);
    if (!v->ok_lost) snprintf(why + strlen(why), cap - strlen(why), " %ld atoms outside their sub-box;", v->lost);
    if (!v->ok_temp)
        snprintf(why + strlen(why), cap - strlen(why), " step-0 temperature differs from --temp %g by %.3e relative (> 1e-12);", o->temp, v->temp_err);
    if (!v->ok_lattice)
        snprintf(why + strlen(why), cap - strlen(why), " step-0 energy/virial per atom differ from the fcc lattice's (%.10g / %.10g) by %.3e / %.3e relative (> 1e-10);",
                 v->pe_lat, v->vir_lat, v->pe_err, v->vir_err);
    if (!v->ok_list)
        snprintf(why + strlen(why), cap - strlen(why), " %ld pairs within cutoff+skin %g missing from (or repeated in) the neighbour lists as built (step 0: %ld, last step: %ld);",
                 v->list_0 + v->list_bad, o->cutoff + o->skin, v->list_0, v->list_bad);
    if (!v->ok_stale)
        snprintf(why + strlen(why), cap - strlen(why), " %ld of the %ld pairs within the cutoff missing from the last step's lists (more than %g%%: skin %g too thin for --rebuild-every %ld);",
                 v->list_dangerous, v->list_within, 100.0 * MD_STALE_MAX, o->skin, o->rebuild);
    if (!v->ok_forces) snprintf(why + strlen(why), cap - strlen(why), " forces differ from brute force by %.3e;", v->force_err);
    kc_fail(ctx, 3, "verification FAILED:%s", why);
}
