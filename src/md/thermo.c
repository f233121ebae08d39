/* md thermodynamics: kinetic energy, momentum, sums over ranks, and the
 * state per atom (temperature, energies, pressure). */
#include "md.h"

/* v += h f for n atoms (not where f is NULL); returns their kinetic energy
 * 1/2 sum v^2, summed with compensation per thread, then OpenMP-reduced. */
double md_half_kick(double *v, const double *f, double h, int n) {
    double ks = 0.0, kc = 0.0;
#pragma omp parallel reduction(+ : ks, kc)
    {
        double s1 = 0.0, c1 = 0.0;
#pragma omp for schedule(static)
        for (int i = 0; i < n; ++i) {
            double e = 0.0;
            for (int k = 3 * i; k < 3 * i + 3; ++k) {
                if (f) v[k] += h * f[k];
                e += v[k] * v[k];
            }
            acc(&s1, &c1, e);
        }
        ks += s1;
        kc += c1;
    }
    return 0.5 * (ks + kc);
}

/* The kinetic energy of the owned atoms. */
double md_kinetic(const md_sys *s) { return md_half_kick(s->v, NULL, 0.0, s->nlocal); }

/* Global momentum (3 components). */
void md_momentum(const md_sys *s, double p[3]) {
    double loc[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i < s->nlocal; ++i)
        for (int d = 0; d < 3; ++d) loc[d] += s->v[3 * i + d];
    MPI_Allreduce(loc, p, 3, MPI_DOUBLE, MPI_SUM, s->cart);
}

/* Sums over ranks of the kinetic energy, potential energy and virial. */
void md_global_sums(const md_sys *s, double ke, double pe, double vir, double glob[3]) {
    double loc[3] = {ke, pe, vir};
    /* KERNEL_FAULT=md_thermo_max: the wrong reduction */
    MPI_Allreduce(loc, glob, 3, MPI_DOUBLE, KC_FAULT("md_thermo_max") ? MPI_MAX : MPI_SUM, s->cart);
}

/* Thermodynamic state per atom of the global sums, N atoms in volume V. */
thermo md_thermo_of(const double glob[3], double N, double V) {
    const double ke = glob[0] / N, pe = glob[1] / N;
    return (thermo){.ke = ke, .pe = pe, .vir = glob[2] / N, .e = ke + pe,
                    .temp = 2.0 * glob[0] / (3.0 * N - 3.0),
                    .press = (2.0 * glob[0] + glob[2]) / (3.0 * V)}; /* as LAMMPS: dof T = 2 KE */
}

/* The scale of the energy drift |E - E_0| / scale: the larger of |E_0| and the
 * kinetic energy per atom at step 0 (1 if both are 0: a gas at rest without
 * pairs, whose drift is then absolute).  |E_0| alone vanishes where the kinetic
 * and potential energies cancel (--temp ~4.2 at the default density: E_0 ~
 * -0.015 per atom), and the same absolute error then became a relative one of
 * 7e-3; E_kin_0 cannot vanish at --temp > 0.  Where |E_0| is the larger (the
 * default --temp 1.44: |E_0| 4.18 > E_kin_0 2.16) the drift is |E - E_0| / |E_0|
 * exactly as before. */
double md_drift_scale(const thermo *t0) {
    const double scale = fmax(fabs(t0->e), t0->ke);
    return scale > 0.0 ? scale : 1.0;
}
