/* records_outputs.h (internal to common/): the request's "outputs" member
 * (records.h ll_rec_outputs), formatted by the writer thread
 * (records_format.c) and read back by the reader (records_read.c). Kept apart
 * from the request's timing fields: a run that does not record outputs never
 * reaches this code. */
#ifndef LOADLAW_RECORDS_OUTPUTS_H
#define LOADLAW_RECORDS_OUTPUTS_H

#include "common.h"
#include "records.h"

/* Append ,"outputs":{...} for o. 0 or LL_ENOMEM. */
int ll_rec_format_outputs(ll_buf *b, const ll_rec_outputs *o);
/* The "outputs" object v read into a new struct (*out; caller frees with
 * ll_rec_outputs_free). 0; LL_EINVAL when v is not an object or a member
 * has the wrong shape (the caller counts the request rejected); LL_ENOMEM. */
int ll_rec_read_outputs(const cJSON *v, ll_rec_outputs **out);

#endif
