/* buf.c: growable byte buffer and whole-file helpers. */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int buf_reserve(ll_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return LL_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int ll_buf_append(ll_buf *b, const void *data, size_t n)
{
    if (buf_reserve(b, n))
        return LL_ENOMEM;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int ll_buf_printf(ll_buf *b, const char *fmt, ...)
{
    /* One vsnprintf into the room already there; a second only when it did
     * not fit (the records writer formats every line through here). */
    size_t room = b->cap > b->len ? b->cap - b->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
        if (b->p)
            b->p[b->len] = '\0';
        return LL_EINVAL;
    }
    if ((size_t)n >= room) {
        if (buf_reserve(b, (size_t)n)) {
            if (b->p)
                b->p[b->len] = '\0';
            return LL_ENOMEM;
        }
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
    return 0;
}

void ll_buf_reset(ll_buf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
}

void ll_buf_free(ll_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

int ll_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    ll_buf b = {0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        ll_errf(err, errlen, "%s: %s", path, strerror(errno));
        return LL_EIO;
    }
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (ll_buf_append(&b, chunk, n)) {
            fclose(f);
            ll_buf_free(&b);
            ll_errf(err, errlen, "%s: out of memory", path);
            return LL_ENOMEM;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        ll_buf_free(&b);
        ll_errf(err, errlen, "%s: read error", path);
        return LL_EIO;
    }
    if (!b.p && ll_buf_append(&b, "", 0))
        return LL_ENOMEM;
    *out = b.p;
    if (len)
        *len = b.len;
    return 0;
}

int ll_mkdir_p(const char *path, char *err, size_t errlen)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) {
        ll_errf(err, errlen, "bad directory path '%s'", path);
        return LL_EINVAL;
    }
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
                ll_errf(err, errlen, "mkdir %s: %s", tmp, strerror(errno));
                return LL_ESYS;
            }
            *p = c;
            if (c == '\0')
                break;
        }
    }
    return 0;
}

int ll_vec_reserve_(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return LL_ENOMEM;
        c *= 2;
    }
    void *p = realloc(*v, c * elem);
    if (!p)
        return LL_ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}
