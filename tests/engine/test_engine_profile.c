/* test_engine_profile.c: where /start_profile may write, on a real socket.
 * An output_dir that is a symlink (to a directory, dangling) or a file is a
 * 400 and nothing is written where it points, also when the directory is
 * swapped for a symlink while a capture runs; a trace never writes through
 * or truncates a file or link already under its predictable name (the next
 * name is taken; when all are taken, a clear 500); an escaped NUL in the body
 * ("a\u0000b", which cJSON reads as "a") is a 400; the default profile
 * directory is $TMPDIR/loadlaw-profile-<uid>, mode 0700, and refused when it
 * is group-readable or a symlink. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "tclient.h"
#include "testutil.h"

/* POST path with body; the status. r (may be NULL) gets the answer. */
static long post(eng_engine *e, const char *path, const char *body, tc_resp *r)
{
    char url[256];
    tc_resp tmp;
    tc_resp *out = r ? r : &tmp;
    snprintf(url, sizeof url, "%s%s", eng_url(e), path);
    tc_request("POST", url, body, -1, out);
    long st = out->status;
    if (!r)
        tc_resp_free(&tmp);
    return st;
}

/* The answer's error.message ("" when there is none). */
static const char *err_msg(cJSON *o)
{
    return ll_json_str(cJSON_GetObjectItemCaseSensitive(o, "error"), "message", "");
}

/* POST /start_profile with body; 1 when the answer is status `want` with a
 * JSON error whose message has `needle`. */
static int start_refused(eng_engine *e, const char *body, long want, const char *needle)
{
    tc_resp r;
    long st = post(e, "/start_profile", body, &r);
    cJSON *o = r.body.p ? cJSON_Parse(r.body.p) : NULL;
    int ok = st == want && o && strstr(err_msg(o), needle);
    if (!ok)
        fprintf(stderr, "start_profile %s: %ld %s\n", body, st, r.body.p ? r.body.p : "");
    cJSON_Delete(o);
    tc_resp_free(&r);
    return ok;
}

/* POST /stop_profile; its "path" into path ("" when none). The status. */
static long stop_path(eng_engine *e, char *path, size_t pathlen)
{
    tc_resp r;
    long st = post(e, "/stop_profile", "", &r);
    cJSON *o = r.body.p ? cJSON_Parse(r.body.p) : NULL;
    snprintf(path, pathlen, "%s", ll_json_str(o, "path", ""));
    cJSON_Delete(o);
    tc_resp_free(&r);
    return st;
}

/* Entries in dir other than . and .. (-1: cannot be read). */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    if (d)
        closedir(d);
    return d ? n : -1;
}

/* rm -r path (symlinks removed, not followed). */
static void rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        struct dirent *de;
        char sub[1024];
        while (d && (de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            rm_tree(sub);
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

/* The file's text (at most len - 1 bytes; "" when it cannot be read). */
static const char *read_text(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, len - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

/* 6: a symlink named by output_dir is refused, before and during a capture. */
static void test_symlink(const char *root)
{
    char prof[300], outside[300], p[600], q[600], spec[400], path[700];
    snprintf(prof, sizeof prof, "%s/prof", root);
    snprintf(outside, sizeof outside, "%s/outside", root);
    CHECK(mkdir(prof, 0700) == 0 && mkdir(outside, 0700) == 0, "mkdir");
    snprintf(p, sizeof p, "%s/evil", prof);
    CHECK(symlink(outside, p) == 0, "symlink %s", p);
    snprintf(q, sizeof q, "%s/nowhere", root);
    snprintf(p, sizeof p, "%s/dangling", prof);
    CHECK(symlink(q, p) == 0, "symlink %s", p);
    snprintf(p, sizeof p, "%s/file", prof);
    write_text(p, "x");
    snprintf(spec, sizeof spec, "law=1,profile_dir=%s", prof);
    eng_engine *e = tc_start(spec);

    CHECK(start_refused(e, "{\"output_dir\":\"evil\"}", 400, "symbolic link"),
          "a symlink to a directory is refused");
    CHECK(start_refused(e, "{\"num_steps\":2,\"output_dir\":\"evil\"}", 400, "symbolic link"),
          "with num_steps too, at once");
    CHECK(start_refused(e, "{\"output_dir\":\"dangling\"}", 400, "symbolic link"),
          "a dangling symlink is refused");
    CHECK(start_refused(e, "{\"output_dir\":\"file\"}", 400, "not a directory"),
          "a file is refused");
    CHECK(stop_path(e, path, sizeof path) == 400, "no capture was started by them");
    CHECK(access(q, F_OK) != 0, "the dangling link's target was not made");

    /* swapped for a symlink while the capture runs: the write refuses it */
    CHECK(post(e, "/start_profile", "{\"output_dir\":\"late\"}", NULL) == 200, "late: started");
    CHECK(tc_completion(eng_url(e), 3, NULL) == 200, "a step to capture");
    snprintf(p, sizeof p, "%s/late", prof);
    rmdir(p); /* made by /start_profile */
    CHECK(symlink(outside, p) == 0, "late swapped for a symlink");
    long st = stop_path(e, path, sizeof path);
    CHECK(st == 400 && !*path, "the write refuses the swapped directory: %ld %s", st, path);
    CHECK(count_entries(outside) == 0, "nothing written in %s", outside);

    /* a plain directory still works */
    CHECK(post(e, "/start_profile", "{\"output_dir\":\"ok\"}", NULL) == 200, "ok: started");
    snprintf(p, sizeof p, "%s/ok/", prof);
    CHECK(stop_path(e, path, sizeof path) == 200 && strncmp(path, p, strlen(p)) == 0 &&
          access(path, F_OK) == 0, "a plain output_dir is written: %s", path);
    eng_stop(e);
}

/* 7: a file or link under a trace's predictable name is never opened. */
static void test_planted_names(const char *root)
{
    char shared[300], victim[300], p[600], spec[400], path[700], buf[256];
    int pid = (int)getpid();
    snprintf(shared, sizeof shared, "%s/shared", root);
    snprintf(victim, sizeof victim, "%s/victim", root);
    CHECK(mkdir(shared, 0700) == 0 && chmod(shared, 01777) == 0, "mkdir %s", shared);
    write_text(victim, "precious\n");
    snprintf(p, sizeof p, "%s/loadlaw-%d-1.pt.trace.json", shared, pid);
    CHECK(symlink(victim, p) == 0, "symlink %s", p);
    snprintf(p, sizeof p, "%s/loadlaw-%d-2.pt.trace.json", shared, pid);
    write_text(p, "keep\n");
    snprintf(p, sizeof p, "%s/loadlaw-%d-3.pt.trace.json.gz", shared, pid);
    CHECK(symlink(victim, p) == 0, "symlink %s", p);
    for (int k = 0; k < 16; k++) { /* every name capture 4 may take */
        if (k == 0)
            snprintf(p, sizeof p, "%s/loadlaw-%d-4.pt.trace.json", shared, pid);
        else
            snprintf(p, sizeof p, "%s/loadlaw-%d-4-%d.pt.trace.json", shared, pid, k);
        CHECK(symlink(victim, p) == 0, "symlink %s", p);
    }
    snprintf(spec, sizeof spec, "law=1,profile_dir=%s", shared);
    eng_engine *e = tc_start(spec);
    static const char *const body[] = {"", "", "{\"gzip\":true}"};
    for (int i = 0; i < 3; i++) {
        CHECK(post(e, "/start_profile", body[i], NULL) == 200, "capture %d started", i + 1);
        CHECK(tc_completion(eng_url(e), 3, NULL) == 200, "a step to capture");
        long st = stop_path(e, path, sizeof path);
        struct stat sb;
        snprintf(p, sizeof p, "%s/loadlaw-%d-%d-1.pt.trace.json%s", shared, pid, i + 1,
                 i == 2 ? ".gz" : "");
        CHECK(st == 200 && strcmp(path, p) == 0, "capture %d took the next name: %ld %s", i + 1,
              st, path);
        CHECK(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 0777) == 0600 &&
              sb.st_size > 0, "capture %d: a new regular file, mode 0600", i + 1);
        CHECK(strcmp(read_text(victim, buf, sizeof buf), "precious\n") == 0,
              "capture %d: the link's target is untouched: \"%s\"", i + 1, buf);
    }
    snprintf(p, sizeof p, "%s/loadlaw-%d-2.pt.trace.json", shared, pid);
    CHECK(strcmp(read_text(p, buf, sizeof buf), "keep\n") == 0, "the planted file is not truncated");

    /* every name taken: a clear error, nothing opened */
    CHECK(post(e, "/start_profile", "", NULL) == 200, "capture 4 started");
    tc_resp r;
    long st = post(e, "/stop_profile", "", &r);
    CHECK(st == 500 && r.body.p && strstr(r.body.p, "all taken"), "all names taken: %ld %s", st,
          r.body.p ? r.body.p : "");
    tc_resp_free(&r);
    CHECK(strcmp(read_text(victim, buf, sizeof buf), "precious\n") == 0, "the target is untouched");
    eng_stop(e);
}

/* 8: an escaped NUL is refused, not read as a shorter name. */
static void test_nul(const char *root)
{
    char prof[300], spec[400], path[700];
    snprintf(prof, sizeof prof, "%s/prof-nul", root);
    snprintf(spec, sizeof spec, "law=1,profile_dir=%s", prof);
    eng_engine *e = tc_start(spec);
    CHECK(start_refused(e, "{\"output_dir\":\"a\\u0000b\"}", 400, "\\u0000"), "a\\u0000b refused");
    CHECK(start_refused(e, "{\"output_dir\\u0000x\":\"a\"}", 400, "\\u0000"), "in a key too");
    CHECK(stop_path(e, path, sizeof path) == 400, "no capture was started");
    CHECK(count_entries(prof) <= 0, "nothing made under %s", prof);
    /* an escaped backslash before "u0000" is no NUL */
    CHECK(post(e, "/start_profile", "{\"note\":\"x\\\\u0000\",\"output_dir\":\"a\"}", NULL) == 200,
          "\\\\u0000 (a backslash, then text) is accepted");
    CHECK(stop_path(e, path, sizeof path) == 200 && strstr(path, "/prof-nul/a/"), "written: %s", path);
    eng_stop(e);
}

/* vLLM's max_iterations: answered at once, the capture ends at that many
 * steps however many follow, and /stop_profile writes it. */
static void test_max_iterations(const char *root)
{
    char prof[300], spec[400];
    snprintf(prof, sizeof prof, "%s/prof-iters", root);
    snprintf(spec, sizeof spec, "law=1,profile_dir=%s", prof);
    eng_engine *e = tc_start(spec);
    CHECK(start_refused(e, "{\"max_iterations\":0}", 400, "'max_iterations' must be an integer"),
          "max_iterations 0 refused, named");
    CHECK(post(e, "/start_profile", "{\"max_iterations\":2}", NULL) == 200, "started");
    CHECK(tc_completion(eng_url(e), 6, NULL) == 200, "six steps to capture");
    tc_resp r;
    long st = post(e, "/stop_profile", "", &r);
    cJSON *o = r.body.p ? cJSON_Parse(r.body.p) : NULL;
    CHECK(st == 200 && cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "num_steps")) == 2,
          "the capture holds 2 steps of 6: %ld %s", st, r.body.p ? r.body.p : "");
    cJSON_Delete(o);
    tc_resp_free(&r);
    eng_stop(e);
}

/* 7: the default profile directory is private and checked. */
static void test_default_dir(const char *root)
{
    char tmpd[300], def[400], elsewhere[300], want[500], path[700];
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    snprintf(tmpd, sizeof tmpd, "%s/tmpd", root);
    snprintf(def, sizeof def, "%s/loadlaw-profile-%lu", tmpd, (unsigned long)geteuid());
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", root);
    CHECK(mkdir(tmpd, 0777) == 0 && mkdir(elsewhere, 0700) == 0, "mkdir");
    setenv("TMPDIR", tmpd, 1);

    eng_engine *e = tc_start("law=1");
    CHECK(post(e, "/start_profile", "", NULL) == 200, "default: started");
    snprintf(want, sizeof want, "%s/", def);
    CHECK(stop_path(e, path, sizeof path) == 200 && strncmp(path, want, strlen(want)) == 0,
          "the trace is under %s: %s", def, path);
    struct stat sb;
    CHECK(lstat(def, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0700 &&
          sb.st_uid == geteuid(), "%s is ours, mode 0700", def);
    eng_stop(e);
    unlink(path);

    CHECK(chmod(def, 0755) == 0, "chmod");
    e = tc_start("law=1");
    CHECK(start_refused(e, "", 500, "not private"), "a group/world-readable default is refused");
    eng_stop(e);

    CHECK(rmdir(def) == 0 && symlink(elsewhere, def) == 0, "the default made a symlink");
    e = tc_start("law=1");
    CHECK(start_refused(e, "{\"output_dir\":\"x\"}", 500, "symbolic link"),
          "a symlinked default is refused");
    CHECK(count_entries(elsewhere) == 0, "nothing made where it points");
    eng_stop(e);

    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    char root[] = "/tmp/loadlaw-engprof-XXXXXX";
    if (!mkdtemp(root))
        return 1;
    test_symlink(root);
    test_planted_names(root);
    test_nul(root);
    test_max_iterations(root);
    test_default_dir(root);
    rm_tree(root);
    curl_global_cleanup();
    TEST_MAIN_END();
}
