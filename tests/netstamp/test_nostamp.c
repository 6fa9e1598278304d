/* test_nostamp.c: loadgen linked without netstamp (the plain twin,
 * netstamp_none.c). This program's recv() and poll() are libc's own, so a
 * run asking for kernel stamps (load.arrival_stamp "kernel", the default)
 * times every read by the clock in the write callback, as "user" does: no
 * read counted as kernel-stamped, no read lag recorded, and a warning on
 * stderr that says so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "loadgen.h"
#include "netstamp.h"
#include "sse_server.h"
#include "testutil.h"

static int on_level_end(const ll_rec_level_end *le, void *ctx)
{
    *(ll_rec_client *)ctx = le->client;
    return 0;
}

/* The object that defines sym in this process: libc's, not this program's
 * (under AddressSanitizer, its runtime's interceptors stand in front of
 * libc's: libasan.so, a shared library too). */
static int from_libc(void *sym)
{
    Dl_info info;
    return dladdr(sym, &info) && info.dli_fname &&
           (strstr(info.dli_fname, "libc.so") || strstr(info.dli_fname, "libasan.so"));
}

int main(void)
{
    char err[512] = "", dir[256], path[400], log_path[400];
    CHECK(ns_rx_available() == 0, "the plain twin says no kernel stamps");
    CHECK(ns_tx_hook(NULL) == -1, "and no send stamps");
    CHECK(from_libc((void *)recv) && from_libc((void *)poll) && from_libc((void *)send) &&
              from_libc((void *)sendmsg),
          "recv, poll, send and sendmsg are libc's");

    ts_config c = {.mode = TS_OK, .think_tok = 3, .answer_tok = 5, .gap_us = 3000, .tokens_per_chunk = 1};
    ts_server *srv;
    if (ts_start(&c, &srv) != 0) {
        CHECK(0, "server start");
        TEST_MAIN_END();
    }
    snprintf(dir, sizeof dir, "%s/lg_nostamp_%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    snprintf(path, sizeof path, "%s/records.jsonl", dir);
    snprintf(log_path, sizeof log_path, "%s/stderr.txt", dir);
    scn_scenario *scn = NULL;
    scn_prompts *prompts = NULL;
    ll_rec_writer *rec = NULL;
    lg_run *run = NULL;
    int rc = scn_load_string("{\"load\":{\"threads\":1,\"concurrency\":[4],\"requests\":8}}", "nostamp", &scn, err,
                             sizeof err);
    if (rc == 0)
        rc = scn_prompts_load(scn, &prompts, err, sizeof err);
    if (rc == 0)
        rc = ll_mkdir_p(dir, err, sizeof err);
    if (rc == 0)
        rc = ll_rec_open(path, 0, &rec, err, sizeof err);
    CHECK(rc == 0 && scn->arrival_stamp == SCN_STAMP_KERNEL, "setup (kernel stamps asked): %s", err);
    if (rc == 0) {
        /* what lg_run_create says on stderr, caught in a file */
        int saved = dup(STDERR_FILENO), fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        fflush(stderr);
        if (fd >= 0)
            dup2(fd, STDERR_FILENO);
        lg_config cfg = {.scn = scn, .prompts = prompts, .url = ts_url(srv), .model = "test-model",
                         .records = rec, .scenario_name = "nostamp"};
        rc = lg_run_create(&cfg, &run, err, sizeof err);
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        if (fd >= 0)
            close(fd);
        CHECK(rc == 0, "lg_run_create: %s", err);
    }
    if (rc == 0) {
        char said[2048] = "";
        FILE *f = fopen(log_path, "r");
        size_t n = f ? fread(said, 1, sizeof said - 1, f) : 0;
        said[n] = '\0';
        if (f)
            fclose(f);
        CHECK(strstr(said, "kernel receive stamps are not linked") && strstr(said, "--arrival-stamp user"),
              "the fallback is said: \"%s\"", said);
        CHECK(lg_run_sweep(run, err, sizeof err) == 0, "sweep: %s", err);
        lg_run_free(run);
        CHECK(ll_rec_close(rec) == 0, "records closed");
        rec = NULL;
        ll_rec_client cl = {0};
        ll_rec_handlers h = {.on_level_end = on_level_end};
        ll_rec_read_stats rs;
        CHECK(ll_rec_read(path, &h, &cl, &rs, err, sizeof err) == 0, "records read: %s", err);
        CHECK(cl.present && cl.reads >= 8 * 8, "reads %llu", (unsigned long long)cl.reads);
        CHECK(cl.reads_kstamp == 0 && isnan(cl.read_lag_p50_ms), "user stamps: %lld kernel-stamped, lag %g",
              (long long)cl.reads_kstamp, cl.read_lag_p50_ms);
    }
    if (rec)
        (void)ll_rec_close(rec);
    scn_prompts_free(prompts);
    scn_free(scn);
    ts_stop(srv);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    TEST_MAIN_END();
}
