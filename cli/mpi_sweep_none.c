/* mpi_sweep_none.c: mpi_sweep.h without MPI (CMake did not find it). A
 * process is never a rank; started by a launcher anyway, each process would
 * run the whole sweep on its own, so the command says so and refuses. */
#include <stdlib.h>

#include "common.h"
#include "mpi_sweep.h"

int mpi_sweep_launched(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v)
        v = getenv("PMI_SIZE");
    return v && atoi(v) > 1;
}

int mpi_sweep_init(mpi_sweep **out, char *err, size_t errlen)
{
    *out = NULL;
    ll_errf(err, errlen, "started as one of several MPI processes, but this loadlaw was built without MPI "
            "(install libopenmpi-dev and rebuild; the configure summary says whether MPI was found)");
    return LL_EINVAL;
}

int mpi_sweep_rank(const mpi_sweep *m) { return 0; }
int mpi_sweep_ranks(const mpi_sweep *m) { return 1; }
int mpi_sweep_lost_rank(const mpi_sweep *m) { return 0; }
void mpi_sweep_synced(mpi_sweep *m) {}

int mpi_sweep_bcast(mpi_sweep *m, char **text, char *err, size_t errlen) { return LL_EINVAL; }

int mpi_sweep_dist(mpi_sweep *m, ll_rec_writer *w, const char *local_path, double wait_s, const lg_dist **out)
{
    *out = NULL;
    return LL_EINVAL;
}

void mpi_sweep_end(mpi_sweep *m, int exit_code) {}
