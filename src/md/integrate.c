/* md integration: velocity Verlet (NVE) and the timed steps, each phase
 * charged to its timer as miniMD's Integrate::run does. */
#include "md.h"

#include <string.h>

/* movea: v += dt/2 f; x += dt v */
static void move_a(md_sys *s, double dt) {
    const int n = s->nlocal;
    double *x = s->x, *v = s->v;
    const double *f = s->f;
    const double h = 0.5 * dt;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < 3 * n; ++k) {
        v[k] += h * f[k];
        x[k] += dt * v[k];
    }
}

/* One velocity-Verlet step, each phase charged to its timer as miniMD's
 * timer.stamp() does; returns the total energy per atom after it. */
static double md_step(md_sys *s, const options *o, long step, double N, kc_timer *tm,
                      run_t *r) {
    kc_stamp_skip(tm);
    move_a(s, o->dt);
    kc_stamp(tm, T_MOVEA);
    if (step % o->rebuild == 0) {
        md_migrate(s);
        md_borders(s);
        kc_stamp(tm, T_MOVOUT);
        md_build_neighbours(s);
        kc_stamp(tm, T_NEIGH);
    } else {
        md_update_ghosts(s);
        kc_stamp(tm, T_MOVOUT);
    }
    md_compute_forces(s, &r->epot, &r->vir);
    kc_stamp(tm, T_FORCE);
    const double kel = md_half_kick(s->v, s->f, 0.5 * o->dt, s->nlocal); /* moveb: v += dt/2 f */
    kc_stamp(tm, T_MOVEB);
    double glob[3];
    md_global_sums(s, kel, r->epot, r->vir, glob);
    kc_stamp(tm, T_SUM);
    return (glob[0] + glob[1]) / N;
}

/* The timed steps.  --min-time: the first min(--steps, --rebuild-every) steps
 * calibrate; the count becomes max(--steps, enough steps for min_time seconds),
 * the same on every rank, and its per-step times must fit in memory
 * (md_need_step_times: status 2). */
void md_run_steps(md_sys *s, const options *o, double N, const thermo *t0, run_t *r) {
    const double e0 = t0->e, escale = md_drift_scale(t0);
    kc_timer tm;
    const long calib = o->min_time > 0.0 ? (o->steps < o->rebuild ? o->steps : o->rebuild) : 0;
    long steps = o->steps;
    kc_calls calls;
    kc_calls_init(s->ctx, &calls, steps);
    r->drift_max = 0.0;
    MPI_Barrier(s->cart);
    kc_timer_start(&tm);
    kc_calls_start(&calls);
    const double t_start = tm.last;
    for (long step = 1; step <= steps; ++step) {
        const double dr = fabs(md_step(s, o, step, N, &tm, r) - e0) / escale;
        if (dr > r->drift_max) r->drift_max = dr;
        if (step == calib) {
            const double t_calib = kc_now() - t_start;
            r->calib_steps = calib;
            r->calib_pace = t_calib / (double)calib;
            steps = kc_min_time_count(s->ctx, o->steps, o->min_time, t_calib, calib, MD_MAX_STEPS);
            /* up to 8 GB per rank at MD_MAX_STEPS: checked as the system is
             * (the same count on every rank, so every rank calls it) */
            if (steps > o->steps) md_need_step_times(s, o, steps, o->steps);
            kc_calls_reserve(s->ctx, &calls, steps); /* room for the steps --min-time added */
        }
        kc_calls_mark(&calls);
    }
    r->t_loop = kc_now() - t_start;
    r->steps = steps;
    r->call = kc_calls_end(s->ctx, &calls);
    memcpy(r->tph, tm.t, sizeof r->tph);
}
