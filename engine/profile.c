/* profile.c: /start_profile and /stop_profile, written as a Chrome trace laid
 * out the way PyTorch's profiler (Kinetto) lays out GPU work, so Perfetto and
 * `loadlaw trace` read it like a real server's trace:
 *   - each backend phase of a step is a complete event ("ph":"X") with
 *     "cat":"kernel" on pid 0 (the device), tid 7 (the stream), args.stream 7;
 *   - each step is a "cat":"user_annotation" event on the host side (pid 1).
 * Times are microseconds (floats) on CLOCK_MONOTONIC, like the step log.
 *
 * Tensor parallelism (tp=K): one device process per rank, named like the
 * per-rank traces SGLang writes ("TP-0", "TP-1", ...): rank r is pid r
 * (device r, as Kineto numbers GPUs), each with its stream 7 and
 * args.device = r, and the host side moves to this process's pid, as in a
 * Kineto trace (without tp: device pid 0 and host pid 1, as before). The all-reduce is a kernel event like any other
 * ("all_reduce" on the cpu backend; NCCL's own kernel name on a GPU), so
 * `loadlaw trace` files it under "communication" and prints that category's
 * share of each device's time. Without tp the lanes are as before ("device 0").
 *
 * A num_steps capture answers once it has its steps, or when the engine goes
 * idle with some captured, or after "timeout_s" (default 30) with none.
 *
 * DESIGN: the scheduler only copies steps into the capture (under eng->mu);
 * the file is written on the HTTP thread that answers the request, so file
 * I/O never stretches a step.
 *
 * Confinement: a request only names one plain directory under the profile
 * directory (plain_subdir), and that name is opened from the profile
 * directory's descriptor with O_NOFOLLOW | O_DIRECTORY, at /start_profile
 * and again when the file is written, so a symlink planted there (before or
 * during a capture) is refused, not followed. Trace names are predictable
 * (loadlaw-<pid>-<seq>), so the file is created with O_CREAT | O_EXCL |
 * O_NOFOLLOW, mode 0600: a file or link already under that name is left as
 * it is and the next name is taken. The default profile directory is private
 * ($TMPDIR/loadlaw-profile-<uid>, mode 0700) and refused when it is a
 * symlink, someone else's, or open to group or others. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "internal.h"

/* A request's output_dir: one plain directory name under profile_dir, so a
 * request can neither climb out of it ("..", "/tmp/x", "a/../..") nor name
 * a hidden or odd file. Letters, digits, '_', '-' and '.', not first. */
static int plain_subdir(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64 || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* A "\u0000" escape anywhere in a JSON text (valid JSON: a backslash only
 * starts an escape inside a string, and each escape is skipped whole, so the
 * text \\u0000 is not one). cJSON decodes it into a NUL that ends the C
 * string: "a\u0000b" would read as "a". */
static int json_has_nul_escape(const char *s, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\')
            continue;
        if (s[i + 1] == 'u' && i + 5 < n && memcmp(s + i + 2, "0000", 4) == 0)
            return 1;
        i++; /* the escaped character */
    }
    return 0;
}

int eng_prof_init(eng_engine *e, char *err, size_t errlen)
{
    int n;
    if (e->cfg.profile_dir) {
        n = snprintf(e->prof.base, sizeof e->prof.base, "%s", e->cfg.profile_dir);
        e->prof.base_private = 0;
    } else {
        /* TMPDIR, not XDG_RUNTIME_DIR: a capture can be gigabytes, and the
         * runtime directory is a small tmpfs. */
        const char *t = getenv("TMPDIR");
        if (!t || t[0] != '/')
            t = "/tmp";
        n = snprintf(e->prof.base, sizeof e->prof.base, "%s/loadlaw-profile-%lu", t,
                     (unsigned long)geteuid());
        e->prof.base_private = 1;
    }
    if (n <= 0 || (size_t)n >= sizeof e->prof.base) {
        ll_errf(err, errlen, "engine: the profile directory's path is over %zu bytes",
                sizeof e->prof.base - 1);
        return LL_EINVAL;
    }
    return 0;
}

/* Open the profile directory. An operator's --profile-dir is made if missing
 * and taken as it is (a symlink there is the operator's choice). The default
 * one is made mode 0700 and must be a directory (not a symlink) of ours that
 * group and others cannot enter: the parent ($TMPDIR, /tmp) is shared, so
 * anyone could have made it first. A descriptor, or LL_EIO with msg. */
static int open_base(const eng_engine *e, char *msg, size_t msglen)
{
    const char *dir = e->prof.base;
    int fd;
    if (!e->prof.base_private) {
        if (ll_mkdir_p(dir, msg, msglen))
            return LL_EIO;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            ll_errf(msg, msglen, "the profile directory %s: %s", dir, strerror(errno));
            return LL_EIO;
        }
        return fd;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        ll_errf(msg, msglen, "the profile directory %s: %s", dir, strerror(errno));
        return LL_EIO;
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        /* a symlink fails with ELOOP, or ENOTDIR when O_DIRECTORY is checked first */
        int err = errno;
        int link = (err == ELOOP || err == ENOTDIR) && lstat(dir, &st) == 0 && S_ISLNK(st.st_mode);
        ll_errf(msg, msglen, "the profile directory %s: %s: refused (remove it, or set "
                "--profile-dir)", dir, link ? "a symbolic link" : strerror(err));
        return LL_EIO;
    }
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        ll_errf(msg, msglen, "the profile directory %s is not private (owner uid %lu, mode %03o; "
                "it must be ours, mode 0700): refused (remove it, or set --profile-dir)", dir,
                (unsigned long)st.st_uid, (unsigned)(st.st_mode & 0777));
        close(fd);
        return LL_EIO;
    }
    return fd;
}

/* Open the capture's directory: the profile directory, or sub inside it, made
 * (mode 0700) if missing and opened from the profile directory's descriptor
 * without following a symlink. sub is one component (plain_subdir), so that
 * one openat covers every component a request names. A descriptor, or
 * LL_EINVAL (sub is a symlink or not a directory: the request's fault) or
 * LL_EIO, with msg. */
static int open_capture_dir(const eng_engine *e, const char *sub, char *msg, size_t msglen)
{
    int base = open_base(e, msg, msglen);
    if (base < 0 || !*sub)
        return base;
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(base, sub, flags);
    if (fd < 0 && errno == ENOENT && (mkdirat(base, sub, 0700) == 0 || errno == EEXIST))
        fd = openat(base, sub, flags);
    int err = errno;
    close(base);
    if (fd >= 0)
        return fd;
    if (err == ELOOP || err == ENOTDIR) {
        ll_errf(msg, msglen, "'output_dir' %s/%s is a symbolic link or not a directory: refused "
                "(traces are written only inside the profile directory)", e->prof.base, sub);
        return LL_EINVAL;
    }
    ll_errf(msg, msglen, "%s/%s: %s", e->prof.base, sub, strerror(err));
    return LL_EIO;
}

/* What a /start_profile body asks for; sub points into the parsed body. */
typedef struct prof_req {
    int max_steps;  /* the most this capture may hold (prof_max_steps) */
    int want_steps; /* 0: until /stop_profile */
    int gzip;
    double timeout_s;
    const char *sub; /* the request's subdirectory of the profile directory, or NULL */
} prof_req;

/* root's member name, or NULL when it is missing or null (the default). */
static const cJSON *given(const cJSON *root, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* The most steps a capture may hold. A capture costs ~200 B of memory and
 * ~360 B of trace a step; without a key anyone who reaches the port may ask
 * for one, so then the bound is profile_max_steps_open (what the scenarios
 * ask for at most), and ENG_PROF_MAX_STEPS with a key. */
static int prof_max_steps(const eng_engine *e)
{
    return e->cfg.control_key || e->cfg.api_key ? ENG_PROF_MAX_STEPS : e->cfg.profile_max_steps_open;
}

/* Read the body's members into req (defaults stay where one is absent);
 * LL_EINVAL with msg on the first bad one. */
static int read_prof_members(const cJSON *root, prof_req *req, char *msg, size_t msglen)
{
    /* SGLang's num_steps: the answer comes once the steps are captured.
     * vLLM's max_iterations: the answer comes at once, and the capture runs
     * until /stop_profile or that many steps, whichever is first. */
    static const char *const names[] = {"num_steps", "max_iterations"};
    for (int k = 0; k < 2; k++) {
        const cJSON *n = given(root, names[k]);
        if (!n)
            continue;
        if (!cJSON_IsNumber(n) || n->valuedouble < 1 || n->valuedouble > req->max_steps ||
            n->valuedouble != (double)(int)n->valuedouble) {
            ll_errf(msg, msglen, "'%s' must be an integer in [1, %d]%s", names[k], req->max_steps,
                    req->max_steps < ENG_PROF_MAX_STEPS
                        ? " (the bound without a key: profile_max_steps_open; with api_key or "
                          "control_key set it is 10000000)" : "");
            return LL_EINVAL;
        }
        if (k == 0)
            req->want_steps = (int)n->valuedouble;
        else
            req->max_steps = (int)n->valuedouble;
    }
    const cJSON *d = given(root, "output_dir");
    if (d) {
        if (!cJSON_IsString(d) || !plain_subdir(d->valuestring)) {
            ll_errf(msg, msglen, "'output_dir' must be a plain directory name under the "
                                 "server's profile directory (1-64 of A-Z a-z 0-9 _ - ., "
                                 "not starting with '.', no '/'); traces are written only "
                                 "there (serve --profile-dir)");
            return LL_EINVAL;
        }
        req->sub = d->valuestring;
    }
    const cJSON *t = given(root, "timeout_s");
    if (t) {
        if (!cJSON_IsNumber(t) || !(t->valuedouble > 0 && t->valuedouble <= 86400)) {
            ll_errf(msg, msglen, "'timeout_s' must be a number of seconds in (0, 86400]");
            return LL_EINVAL;
        }
        req->timeout_s = t->valuedouble;
    }
    const cJSON *g = given(root, "gzip");
    if (g) {
        if (!cJSON_IsBool(g)) {
            ll_errf(msg, msglen, "'gzip' must be a boolean");
            return LL_EINVAL;
        }
        req->gzip = cJSON_IsTrue(g);
    }
    return 0;
}

/* Parse a non-empty request body into *root (the caller deletes it, also on
 * failure) and req. A raw NUL byte or a \u0000 escape is refused: either
 * would cut a name short. */
static int parse_prof_body(const char *body, size_t len, cJSON **root, prof_req *req, char *msg,
                           size_t msglen)
{
    const char *end = NULL;
    *root = memchr(body, '\0', len) ? NULL : cJSON_ParseWithOpts(body, &end, 1);
    if (!cJSON_IsObject(*root)) {
        ll_errf(msg, msglen, "profile request body must be a JSON object");
        return LL_EINVAL;
    }
    if (json_has_nul_escape(body, len)) {
        ll_errf(msg, msglen, "profile request body must not contain \\u0000 (a NUL cuts "
                             "a name short)");
        return LL_EINVAL;
    }
    char where[128];
    int dup = eng_json_dup_key(*root, where, sizeof where);
    if (dup) {
        if (dup < 0)
            ll_errf(msg, msglen, "out of memory");
        else
            ll_errf(msg, msglen, "duplicate key \"%s\" in the profile request body: each key may "
                    "appear once", where);
        return dup < 0 ? LL_ENOMEM : LL_EINVAL;
    }
    return read_prof_members(*root, req, msg, msglen);
}

/* Start capturing into the directory dir (the profile directory, or sub in
 * it), made and checked by the caller. */
static void prof_arm(eng_engine *e, const char *dir, const prof_req *req)
{
    const char *sub = req->sub;
    snprintf(e->prof.dir, sizeof e->prof.dir, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
    snprintf(e->prof.sub, sizeof e->prof.sub, "%s", sub ? sub : "");
    e->prof.active = 1;
    e->prof.done = 0;
    e->prof.want_steps = req->want_steps;
    e->prof.max_steps = req->max_steps;
    e->prof.deadline_ns = ll_now_ns() + (int64_t)(req->timeout_s * 1e9);
    e->prof.gzip = req->gzip;
    e->prof.steps.n = 0;
    e->prof.phases.n = 0;
    pthread_cond_signal(&e->cv); /* an idle scheduler starts watching the deadline */
}

int eng_prof_begin(eng_engine *e, const char *body, size_t len, char *msg, size_t msglen)
{
    prof_req req = {.max_steps = prof_max_steps(e), .want_steps = 0, .gzip = 0, .timeout_s = 30,
                    .sub = NULL};
    const char *dir = e->prof.base;
    cJSON *root = NULL;
    int rc = LL_EINVAL;
    if (e->prof.active) {
        ll_errf(msg, msglen, "a profile is already being captured (POST /stop_profile first)");
        return LL_EINVAL;
    }
    if (len > 0 && (rc = parse_prof_body(body, len, &root, &req, msg, msglen)) != 0)
        goto fail;
    rc = LL_EINVAL;
    if (strlen(dir) + (req.sub ? strlen(req.sub) + 1 : 0) >= sizeof e->prof.dir - 64) {
        ll_errf(msg, msglen, "the profile directory's path is too long");
        goto fail;
    }
    int dfd = open_capture_dir(e, req.sub ? req.sub : "", msg, msglen);
    if (dfd < 0) {
        rc = dfd;
        goto fail;
    }
    close(dfd);
    prof_arm(e, dir, &req);
    rc = 0;
fail:
    cJSON_Delete(root);
    return rc;
}

static void prof_complete(eng_engine *e)
{
    e->prof.done = 1;
    if (e->prof.waiter_suspended) {
        e->prof.waiter_suspended = 0;
        MHD_resume_connection(e->prof.waiter);
    }
}

int eng_prof_record(eng_engine *e, const eng_step *s, const eng_phase *ph, int n_ph)
{
    if (!e->prof.active || e->prof.done)
        return 0;
    if (ll_vec_reserve(&e->prof.steps, e->prof.steps.n + 1)) {
        prof_complete(e); /* keep what we have rather than lose the capture */
        return 1;
    }
    if (ll_vec_reserve(&e->prof.phases, e->prof.phases.n + (size_t)n_ph)) {
        prof_complete(e);
        return 1;
    }
    eng_prof_step *p = &e->prof.steps.v[e->prof.steps.n++];
    p->step = *s;
    p->n_phases = n_ph;
    p->phase0 = e->prof.phases.n;
    memcpy(e->prof.phases.v + e->prof.phases.n, ph, (size_t)n_ph * sizeof *ph);
    e->prof.phases.n += (size_t)n_ph;
    /* A capture until /stop_profile is bounded like a num_steps one (its
     * largest num_steps), so a forgotten capture cannot grow forever. */
    if ((e->prof.want_steps > 0 && e->prof.steps.n >= (size_t)e->prof.want_steps) ||
        e->prof.steps.n >= (size_t)e->prof.max_steps) {
        prof_complete(e);
        return 1;
    }
    return 0;
}

int64_t eng_prof_idle(eng_engine *e)
{
    if (!e->prof.active || e->prof.done || e->prof.want_steps == 0)
        return 0;
    if (e->prof.steps.n > 0 || ll_now_ns() >= e->prof.deadline_ns) {
        prof_complete(e);
        return 0;
    }
    return e->prof.deadline_ns;
}


static int trace_json(ll_buf *b, const eng_prof_step *st, size_t n, const eng_phase *phases,
                      const char *backend)
{
    int ranks = 1;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < st[i].n_phases; k++)
            if (phases[st[i].phase0 + (size_t)k].rank >= ranks)
                ranks = phases[st[i].phase0 + (size_t)k].rank + 1;
    int host = ranks == 1 ? 1 : (int)getpid(); /* device pids are 0..ranks-1 */
    int rc = ll_buf_printf(b,
        "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"deviceProperties\":[{\"id\":0,"
        "\"name\":\"loadlaw %s backend\"}],\"traceEvents\":[\n"
        "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"loadlaw engine\"}},\n"
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"scheduler\"}}",
        backend, host, host);
    for (int r = 0; r < ranks && !rc; r++) {
        char pname[32];
        if (ranks == 1)
            snprintf(pname, sizeof pname, "device 0");
        else
            snprintf(pname, sizeof pname, "TP-%d", r);
        rc = ll_buf_printf(b,
            ",\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"%s\"}}"
            ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}"
            ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":7,\"args\":{\"name\":\"stream 7\"}}",
            r, pname, r, r, r);
    }
    for (size_t i = 0; i < n && !rc; i++) {
        const eng_step *s = &st[i].step;
        rc = ll_buf_printf(b,
            ",\n{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"decode_step\",\"pid\":%d,\"tid\":1,"
            "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%zu,\"n_decode\":%d,\"n_running\":%d,"
            "\"prefill_tok\":%d,\"ctx_tok\":%" PRId64 "}}",
            host, (double)s->start_ns / 1e3, (double)s->dur_ns / 1e3, i, s->n_decode,
            s->n_running, s->prefill_tok, s->ctx_tok);
        for (int k = 0; k < st[i].n_phases && !rc; k++) {
            const eng_phase *p = &phases[st[i].phase0 + (size_t)k];
            rc = ll_buf_printf(b,
                ",\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":%d,\"tid\":7,"
                "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"stream\":7,\"device\":%d,\"step\":%zu,"
                "\"n_decode\":%d,\"prefill_tok\":%d}}",
                p->name, p->rank, (double)p->start_ns / 1e3, (double)p->dur_ns / 1e3,
                p->rank, i, s->n_decode, s->prefill_tok);
        }
    }
    return rc ? rc : ll_buf_printf(b, "\n]}\n");
}

/* Names a trace may take before the write gives up: loadlaw-<pid>-<seq>,
 * then -<seq>-1 .. when a file or link is already there. */
#define ENG_PROF_NAME_TRIES 16

/* Create the trace file in dfd: a new file only (O_EXCL: an existing name,
 * even a dangling symlink, is never opened, so never truncated or written
 * through), mode 0600. The name goes into name. A descriptor, or LL_EIO with
 * msg. */
static int create_trace(int dfd, const char *dir, unsigned seq, int gz, char *name,
                        size_t namelen, char *msg, size_t msglen)
{
    const char *ext = gz ? ".pt.trace.json.gz" : ".pt.trace.json";
    for (int k = 0; k < ENG_PROF_NAME_TRIES; k++) {
        if (k == 0)
            snprintf(name, namelen, "loadlaw-%d-%u%s", (int)getpid(), seq, ext);
        else
            snprintf(name, namelen, "loadlaw-%d-%u-%d%s", (int)getpid(), seq, k, ext);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST) {
            ll_errf(msg, msglen, "%s/%s: %s", dir, name, strerror(errno));
            return LL_EIO;
        }
    }
    ll_errf(msg, msglen, "%s: the trace names loadlaw-%d-%u*%s are all taken by other files "
            "(left untouched)", dir, (int)getpid(), seq, ext);
    return LL_EIO;
}

/* Write len bytes of p to fd (taken: closed here), gzipped or not. */
static int write_trace(int fd, int gz, const char *p, size_t len)
{
    if (gz) {
        gzFile f = gzdopen(fd, "wb");
        if (!f) {
            close(fd);
            return LL_EIO;
        }
        int w = gzwrite(f, p, (unsigned)len);
        int c = gzclose(f);
        return w == (int)len && c == Z_OK ? 0 : LL_EIO;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        return LL_EIO;
    }
    size_t w = fwrite(p, 1, len, f);
    return fclose(f) == 0 && w == len ? 0 : LL_EIO;
}

int eng_prof_write(eng_engine *e, char *path, size_t pathlen, size_t *n_steps,
                   char *msg, size_t msglen)
{
    ll_buf b = {0};
    int dfd = -1;
    char name[96];
    pthread_mutex_lock(&e->mu);
    if (!e->prof.active) {
        pthread_mutex_unlock(&e->mu);
        ll_errf(msg, msglen, "no profile is being captured (POST /start_profile first)");
        return LL_EINVAL;
    }
    /* The capture leaves the engine: the file is written without mu. */
    eng_prof_step *steps = e->prof.steps.v;
    size_t n = e->prof.steps.n;
    eng_phase *phases = e->prof.phases.v;
    int gz = e->prof.gzip;
    unsigned seq = ++e->prof.seq;
    char dir[sizeof e->prof.dir], sub[sizeof e->prof.sub];
    memcpy(dir, e->prof.dir, sizeof dir);
    memcpy(sub, e->prof.sub, sizeof sub);
    e->prof.steps.v = NULL;
    e->prof.steps.n = e->prof.steps.cap = 0;
    e->prof.phases.v = NULL;
    e->prof.phases.n = e->prof.phases.cap = 0;
    e->prof.active = e->prof.done = 0;
    /* A /start_profile still waiting on this capture (a /stop_profile came
     * first) is woken once the file exists and answers with its path. */
    struct MHD_Connection *waiter = e->prof.waiter_suspended ? e->prof.waiter : NULL;
    e->prof.waiter_suspended = 0;
    pthread_mutex_unlock(&e->mu);

    *path = '\0';
    /* opened again, not reused from /start_profile: output_dir may have been
     * swapped for a symlink while the capture ran */
    dfd = open_capture_dir(e, sub, msg, msglen);
    int rc = dfd < 0 ? dfd : 0;
    if (rc)
        goto fail;
    rc = trace_json(&b, steps, n, phases, e->be->name);
    if (rc) {
        ll_errf(msg, msglen, "out of memory writing the trace");
        goto fail;
    }
    int fd = create_trace(dfd, dir, seq, gz, name, sizeof name, msg, msglen);
    if (fd < 0) {
        rc = fd;
        goto fail;
    }
    snprintf(path, pathlen, "%s/%s", dir, name);
    rc = write_trace(fd, gz, b.p, b.len);
    if (rc) {
        ll_errf(msg, msglen, "%s: write failed", path);
        unlinkat(dfd, name, 0); /* ours, made just now by O_EXCL */
        goto fail;
    }
    *n_steps = n;
fail:
    pthread_mutex_lock(&e->mu);
    snprintf(e->prof.last_path, sizeof e->prof.last_path, "%s", rc ? "" : path);
    e->prof.last_n = rc ? 0 : n;
    if (waiter)
        MHD_resume_connection(waiter);
    pthread_mutex_unlock(&e->mu);
    if (dfd >= 0)
        close(dfd);
    ll_buf_free(&b);
    free(steps);
    free(phases);
    return rc;
}
