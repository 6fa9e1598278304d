/* test_trace_vllm.c: `loadlaw trace`'s CPU breakdown of a real vLLM trace:
 * the worker's torch.profiler trace from vLLM 0.32's CPU backend, 12 steps
 * of 8 decoding requests (fixtures/trim_vllm_trace.py says how it was made
 * and what was trimmed). By self time, matmul (oneDNN's) comes first among
 * the categories and attention second; the compiled graph's own code
 * ("## Call CompiledFxGraph None ##", a cpu_op) is "other", and vLLM's step
 * annotation ("execute_context_0(0)_generation_8(8)", a user_annotation)
 * marks the 12 steps: no operator. */
#include <string.h>

#include "report.h"
#include "testutil.h"

static int64_t category_ns(const rpt_trace *t, rpt_categories *c, const char *cat)
{
    int64_t ns = 0;
    for (size_t i = 0; i < rpt_trace_n_cpu_ops(t); i++) {
        const rpt_trace_kernel *o = rpt_trace_cpu_op_at(t, i);
        ns += strcmp(rpt_categories_classify(c, o->name), cat) == 0 ? o->total_ns : 0;
    }
    return ns;
}

int main(void)
{
    char err[512];
    rpt_trace *t = NULL;
    rpt_categories *c = NULL;
    const char *path = TRACE_FIXTURES "/vllm_cpu_worker.pt.trace.json.gz";
    CHECK(rpt_trace_load(path, &t, err, sizeof err) == 0, "load: %s", err);
    CHECK(rpt_categories_new(&c, err, sizeof err) == 0, "categories: %s", err);
    if (!t || !c)
        TEST_MAIN_END();
    rpt_trace_info in;
    rpt_trace_get_info(t, &in);
    CHECK(in.steps == 12 && in.step_min_ns > 0 && in.step_max_ns < 100000000,
          "12 steps marked by execute_context_: %llu, %lld..%lld ns", (unsigned long long)in.steps,
          (long long)in.step_min_ns, (long long)in.step_max_ns);
    CHECK(in.gpu_events == 0 && in.cpu_events > 5000 && in.cpu_late == 0 && in.cpu_self_ns <= in.span_ns,
          "%llu GPU events, %llu CPU, %llu late, self %lld of span %lld", (unsigned long long)in.gpu_events,
          (unsigned long long)in.cpu_events, (unsigned long long)in.cpu_late, (long long)in.cpu_self_ns,
          (long long)in.span_ns);
    const rpt_trace_kernel *top = rpt_trace_cpu_op_at(t, 0);
    CHECK(top && strcmp(top->name, "_C::onednn_mm") == 0 && top->count == 300, "top operator %s x%llu",
          top ? top->name : "-", top ? (unsigned long long)top->count : 0ULL);
    int64_t gemm = category_ns(t, c, "GEMM"), attn = category_ns(t, c, "attention");
    int64_t copies = category_ns(t, c, "elementwise & copies"), other = category_ns(t, c, "other");
    CHECK(gemm > 2 * attn && attn > copies && gemm > other && attn > 0,
          "matmul first, attention second: GEMM %lld, attention %lld, copies %lld, other %lld", (long long)gemm,
          (long long)attn, (long long)copies, (long long)other);
    CHECK(gemm + attn + copies + other == in.cpu_self_ns, "the categories add up to the self time");
    for (size_t i = 0; i < rpt_trace_n_cpu_ops(t); i++) {
        const rpt_trace_kernel *o = rpt_trace_cpu_op_at(t, i);
        CHECK(!strstr(o->name, "execute_context"), "the step marker %s is not an operator", o->name);
        if (strstr(o->name, "CompiledFxGraph"))
            CHECK(strcmp(rpt_categories_classify(c, o->name), "other") == 0, "%s is other", o->name);
        if (strstr(o->name, "kv_cache_update") || strstr(o->name, "packed_linear"))
            CHECK(strcmp(rpt_categories_classify(c, o->name), strstr(o->name, "linear") ? "GEMM" : "elementwise & copies") == 0,
                  "%s is %s", o->name, rpt_categories_classify(c, o->name));
    }
    rpt_categories_free(c);
    rpt_trace_free(t);
    TEST_MAIN_END();
}
