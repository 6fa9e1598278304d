/* test_engine_security.c: the server's hostile-input and access rules on a
 * real socket: every JSON body it writes is valid UTF-8 and parses, even when
 * it echoes request bytes ("/%ff%fe", a long model name of multi-byte
 * characters); the API key and the control key; the control endpoints turned
 * off; /start_profile's output_dir confined to the profile directory; the
 * warning for a non-loopback bind without a key; a 1 MB body and 6 KB of
 * headers still served with the smaller per-connection pool. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "tclient.h"
#include "testutil.h"

/* Strict RFC 3629 check (no overlongs, no surrogates, nothing past
 * U+10FFFF), written apart from common's so a bug cannot hide in both. */
static int valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
        if (!len || i + (size_t)len > n)
            return 0;
        unsigned cp = c & (0x7Fu >> len);
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += (size_t)len;
    }
    return 1;
}

/* The body is valid UTF-8 and JSON with error.message; returns the parsed
 * object (caller deletes) or NULL after failing a CHECK. */
static cJSON *check_json_body(const tc_resp *r, const char *what)
{
    const char *end = NULL;
    int utf8 = valid_utf8((const unsigned char *)r->body.p, r->body.len);
    cJSON *o = cJSON_ParseWithOpts(r->body.p, &end, 1);
    CHECK(utf8, "%s: body is valid UTF-8", what);
    CHECK(o != NULL, "%s: body parses as JSON: %s", what, r->body.p);
    return o;
}

static const char *err_msg(const cJSON *o)
{
    return ll_json_str(cJSON_GetObjectItemCaseSensitive(o, "error"), "message", "");
}

static void test_utf8(void)
{
    eng_engine *e = tc_start("law=1,model=m");
    char u[2048];
    tc_resp r;

    /* MHD decodes %ff%fe into the raw bytes 0xff 0xfe: not UTF-8 */
    snprintf(u, sizeof u, "%s/%%ff%%fe", eng_url(e));
    tc_request("GET", u, NULL, 0, &r);
    cJSON *o = check_json_body(&r, "GET /%ff%fe");
    CHECK(r.status == 404 && strstr(err_msg(o), "/??"), "404 naming the path scrubbed: %s", err_msg(o));
    cJSON_Delete(o);
    tc_resp_free(&r);

    /* "/" + 150 x "é": the old %.200s cut fell inside a character */
    size_t n = (size_t)snprintf(u, sizeof u, "%s/", eng_url(e));
    for (int i = 0; i < 150; i++)
        n += (size_t)snprintf(u + n, sizeof u - n, "%%C3%%A9");
    tc_request("POST", u, "{}", -1, &r);
    o = check_json_body(&r, "POST /é...");
    const char *m = err_msg(o);
    CHECK(r.status == 404 && strstr(m, "/\xC3\xA9\xC3\xA9") && strstr(m, "\xC3\xA9...") &&
          !strchr(m, '?'), "404 with the path cut between characters: %s", m);
    cJSON_Delete(o);
    tc_resp_free(&r);

    /* a model name of 1 + 80 x "é" (161 bytes): byte 100 is inside one */
    char body[512];
    n = (size_t)snprintf(body, sizeof body, "{\"prompt\":\"a\",\"model\":\"x");
    for (int i = 0; i < 80; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "\xC3\xA9");
    snprintf(body + n, sizeof body - n, "\"}");
    snprintf(u, sizeof u, "%s/v1/completions", eng_url(e));
    tc_request("POST", u, body, -1, &r);
    o = check_json_body(&r, "long multi-byte model");
    m = err_msg(o);
    CHECK(r.status == 404 && strstr(m, "`x\xC3\xA9") && strstr(m, "\xC3\xA9...`") && !strchr(m, '?'),
          "404 with the model name cut between characters: %s", m);
    cJSON_Delete(o);
    tc_resp_free(&r);

    /* invalid bytes in the model name itself (cJSON keeps them as sent) */
    tc_request("POST", u, "{\"prompt\":\"a\",\"model\":\"\xff\xfe\xc3\"}", -1, &r);
    o = check_json_body(&r, "invalid model bytes");
    CHECK(r.status == 404 && strstr(err_msg(o), "`???`"), "model bytes scrubbed: %s", err_msg(o));
    cJSON_Delete(o);
    tc_resp_free(&r);
    eng_stop(e);
}

/* GET or POST path with an optional "Authorization: Bearer key"; the status. */
static long call(eng_engine *e, const char *method, const char *path, const char *body,
                 const char *key, tc_resp *keep)
{
    char u[512], h[300];
    tc_resp r;
    snprintf(u, sizeof u, "%s%s", eng_url(e), path);
    if (key)
        snprintf(h, sizeof h, "Authorization: Bearer %s", key);
    tc_request_hdr(method, u, body, -1, key ? h : NULL, &r);
    long st = r.status;
    if (st == 401) {
        cJSON *o = check_json_body(&r, path);
        const cJSON *er = cJSON_GetObjectItemCaseSensitive(o, "error");
        CHECK(strcmp(ll_json_str(er, "type", ""), "AuthenticationError") == 0 &&
              ll_json_i64(er, "code", 0) == 401, "401 is an OpenAI-style error: %s", r.body.p);
        cJSON_Delete(o);
    }
    if (keep)
        *keep = r;
    else
        tc_resp_free(&r);
    return st;
}

static void test_auth(const char *root)
{
    static const char gen[] = "{\"prompt\":\"a b\",\"max_tokens\":2}";
    char spec[512], dir[300];
    snprintf(dir, sizeof dir, "%s/auth", root);
    snprintf(spec, sizeof spec, "law=1,api_key=k-main,profile_dir=%s", dir);
    eng_engine *e = tc_start(spec);
    CHECK(call(e, "GET", "/health", NULL, NULL, NULL) == 200, "/health open without a key");
    CHECK(call(e, "GET", "/v1/models", NULL, NULL, NULL) == 401, "models: 401 without a key");
    CHECK(call(e, "GET", "/v1/models", NULL, "k-mai", NULL) == 401, "models: 401 with a prefix of the key");
    CHECK(call(e, "GET", "/v1/models", NULL, "k-main2", NULL) == 401, "models: 401 with a longer key");
    CHECK(call(e, "GET", "/v1/models", NULL, "k-main", NULL) == 200, "models: 200 with the key");
    CHECK(call(e, "POST", "/v1/completions", gen, NULL, NULL) == 401, "completions: 401 without");
    CHECK(call(e, "POST", "/v1/chat/completions", gen, "wrong", NULL) == 401, "chat: 401 wrong key");
    CHECK(call(e, "POST", "/v1/completions", gen, "k-main", NULL) == 200, "completions: 200 with key");
    CHECK(call(e, "GET", "/metrics", NULL, NULL, NULL) == 401, "metrics: 401 without");
    CHECK(call(e, "GET", "/metrics", NULL, "k-main", NULL) == 200, "metrics: 200 with key");
    CHECK(call(e, "GET", "/nowhere", NULL, NULL, NULL) == 401, "unknown path: 401, no route list");
    CHECK(call(e, "POST", "/stop_profile", "", NULL, NULL) == 401, "control: 401 without");
    CHECK(call(e, "POST", "/stop_profile", "", "k-main", NULL) == 400, "control: api key reaches it");
    CHECK(call(e, "POST", "/reset_prefix_cache", "", NULL, NULL) == 401, "cache reset: 401 without");
    CHECK(call(e, "POST", "/reset_prefix_cache", "", "wrong", NULL) == 401, "cache reset: 401 wrong key");
    CHECK(call(e, "POST", "/reset_prefix_cache", "", "k-main", NULL) == 200, "cache reset: the api key opens it");
    eng_stop(e);

    /* a separate control key: the api key no longer opens control, and the
     * control key opens nothing else */
    snprintf(spec, sizeof spec, "law=1,api_key=k-main,control_key=k-ctl,profile_dir=%s", dir);
    e = tc_start(spec);
    CHECK(call(e, "POST", "/start_profile", "", "k-main", NULL) == 401, "control: api key refused");
    CHECK(call(e, "POST", "/start_profile", "", "k-ctl", NULL) == 200, "control: control key opens");
    tc_resp r;
    CHECK(call(e, "POST", "/stop_profile", "", "k-ctl", &r) == 200, "stop with the control key");
    cJSON *o = cJSON_Parse(r.body.p);
    unlink(ll_json_str(o, "path", ""));
    cJSON_Delete(o);
    tc_resp_free(&r);
    CHECK(call(e, "GET", "/v1/models", NULL, "k-ctl", NULL) == 401, "control key opens no model");
    CHECK(call(e, "POST", "/reset_prefix_cache", "", "k-main", NULL) == 401, "cache reset: api key refused");
    CHECK(call(e, "POST", "/reset_prefix_cache", "", "k-ctl", NULL) == 200, "cache reset: control key opens");
    eng_stop(e);

    /* control off: 404 (with and without a key), everything else unchanged */
    snprintf(spec, sizeof spec, "law=1,no_control=1,profile_dir=%s", dir);
    e = tc_start(spec);
    CHECK(call(e, "POST", "/start_profile", "{}", NULL, NULL) == 404, "control off: start 404");
    CHECK(call(e, "POST", "/stop_profile", "", NULL, NULL) == 404, "control off: stop 404");
    CHECK(call(e, "GET", "/start_profile", NULL, NULL, NULL) == 404, "control off: no 405 either");
    CHECK(call(e, "POST", "/reset_prefix_cache", "", NULL, NULL) == 404, "control off: cache reset 404");
    CHECK(call(e, "POST", "/v1/completions", gen, NULL, NULL) == 200, "control off: generation open");
    eng_stop(e);
    rmdir(dir);
}

/* Entries in dir other than . and .. */
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

static void test_profile_dir(const char *root)
{
    char prof[300], spec[400], body[400], p[600];
    snprintf(prof, sizeof prof, "%s/prof", root);
    snprintf(spec, sizeof spec, "law=1,profile_dir=%s", prof);
    eng_engine *e = tc_start(spec);
    static const char *const bad[] = {"../x", "..", ".", "", "/tmp/x", "a/b", "x/../../y",
                                      ".hidden", "a b", "a\\\\b",
                                      "0123456789012345678901234567890123456789012345678901234567890123456789"};
    snprintf(p, sizeof p, "/tmp/x");
    int tmp_x_before = access(p, F_OK) == 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tc_resp r;
        snprintf(body, sizeof body, "{\"output_dir\":\"%s\"}", bad[i]);
        long st = call(e, "POST", "/start_profile", body, NULL, &r);
        cJSON *o = check_json_body(&r, bad[i]);
        CHECK(st == 400 && strstr(err_msg(o), "plain directory name"), "output_dir \"%s\" refused: %ld %s",
              bad[i], st, err_msg(o));
        cJSON_Delete(o);
        tc_resp_free(&r);
    }
    CHECK(call(e, "POST", "/stop_profile", "", NULL, NULL) == 400, "no capture was started by them");
    CHECK(call(e, "POST", "/start_profile", "{\"output_dir\":42}", NULL, NULL) == 400, "non-string refused");
    CHECK(call(e, "POST", "/start_profile", "{\"num_steps\":0}", NULL, NULL) == 400, "num_steps 0 refused");
    CHECK(count_entries(root) == 0, "nothing created under %s by refused requests", root);
    CHECK((access("/tmp/x", F_OK) == 0) == tmp_x_before, "/tmp/x untouched");

    /* a plain name lands under the profile directory */
    tc_resp r;
    CHECK(call(e, "POST", "/start_profile", "{\"output_dir\":\"run-1.a_b\"}", NULL, NULL) == 200,
          "plain subdirectory accepted");
    call(e, "POST", "/stop_profile", "", NULL, &r);
    cJSON *o = check_json_body(&r, "stop");
    const char *path = ll_json_str(o, "path", "");
    snprintf(p, sizeof p, "%s/run-1.a_b/", prof);
    CHECK(r.status == 200 && strncmp(path, p, strlen(p)) == 0 && access(path, F_OK) == 0,
          "trace written under the profile directory: %s", path);
    unlink(path);
    cJSON_Delete(o);
    tc_resp_free(&r);
    snprintf(p, sizeof p, "%s/run-1.a_b", prof);
    rmdir(p);
    rmdir(prof);
    CHECK(count_entries(root) == 0, "only the profile directory was used");
    eng_stop(e);
}

/* Start an engine from spec with stderr going to a file; the text logged. */
static char *start_logged(const char *spec, eng_engine **out)
{
    char path[] = "/tmp/loadlaw-engsec-log-XXXXXX";
    int fd = mkstemp(path);
    fflush(stderr);
    int saved = dup(2);
    if (fd < 0 || saved < 0)
        return NULL;
    dup2(fd, 2);
    eng_config c;
    char err[256];
    eng_config_default(&c);
    if (eng_parse_spec(spec, &c, err, sizeof err) || eng_start(&c, out, err, sizeof err))
        *out = NULL;
    eng_config_free(&c);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fdopen(fd, "r");
    char *text = calloc(1, 4096);
    if (f && text) {
        rewind(f);
        size_t n = fread(text, 1, 4095, f);
        text[n] = '\0';
    }
    if (f)
        fclose(f);
    unlink(path);
    return text;
}

static void test_bind_warning(void)
{
    eng_engine *e = NULL;
    int level = ll_log_level;
    ll_log_level = LL_LOG_DEBUG; /* a key must not show even in the most verbose log */
    char *t = start_logged("law=1,port=0,host=0.0.0.0", &e);
    CHECK(e && t && strstr(t, "without an API key"), "0.0.0.0 without a key warns: %s", t ? t : "");
    eng_stop(e);
    free(t);
    t = start_logged("law=1,port=0,host=0.0.0.0,api_key=s3cr3t-Value,control_key=c0ntr0l-Value", &e);
    CHECK(e && t && !strstr(t, "without an API key") && !strstr(t, "s3cr3t") && !strstr(t, "c0ntr0l"),
          "with a key: no warning, and no key in the log: %s", t ? t : "");
    eng_stop(e);
    free(t);
    t = start_logged("law=1,port=0,host=127.0.0.1", &e);
    CHECK(e && t && !strstr(t, "without an API key"), "loopback: no warning: %s", t ? t : "");
    eng_stop(e);
    free(t);
    ll_log_level = level;
    char err[256] = "";
    eng_config c;
    eng_config_default(&c);
    CHECK(eng_config_set(&c, "api_key", "", err, sizeof err) != 0 && !strstr(err, "\"\""),
          "an empty key is refused: %s", err);
    CHECK(eng_config_set(&c, "no_control", "maybe", err, sizeof err) != 0, "switch: %s", err);
    CHECK(eng_config_set(&c, "no_control", "true", err, sizeof err) == 0 && c.no_control == 1, "switch on");
    eng_config_free(&c);
}

/* A body near the default limit still works (the server's connection
 * memory is not where bodies accumulate). */
static void test_large_body(void)
{
    eng_engine *e = tc_start("law=0.1,max_context=1m");
    size_t words = 1000, wlen = 999, n = 0;
    char *body = malloc(words * (wlen + 1) + 128);
    CHECK(body != NULL, "malloc");
    if (!body)
        return;
    n += (size_t)sprintf(body, "{\"max_tokens\":2,\"prompt\":\"");
    for (size_t i = 0; i < words; i++) {
        memset(body + n, 'w', wlen);
        n += wlen;
        body[n++] = ' ';
    }
    n += (size_t)sprintf(body + n, "\"}");
    char u[256];
    tc_resp r;
    snprintf(u, sizeof u, "%s/v1/completions", eng_url(e));
    tc_request("POST", u, body, (long)n, &r);
    cJSON *o = cJSON_Parse(r.body.p);
    CHECK(n > 1000000 && r.status == 200 &&
          ll_json_i64(cJSON_GetObjectItemCaseSensitive(o, "usage"), "prompt_tokens", -1) == (int64_t)words,
          "a %zu-byte body is served: %ld", n, r.status);
    cJSON_Delete(o);
    tc_resp_free(&r);
    free(body);

    /* request headers live in the connection's pool (conn_memory, 8 KiB):
     * 6 KB of them still fit */
    char *hdr = malloc(6100);
    CHECK(hdr != NULL, "malloc");
    if (hdr) {
        n = (size_t)sprintf(hdr, "X-Pad: ");
        memset(hdr + n, 'x', 6000);
        hdr[n + 6000] = '\0';
        tc_request_hdr("POST", u, "{\"prompt\":\"a\",\"max_tokens\":2}", -1, hdr, &r);
        CHECK(r.status == 200, "6 KB of request headers served: %ld", r.status);
        tc_resp_free(&r);
        free(hdr);
    }
    eng_stop(e);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    char root[] = "/tmp/loadlaw-engsec-XXXXXX";
    if (!mkdtemp(root))
        return 1;
    test_utf8();
    test_auth(root);
    test_profile_dir(root);
    test_bind_warning();
    test_large_body();
    rmdir(root);
    curl_global_cleanup();
    TEST_MAIN_END();
}
