/* fuzz_prom.c: the Prometheus text parser (telemetry/prom.c) must never crash
 * on a server's /metrics text, and what it reads must be what it writes.
 *
 * Property: every sample of parse(text), written back in canonical form
 * (each under its own "# TYPE family type" line, so the type a sample had is
 * stated, not inferred from its neighbours), parses with no malformed line
 * into the same samples, and writing those again gives the same bytes.
 * Counts must add up: samples + malformed lines never exceed lines.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fuzz_util.h"
#include "telemetry.h"

typedef struct canon {
    ll_buf text;
    size_t n;
    int oom;
} canon;

static int on_sample(const tel_prom_sample *s, void *ctx)
{
    canon *c = ctx;
    FUZZ_CHECK(s->name && s->family && s->n_labels <= TEL_PROM_MAX_LABELS);
    for (size_t i = 0; i < s->n_labels; i++)
        FUZZ_CHECK(s->labels[i].name && s->labels[i].value);
    if (ll_buf_printf(&c->text, "# TYPE %s %s\n", s->family, tel_prom_type_name(s->type)) ||
        tel_prom_format_sample(&c->text, s))
        c->oom = 1;
    c->n++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    canon a = {0}, b = {0};
    tel_prom_stats sa, sb;
    if (tel_prom_parse((const char *)data, size, on_sample, &a, &sa) == 0 && !a.oom) {
        FUZZ_CHECK(sa.n_samples + sa.n_bad <= sa.n_lines && sa.n_samples == a.n);
        FUZZ_CHECK(tel_prom_parse(a.text.p ? a.text.p : "", a.text.len, on_sample, &b, &sb) == 0);
        if (!b.oom) {
            FUZZ_CHECK(sb.n_bad == 0 && b.n == a.n);
            FUZZ_CHECK(b.text.len == a.text.len && (a.text.len == 0 || !memcmp(a.text.p, b.text.p, a.text.len)));
        }
    }
    ll_buf_free(&a.text);
    ll_buf_free(&b.text);
    return 0;
}
