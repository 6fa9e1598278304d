/* scn_keyout.c: the key table (scenario_keys.c) put to work on the way out:
 * a scenario written back as JSON (scn_to_json) for the run record's
 * "config", in the keys the loader reads, so a run line's config loads back
 * as the same scenario (the other ranks of an MPI sweep are given theirs
 * that way); and docs/scenarios.md. Secrets stay out of the run line: the
 * URL, the engine spec and secret-named headers are written redacted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scn_internal.h"
#include "scn_keys.h"

static const void *cat(const void *base, size_t off)
{
    return (const char *)base + off;
}

static int add(cJSON *o, const char *k, cJSON *item)
{
    if (item && cJSON_AddItemToObject(o, k, item))
        return 0;
    cJSON_Delete(item);
    return LL_ENOMEM;
}

/* A string row: NULL as null (or its default's text, or nothing), else
 * redacted as the row says. */
static int write_str(cJSON *o, const scn_key *k, const char *v)
{
    char *red = NULL;
    int rc;
    if (!v && (k->flags & SCN_KF_OMIT0))
        return 0;
    if (!v)
        return add(o, k->name, k->def ? cJSON_CreateString(k->def) : cJSON_CreateNull());
    if (k->flags & (SCN_KF_URL | SCN_KF_SPEC)) {
        red = (k->flags & SCN_KF_URL) ? ll_redact_url(v) : ll_redact_spec(v);
        if (!red)
            return LL_ENOMEM;
    }
    rc = add(o, k->name, cJSON_CreateString(red ? red : v));
    free(red);
    return rc;
}

/* complexity: one case per value type, a line or two each. */
static int write_key(cJSON *o, const scn_key *k, const void *base)
{
    const void *p = cat(base, k->off);
    if ((k->flags & SCN_KF_NOWRITE) || (k->when && !k->when(base)) ||
        ((k->flags & SCN_KF_ON) && !*(const int *)cat(base, k->on)))
        return 0;
    if (k->write)
        return k->write(o, k, base);
    switch (k->type) {
    case SCN_K_INT: {
        int v = *(const int *)p;
        if ((k->flags & SCN_KF_OMIT0) && v == 0)
            return 0;
        return (k->flags & SCN_KF_NULL) && v < k->lo ? add(o, k->name, cJSON_CreateNull())
                                                      : ll_json_add_num(o, k->name, v);
    }
    case SCN_K_U64:
        return ll_json_add_num(o, k->name, (double)*(const uint64_t *)p);
    case SCN_K_NUM:
    case SCN_K_SECONDS:
        if ((k->flags & SCN_KF_OMIT0) && *(const double *)p == 0)
            return 0;
        return ll_json_add_num(o, k->name, *(const double *)p);
    case SCN_K_BOOL:
        if ((k->flags & SCN_KF_OMIT0) && !*(const int *)p)
            return 0;
        return add(o, k->name, cJSON_CreateBool(*(const int *)p));
    case SCN_K_ENUM:
        return add(o, k->name, cJSON_CreateString(k->names[(k->flags & SCN_KF_CONST) ? 0 : *(const int *)p]));
    case SCN_K_STR:
        return write_str(o, k, *(char *const *)p);
    case SCN_K_JSON: {
        const cJSON *j = *(cJSON *const *)p;
        return add(o, k->name, j ? cJSON_Duplicate(j, 1) : cJSON_CreateNull());
    }
    case SCN_K_OBJ: {
        cJSON *child = cJSON_AddObjectToObject(o, k->name);
        return child ? scn_write_shape(child, k->shape, p) : LL_ENOMEM;
    }
    case SCN_K_INLINE:
        return scn_write_shape(o, k->shape, k->at ? k->at((void *)base) : base);
    default:
        return 0;
    }
}

int scn_write_shape(cJSON *o, const scn_shape *sh, const void *base)
{
    int rc = 0;
    for (size_t i = 0; i < sh->n && rc == 0; i++)
        rc = write_key(o, &sh->keys[i], base);
    return rc;
}

cJSON *scn_to_json(const scn_scenario *s)
{
    cJSON *root = cJSON_CreateObject();
    if (root && scn_write_shape(root, &scn_root_shape, s)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* ---- docs/scenarios.md ------------------------------------------------------------ */

/* Text in a table cell: `code spans` as written; elsewhere what Markdown
 * would read as emphasis, links or HTML escaped; '|' everywhere. */
static void md_cell(FILE *f, const char *s)
{
    int code = 0;
    for (; *s; s++) {
        if (*s == '`')
            code = !code;
        if (*s == '|')
            fputs("\\|", f);
        else if (code || *s == '`')
            fputc(*s, f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (strchr("\\*_[]", *s))
            fprintf(f, "\\%c", *s);
        else
            fputc(*s, f);
    }
}

/* A default (or remote default) as the file would say it. */
static void md_value(FILE *f, const scn_key *k, const char *t)
{
    int quote = (k->type == SCN_K_STR || k->type == SCN_K_ENUM) && strcmp(t, "null") != 0;
    fprintf(f, "`%s%s%s`", quote ? "\"" : "", t, quote ? "\"" : "");
}

/* The default a row has without a text of its own: what scn_new leaves
 * (nothing to say for a key that must be given). */
static const char *zero_default(const scn_key *k)
{
    if (k->flags & SCN_KF_REQUIRED)
        return NULL;
    switch (k->type) {
    case SCN_K_INT:
        return (k->flags & SCN_KF_NULL) ? "null" : "0";
    case SCN_K_NUM:
        return (k->flags & SCN_KF_NULL) ? "null" : "0";
    case SCN_K_U64:
    case SCN_K_SECONDS:
        return "0";
    case SCN_K_BOOL:
        return "false";
    case SCN_K_ENUM:
        return k->names[0];
    case SCN_K_STR:
    case SCN_K_JSON:
        return "null";
    case SCN_K_OBJ:
        return (k->flags & (SCN_KF_NULL | SCN_KF_ON)) ? "null" : NULL;
    default:
        return NULL;
    }
}

/* One key; quiet: its default is its parent's to say (prompts.words "100"). */
static void md_row(FILE *f, const scn_key *k, const char *path, int quiet)
{
    char what[512];
    const char *def = quiet ? NULL : k->def ? k->def : zero_default(k);
    scn_key_what(k, 1, what, sizeof what);
    fprintf(f, "| `%s` | ", path);
    md_cell(f, k->type == SCN_K_INLINE ? "" : what);
    fputs(" | ", f);
    if (def)
        md_value(f, k, def);
    fputs(" | ", f);
    if (k->rdef)
        md_value(f, k, k->rdef);
    fputs(" | ", f);
    if (k->flag)
        fprintf(f, "`--%s`", k->flag);
    fputs(" | ", f);
    md_cell(f, k->help ? k->help : "");
    fputs(" |\n", f);
}

/* Rows of sh under path, depth first; an inlined shape with help of its own
 * is one row (load's level keys), else its keys are listed in place. */
static void md_shape(FILE *f, const scn_shape *sh, const char *path, int quiet)
{
    char p[160];
    for (size_t i = 0; i < sh->n; i++) {
        const scn_key *k = &sh->keys[i];
        if (k->type == SCN_K_INLINE && !k->help) {
            md_shape(f, k->shape, path, quiet);
            continue;
        }
        if (k->type == SCN_K_INLINE)
            snprintf(p, sizeof p, "%s.<level key>", path);
        else
            scn_join(p, sizeof p, path, k->name);
        md_row(f, k, p, quiet);
        if (k->shape == &scn_level_shape)
            md_shape(f, k->shape, "levels[]", 0);
        else if (k->shape && k->type != SCN_K_INLINE)
            md_shape(f, k->shape, p, quiet || (k->type == SCN_K_OBJ && k->set));
    }
}

int scn_keys_markdown(FILE *f)
{
    fputs("# Scenario keys\n\n"
          "<!-- Generated by `loadlaw help --scenario-keys` from the key table (scenarios/scenario_keys.c);\n"
          "     do not edit by hand. The ctest test docs_scenarios fails when this file differs. -->\n\n"
          "A scenario is one JSON object: everything `loadlaw sweep` can be told, in a file\n"
          "(`loadlaw sweep SCENARIO.json`; the files in `scenarios/` are examples). Every key is\n"
          "optional; an unknown key, a key given twice or a value of the wrong kind is an error\n"
          "that names the file, the key's path and what was expected. Flags given beside a\n"
          "scenario win over its keys. The run line of `records.jsonl` holds the scenario a run\n"
          "used, in these keys (`config`), and loads back as a scenario.\n\n"
          "Paths in the table below are JSON paths: `request.max_tokens` is\n"
          "`{\"request\":{\"max_tokens\":64}}`, `levels[].concurrency` a key of each element of\n"
          "`levels`. \"with `--url`\" is the default of a run against a URL without a scenario;\n"
          "the flag, where there is one, sets the key from the command line\n"
          "([cli.md](cli.md)). The workload sections (`load.trace`, `load.shared_prefix`,\n"
          "`load.sessions`) are explained in [workloads.md](workloads.md), `ab` in [ab.md](ab.md).\n\n"
          "| key | value | default | with `--url` | flag | what it does |\n"
          "|---|---|---|---|---|---|\n",
          f);
    md_shape(f, &scn_root_shape, "", 0);
    return fflush(f) == 0 && !ferror(f) ? 0 : LL_EIO;
}
