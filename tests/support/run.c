/* run.c: the tests' processes and files (tsupport.h): loadlaw run by fork
 * and execv with its output in files, shell commands, and the reading and
 * searching of what a run wrote. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsupport.h"

pid_t tu_spawn(const char *bin, char *const args[], const char *outfile, const char *errfile)
{
    pid_t p = fork();
    if (p == 0) {
        /* A job started in the background inherits SIGINT ignored; a user's
         * terminal would deliver it, so the child gets the default back. A
         * file that cannot be opened leaves that stream where it was: the
         * test's own output, where it is still seen. */
        signal(SIGINT, SIG_DFL);
        FILE *e = freopen(errfile ? errfile : "/dev/null", "w", stderr);
        FILE *o = freopen(outfile ? outfile : "/dev/null", "w", stdout);
        (void)e;
        (void)o;
        execv(bin, args);
        _exit(127);
    }
    return p;
}

int tu_wait(pid_t p, double timeout_s)
{
    int st = 0;
    if (p < 0)
        return -1;
    if (timeout_s <= 0) {
        if (waitpid(p, &st, 0) != p)
            return -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    int64_t end = ll_now_ns() + (int64_t)(timeout_s * 1e9);
    while (ll_now_ns() < end) {
        if (waitpid(p, &st, WNOHANG) == p)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(p, SIGKILL);
    waitpid(p, &st, 0);
    return -1;
}

int tu_run(const char *bin, char *const args[], const char *outfile, const char *errfile, double timeout_s)
{
    return tu_wait(tu_spawn(bin, args, outfile, errfile), timeout_s);
}

int tu_sh(const char *cmd)
{
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int tu_sh_capture(const char *cmd, ll_buf *out)
{
    ll_buf_reset(out);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        ll_buf_append(out, buf, n);
    int st = pclose(f);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

char *tu_slurp(const char *path)
{
    char err[256], *s = NULL;
    size_t n;
    return ll_read_file(path, &s, &n, err, sizeof err) ? NULL : s;
}

cJSON *tu_json_file(const char *path)
{
    char *s = tu_slurp(path);
    cJSON *j = s ? cJSON_ParseWithOpts(s, NULL, 0) : NULL;
    free(s);
    return j;
}

cJSON *tu_sweep_fit(const char *bin, const char *scenario, const char *dir, const char *name, int *rc)
{
    char cmd[4096], path[1024];
    snprintf(cmd, sizeof cmd,
             "%s sweep %s -o %s/%s -q --no-report > %s/%s.out 2>&1 && %s fit %s/%s --json > %s/%s.json 2> %s/%s.err",
             bin, scenario, dir, name, dir, name, bin, dir, name, dir, name, dir, name);
    *rc = tu_sh(cmd);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    return *rc == 0 ? tu_json_file(path) : NULL;
}

cJSON *tu_page_data(const char *path)
{
    static const char open[] = "<script id=\"ll-data\" type=\"application/json\">";
    char *s = tu_slurp(path), *a = s ? strstr(s, open) : NULL, *b = a ? strstr(a, "</script>") : NULL;
    cJSON *j = NULL;
    if (b) {
        *b = '\0';
        j = cJSON_ParseWithOpts(a + sizeof open - 1, NULL, 0);
    }
    free(s);
    return j;
}

int tu_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int bad = fputs(text, f) == EOF;
    return fclose(f) || bad ? -1 : 0;
}

size_t tu_count(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text ? strstr(text, needle) : NULL; p; p = strstr(p + 1, needle))
        n++;
    return n;
}

size_t tu_count_in(const char *path, const char *needle)
{
    char *s = tu_slurp(path);
    size_t n = tu_count(s, needle);
    free(s);
    return n;
}

int tu_file_has(const char *path, const char *needle)
{
    char *s = tu_slurp(path);
    int f = s && strstr(s, needle) != NULL;
    free(s);
    return f;
}

int tu_dir_has(const char *dir, const char *needle)
{
    char cmd[1024];
    if (strchr(dir, '\'') || strchr(needle, '\'') ||
        snprintf(cmd, sizeof cmd, "grep -rqF -- '%s' '%s'", needle, dir) >= (int)sizeof cmd)
        return -1;
    int st = system(cmd);
    return st == 0 ? 1 : (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1) ? 0 : -1;
}

int tu_tmpdir(const char *name, char *out, size_t n)
{
    const char *tmp = getenv("TMPDIR");
    char err[256];
    if (snprintf(out, n, "%s/%s_%d", tmp && tmp[0] ? tmp : "/tmp", name, (int)getpid()) >= (int)n) {
        fprintf(stderr, "%s: scratch folder name too long\n", name);
        return -1;
    }
    if (ll_mkdir_p(out, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

void tu_rmtree(const char *dir)
{
    char cmd[1024];
    if (strchr(dir, '\'') || snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) >= (int)sizeof cmd || system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}
