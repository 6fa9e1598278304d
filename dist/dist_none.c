/* dist_none.c: dist.h without MPI (CMake did not find it). A
 * process is never a rank; started by a launcher anyway, each process would
 * run the whole sweep on its own, so the command says so and refuses. */
#include <stdlib.h>

#include "common.h"
#include "dist.h"

int dist_launched(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v)
        v = getenv("PMI_SIZE");
    return v && atoi(v) > 1;
}

int dist_init(dist_world **out, char *err, size_t errlen)
{
    *out = NULL;
    ll_errf(err, errlen, "started as one of several MPI processes, but this loadlaw was built without MPI "
            "(install libopenmpi-dev and rebuild; the configure summary says whether MPI was found)");
    return LL_EINVAL;
}

int dist_rank(const dist_world *m) { return 0; }
int dist_ranks(const dist_world *m) { return 1; }
int dist_lost_rank(const dist_world *m) { return 0; }
void dist_synced(dist_world *m) {}

int dist_bcast(dist_world *m, char **text, char *err, size_t errlen) { return LL_EINVAL; }

int dist_hooks(dist_world *m, ll_rec_writer *w, const char *local_path, double wait_s, const lg_dist **out)
{
    *out = NULL;
    return LL_EINVAL;
}

void dist_end(dist_world *m, int exit_code) {}
