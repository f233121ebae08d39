/* mpi_where: where each rank of an MPI job runs, and which MPI it links.
 *
 * Rank 0 prints one line per rank:
 *   rank R of N host H cpu C allowed A,B,... library <MPI_Get_library_version, first line>
 * (the cores the rank may run on, from its affinity mask).  A site check for
 * the harness's tests (tests/site_checks/mpi_where.py), written as a centre
 * would write one; no harness code involved.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LINE = 1024 };

static void describe(char *out, int rank, int size) {
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n")] = '\0';
    char allowed[512] = "";
    size_t used = 0;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
        for (int c = 0; c < CPU_SETSIZE && used + 8 < sizeof allowed; ++c) {
            if (CPU_ISSET(c, &mask)) {
                used += (size_t)snprintf(allowed + used, sizeof allowed - used, "%s%d",
                                         used ? "," : "", c);
            }
        }
    }
    snprintf(out, LINE, "rank %d of %d host %s cpu %d allowed %s library %s", rank, size,
             host, sched_getcpu(), allowed[0] ? allowed : "?", lib);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char mine[LINE];
    describe(mine, rank, size);
    char *all = rank == 0 ? malloc((size_t)size * LINE) : NULL;
    if (rank == 0 && all == NULL) {
        fprintf(stderr, "mpi_where: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(mine, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; ++r) {
            printf("%s\n", all + (size_t)r * LINE);
        }
        free(all);
    }
    MPI_Finalize();
    return 0;
}
