/* comm_impl.h (internal to engine/comm_*.c): the shape every eng_comm shares,
 * so comm_host.c and comm_nccl.c each fill a table and the dispatch in
 * comm_host.c (eng_comm_allreduce, ...) stays one place. */
#ifndef LOADLAW_ENGINE_COMM_IMPL_H
#define LOADLAW_ENGINE_COMM_IMPL_H

#include "comm.h"

typedef struct eng_comm_ops {
    const char *name;
    int (*allreduce)(eng_comm *c, int rank, float *buf, size_t count, void *stream);
    int (*allreduce_group)(eng_comm *c, float *const *bufs, size_t count, void *const *streams);
    int (*barrier)(eng_comm *c, int rank);
    int (*check)(eng_comm *c);   /* NULL: nothing fails behind the caller's back */
    void (*abort)(eng_comm *c);  /* NULL: nothing to stop */
    void (*destroy)(eng_comm *c);
} eng_comm_ops;

struct eng_comm {
    const eng_comm_ops *ops;
    int ranks;
    char last_error[256];
};

#endif
