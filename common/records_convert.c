/* records_convert.c: a records file's request chunk lists rewritten in the
 * other form (records.h ll_rec_convert): packed, as the writer writes them
 * now, or as the [[t_ns,tokens,"k"],...] list of older files, for a tool that
 * reads that list (jq, older scripts).
 *
 * Only request lines that hold the other form change: their chunk member is
 * taken out, the rest of the object printed again by cJSON (the same values:
 * cJSON prints a number so that it reads back to the same double, which is
 * what every reader takes), and the new member appended. Every other line is
 * copied byte for byte, so is a request whose chunks cannot be read (the
 * reader rejects it as before), and a truncated last line (a killed writer)
 * is left out with a warning, as the reader leaves it out. */
#include "common.h"
#include "records_item.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* Times beyond +/- 2^62 ns: left for the reader to reject (records_read.c). */
#define TIME_LIMIT ((double)(INT64_C(1) << 62))

typedef struct conv {
    int to_packed;
    ll_buf out;
    LL_VEC(ll_rec_chunk) chunks;
} conv;

/* The list form of arr into c->chunks. LL_EPARSE when it is not one. Values
 * are kept as read (a reader still judges their range). */
static int list_chunks(conv *c, const cJSON *arr)
{
    const cJSON *it;
    c->chunks.n = 0;
    if (!cJSON_IsArray(arr))
        return LL_EPARSE;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *t = cJSON_GetArrayItem(it, 0), *tk = cJSON_GetArrayItem(it, 1), *kd = cJSON_GetArrayItem(it, 2);
        if (!cJSON_IsNumber(t) || !cJSON_IsNumber(tk) || !cJSON_IsString(kd) ||
            (strcmp(kd->valuestring, "t") != 0 && strcmp(kd->valuestring, "a") != 0))
            return LL_EPARSE;
        /* a value the packed form cannot hold stays in the list form */
        if (!(t->valuedouble >= -TIME_LIMIT && t->valuedouble <= TIME_LIMIT) ||
            !(tk->valuedouble >= 0 && tk->valuedouble <= INT32_MAX))
            return LL_ERANGE;
        ll_rec_chunk ch = {(int64_t)t->valuedouble, (int32_t)tk->valuedouble, kd->valuestring[0]};
        if (ll_vec_push(&c->chunks, ch))
            return LL_ENOMEM;
    }
    return 0;
}

/* The object o without its member `from`, with `to` appended as the chunks
 * in c->chunks, into c->out. */
static int reprint(conv *c, cJSON *o, const char *from, const char *to)
{
    cJSON_Delete(cJSON_DetachItemFromObjectCaseSensitive(o, from));
    char *s = cJSON_PrintUnformatted(o);
    if (!s)
        return LL_ENOMEM;
    size_t n = strlen(s);
    ll_buf_reset(&c->out);
    int rc = ll_buf_append(&c->out, s, n - 1); /* without its closing brace */
    cJSON_free(s);
    if (rc == 0)
        rc = ll_buf_printf(&c->out, "%s\"%s\":", n > 2 ? "," : "", to);
    if (rc == 0)
        rc = c->to_packed ? ll_buf_append(&c->out, "\"", 1) : ll_rec_format_chunk_list(&c->out, c->chunks.v, c->chunks.n);
    if (rc == 0 && c->to_packed)
        rc = ll_rec_chunks_pack(&c->out, c->chunks.v, c->chunks.n);
    if (rc == 0)
        rc = ll_buf_append(&c->out, c->to_packed ? "\"}\n" : "}\n", c->to_packed ? 3 : 2);
    return rc;
}

/* One line (NUL-terminated, without its newline): into c->out when it
 * changes (1), or 0 when it is to be copied as it is. */
static int convert_line(conv *c, const char *line, ll_rec_convert_stats *st)
{
    cJSON *o = cJSON_ParseWithOpts(line, NULL, 1);
    const char *from = c->to_packed ? "chunks" : LL_REC_CHUNKS_PACKED;
    const char *to = c->to_packed ? LL_REC_CHUNKS_PACKED : "chunks";
    const cJSON *src = o ? cJSON_GetObjectItemCaseSensitive(o, from) : NULL;
    int rc = 0;
    if (!src || cJSON_GetObjectItemCaseSensitive(o, to) ||
        strcmp(ll_json_str(o, "type", ""), LL_REC_REQUEST) != 0)
        goto done; /* not a request in the other form: as it is */
    if (c->to_packed)
        rc = list_chunks(c, src);
    else if (!cJSON_IsString(src))
        rc = LL_EPARSE;
    else
        rc = ll_rec_chunks_unpack(src->valuestring, strlen(src->valuestring), &c->chunks.v, &c->chunks.n,
                                  &c->chunks.cap);
    if (rc == LL_EPARSE || rc == LL_ERANGE) {
        st->n_kept_bad++;
        rc = 0;
        goto done;
    }
    if (rc == 0 && (rc = reprint(c, o, from, to)) == 0) {
        st->n_converted++;
        st->n_chunks += c->chunks.n;
        rc = 1;
    }
done:
    cJSON_Delete(o);
    return rc;
}

/* Refuse to write over the input: same file, or the same path. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int ll_rec_convert(const char *in, const char *out, int to_packed, ll_rec_convert_stats *st, char *err,
                   size_t errlen)
{
    conv c = {.to_packed = to_packed};
    FILE *fi = NULL, *fo = NULL;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    memset(st, 0, sizeof *st);
    if (strcmp(out, "-") != 0 && same_file(in, out)) {
        ll_errf(err, errlen, "%s: the output is the input; write to another file", out);
        return LL_EINVAL;
    }
    if (!(fi = fopen(in, "r"))) {
        ll_errf(err, errlen, "%s: %s", in, strerror(errno));
        return LL_EIO;
    }
    if (!(fo = strcmp(out, "-") == 0 ? stdout : fopen(out, "w"))) {
        ll_errf(err, errlen, "%s: %s", out, strerror(errno));
        fclose(fi);
        return LL_EIO;
    }
    while (rc == 0 && (n = getline(&line, &cap, fi)) > 0) {
        if (line[n - 1] != '\n') { /* a killed writer's last line: the reader skips it too */
            ll_warn("%s: truncated last line left out", in);
            st->n_truncated++;
            break;
        }
        line[n - 1] = '\0';
        int got = convert_line(&c, line, st);
        line[n - 1] = '\n';
        if (got < 0)
            rc = got;
        else if ((got ? fwrite(c.out.p, 1, c.out.len, fo) != c.out.len : fwrite(line, 1, (size_t)n, fo) != (size_t)n))
            rc = LL_EIO;
        st->n_lines++;
    }
    if (rc == 0 && ferror(fi))
        rc = LL_EIO;
    if ((fo == stdout ? fflush(fo) : fclose(fo)) != 0 && rc == 0)
        rc = LL_EIO;
    if (rc)
        ll_errf(err, errlen, "%s -> %s: %s", in, out, rc == LL_EIO ? strerror(errno) : ll_strerror(rc));
    fclose(fi);
    free(line);
    ll_buf_free(&c.out);
    ll_vec_free(&c.chunks);
    return rc;
}
