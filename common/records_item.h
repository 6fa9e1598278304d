/* records_item.h (internal to common/): one record in the writer's queue, as
 * the producer put it (records.c) and the writer thread formats it
 * (records_format.c). */
#ifndef LOADLAW_RECORDS_ITEM_H
#define LOADLAW_RECORDS_ITEM_H

#include "common.h"
#include "records.h"

enum rec_kind { K_LEVEL, K_LEVEL_END, K_REQUEST, K_STEP, K_JSON, K_CLOCK, K_LINES, K_METRIC, K_HANDOFF };

typedef struct rec_item {
    enum rec_kind kind;
    union {
        ll_rec_level lv;
        ll_rec_level_end le;
        ll_rec_request rq;
        ll_rec_step st;
        cJSON *obj;
        ll_rec_clock ck;
        struct {
            ll_rec_handoff h;     /* h.req points into req */
            char req[LL_REC_HANDOFF_REQ_MAX + 1];
        } handoff;
        struct {
            char *p;
            size_t len;
        } lines;                  /* K_LINES: complete lines, formatted elsewhere */
        struct {
            ll_rec_metric m;      /* strings point into text */
            char *text;           /* src, name, labels: one allocation */
        } metric;
    } u;
} rec_item;

/* The line of one record, without its newline, appended to b (writer
 * thread). 0; LL_ENOMEM; LL_EINVAL for a K_LINES item, whose lines are
 * written as they came. */
int ll_rec_format_item(ll_buf *b, const rec_item *it);

/* A chunk list in its list form, [[t_ns,tokens,"k"],...] (files before
 * "chunks_packed", and `loadlaw records expand`). 0 or LL_ENOMEM. */
int ll_rec_format_chunk_list(ll_buf *b, const ll_rec_chunk *c, size_t n);

#endif
