/* dist.h: `loadlaw sweep` as one of K processes
 * started by mpirun (or srun, or an MPIJob): the launch, the job broadcast
 * from rank 0, and the lg_dist hooks (loadgen.h) that agree on each level's
 * start and clock and bring every rank's records to rank 0.
 *
 * Two implementations behind this header: dist_mpi.c (built when CMake
 * found MPI, LOADLAW_HAVE_MPI) and dist_none.c (no MPI: a process is
 * never a rank, and dist_launched says why when a launcher started it).
 *
 * Threads: every function here is called from the thread that runs the
 * sweep (MPI_THREAD_FUNNELED); never from libcurl callbacks, workers or the
 * signal thread. Errors: 0 or a negative LL_E* code with a message in err. */
#ifndef LOADLAW_DIST_H
#define LOADLAW_DIST_H

#include <stddef.h>

#include "loadgen.h"

typedef struct dist_world dist_world;

/* 1 when this process was started by an MPI launcher with more than one
 * process (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE... in the environment),
 * read before MPI_Init so a plain `loadlaw sweep` never starts MPI. Without
 * MPI built in, the same test: dist_init then fails saying why, rather
 * than K processes each running the whole sweep. */
int dist_launched(void);

/* MPI_Init_thread (funneled) and this process's rank; errors return instead
 * of aborting the job (MPI_ERRORS_RETURN). *out freed by dist_end. */
int dist_init(dist_world **out, char *err, size_t errlen);
int dist_rank(const dist_world *m);
int dist_ranks(const dist_world *m);

/* Rank 0's blob to every rank: on rank 0 *text (NUL-terminated) is sent; on
 * the others *text becomes a malloc'ed copy (caller frees). */
int dist_bcast(dist_world *m, char **text, char *err, size_t errlen);

/* Set up the hooks for one sweep: w is this rank's records writer (rank 0:
 * RUN_DIR/records.jsonl; rank r: its own file at local_path, read back at
 * each level's end and sent). wait_s bounds how long rank 0 waits for a
 * rank's message before naming it (a rank that died). *out lives in m.
 * 0 or LL_ENOMEM. */
int dist_hooks(dist_world *m, ll_rec_writer *w, const char *local_path, double wait_s, const lg_dist **out);

/* After the sweep: 1 when a rank stopped answering (then the job must be
 * aborted, not finalised: a collective exit would wait for it forever). */
int dist_lost_rank(const dist_world *m);
/* Every rank is known to end here too (rank 0's outcome was shared, or the
 * level loop ended together): this process may finalise and exit alone. */
void dist_synced(dist_world *m);

/* MPI_Finalize; or MPI_Abort(exit_code) when a rank was lost or this one
 * stops out of step with the others (they would wait for it): that call
 * does not return, it ends every process of the job. Frees m. NULL: no-op. */
void dist_end(dist_world *m, int exit_code);

#endif
