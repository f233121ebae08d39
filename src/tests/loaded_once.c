/* LD_PRELOAD for a ctest: getloadavg reports a loaded machine on its first
 * call only, so that OpenMP's dynamic adjustment (OMP_DYNAMIC=true, which
 * caps a team at the online CPUs minus the load) gives the first parallel
 * region one thread and the later ones all that OMP_NUM_THREADS asks for. */
#include <stdlib.h>

int getloadavg(double loadavg[], int nelem) {
    static int calls = 0;
    for (int i = 0; i < nelem; ++i) loadavg[i] = calls == 0 ? 4096.0 : 0.0;
    ++calls;
    return nelem;
}
