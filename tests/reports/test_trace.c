/* test_trace.c: `loadlaw trace`'s reader on traces written here in Kineto's
 * layout — with and without cat, gzipped and plain, keys in any order, several
 * devices and streams, overlapping events — against totals, counts and busy
 * fractions worked out by hand; the interval union against brute force; bad
 * input against clear errors. CPU-only traces: self time on a hand-written
 * nesting with known numbers, and a real torch.profiler CPU trace
 * (fixtures/make_cpu_trace.py) whose matmul must come first. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "common.h"
#include "report.h"
#include "testutil.h"
#include "tsupport.h"
#include "trace_internal.h"

/* Device 0 streams 7 and 8 overlap; device 1 runs NCCL; a GPU annotation, a
 * CPU op, a flow event and metadata must not count as kernels. Times in µs. */
static const char *kineto_a =
    "{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":0,\"name\":\"H100\"}],\n"
    "\"traceEvents\":[\n"
    "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"GPU 0\"}},\n"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1234,\"tid\":1234,\"ts\":1000.0,\"dur\":500,"
    "\"args\":{\"External id\":1,\"stream\":7}},\n"
    "{\"ph\":\"s\",\"cat\":\"ac2g\",\"id\":1,\"pid\":1234,\"tid\":1234,\"ts\":1050,\"name\":\"ac2g\"},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(Flash_fwd_params)\","
    "\"pid\":0,\"tid\":7,\"ts\":1100,\"dur\":100,\"args\":{\"device\":0,\"stream\":7,\"grid\":[1,2,3]}},\n"
    /* keys in another order, and out of time order within the stream */
    "{\"args\":{\"device\":0,\"stream\":7,\"block\":{\"x\":128}},\"dur\":100.25,\"tid\":7,"
    "\"name\":\"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(Flash_fwd_params)\",\"ts\":1300,\"pid\":0,"
    "\"cat\":\"kernel\",\"ph\":\"X\"},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void cutlass::Kernel2<cutlass_80_simt_sgemm_64x128_8x5_tn_align1>(Params)\","
    "\"pid\":0,\"tid\":7,\"ts\":1250.5,\"dur\":49.5,\"args\":{\"stream\":7}},\n"
    "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy DtoD (Device -> Device)\",\"pid\":0,\"tid\":8,"
    "\"ts\":1150,\"dur\":200,\"args\":{\"stream\":8,\"bytes\":4096}},\n"
    "{\"ph\":\"X\",\"cat\":\"gpu_memset\",\"name\":\"Memset (Device)\",\"pid\":0,\"tid\":8,\"ts\":1600,\"dur\":10},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)\","
    "\"pid\":1,\"tid\":7,\"ts\":1200,\"dur\":300,\"args\":{\"device\":1,\"stream\":7}},\n"
    "{\"ph\":\"X\",\"cat\":\"gpu_user_annotation\",\"name\":\"decode_step\",\"pid\":0,\"tid\":7,\"ts\":1100,\"dur\":600,"
    "\"args\":{\"stream\":7}},\n"
    "{\"ph\":\"f\",\"cat\":\"ac2g\",\"id\":1,\"pid\":0,\"tid\":7,\"ts\":1100,\"name\":\"ac2g\",\"bp\":\"e\"}\n"
    "],\"traceName\":\"a.pt.trace.json\",\"displayTimeUnit\":\"ms\"}\n";

/* The bare-array form, no cat anywhere: GPU events are those with args.stream
 * (a "stream" nested deeper does not count). */
static const char *bare_b =
    "[{\"name\":\"kernA\",\"ph\":\"X\",\"ts\":10,\"dur\":5,\"pid\":2,\"tid\":3,\"args\":{\"stream\":3}},"
    "{\"ph\":\"X\",\"name\":\"cpu thing\",\"ts\":0,\"dur\":40,\"pid\":9,\"tid\":9},"
    "{\"ph\":\"X\",\"name\":\"notgpu\",\"ts\":1,\"dur\":1,\"pid\":2,\"tid\":3,\"args\":{\"nested\":{\"stream\":1}}},"
    "{\"ph\":\"X\",\"name\":\"kernA\",\"ts\":20,\"dur\":5,\"pid\":2,\"tid\":3,\"args\":{\"stream\":3,\"nested\":{\"stream\":99}}},"
    "{\"ph\":\"X\",\"name\":\"nullstream\",\"ts\":1,\"dur\":1,\"pid\":2,\"tid\":3,\"args\":{\"stream\":null}},"
    "{\"args\":{\"stream\":4},\"ph\":\"X\",\"name\":\"kernB\",\"ts\":12,\"dur\":10,\"pid\":2,\"tid\":4}]";

/* What the bundled engine's /start_profile writes. */
static const char *engine_c =
    "{\"traceEvents\":[{\"name\":\"decode_step\",\"ph\":\"X\",\"cat\":\"kernel\",\"pid\":0,\"tid\":7,"
    "\"ts\":0,\"dur\":2650.5,\"args\":{\"stream\":7,\"n_decode\":8}},"
    "{\"name\":\"attn_decode_naive\",\"ph\":\"X\",\"cat\":\"kernel\",\"pid\":0,\"tid\":7,"
    "\"ts\":3000,\"dur\":1500,\"args\":{\"stream\":7}}],\"displayTimeUnit\":\"ms\"}";

static void write_file(const char *path, const char *text, int gz)
{
    if (gz) {
        gzFile g = gzopen(path, "wb");
        CHECK(g != NULL, "gzopen %s", path);
        if (g) {
            CHECK(gzwrite(g, text, (unsigned)strlen(text)) == (int)strlen(text), "gzwrite");
            gzclose(g);
        }
    } else {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL, "fopen %s", path);
        if (f) {
            fputs(text, f);
            fclose(f);
        }
    }
}

static const rpt_trace_kernel *find_kernel(const rpt_trace *t, const char *prefix)
{
    for (size_t i = 0; i < rpt_trace_n_kernels(t); i++)
        if (strncmp(rpt_trace_kernel_at(t, i)->name, prefix, strlen(prefix)) == 0)
            return rpt_trace_kernel_at(t, i);
    return NULL;
}

static const rpt_trace_stream *find_stream(const rpt_trace *t, const char *pid, const char *tid)
{
    for (size_t i = 0; i < rpt_trace_n_streams(t); i++) {
        const rpt_trace_stream *s = rpt_trace_stream_at(t, i);
        if (strcmp(s->pid, pid) == 0 && strcmp(s->tid, tid) == 0)
            return s;
    }
    return NULL;
}

static void check_a(const rpt_trace *t, const char *what)
{
    rpt_trace_info info;
    rpt_trace_get_info(t, &info);
    CHECK(info.events == 11, "%s: events %llu", what, (unsigned long long)info.events);
    CHECK(info.gpu_events == 6, "%s: gpu events %llu", what, (unsigned long long)info.gpu_events);
    CHECK(info.span_ns == 700000, "%s: span %lld", what, (long long)info.span_ns);
    CHECK(info.gpu_total_ns == 759750, "%s: gpu total %lld", what, (long long)info.gpu_total_ns);
    CHECK(info.late_events == 0, "%s: late", what);
    CHECK(rpt_trace_n_kernels(t) == 5, "%s: kernels %zu", what, rpt_trace_n_kernels(t));
    /* sorted by total: nccl 300, flash 200.25, memcpy 200, cutlass 49.5, memset 10 */
    const char *order[] = {"ncclDevKernel", "void flash_fwd", "Memcpy", "void cutlass", "Memset"};
    for (size_t i = 0; i < 5 && i < rpt_trace_n_kernels(t); i++)
        CHECK(strncmp(rpt_trace_kernel_at(t, i)->name, order[i], strlen(order[i])) == 0,
              "%s: kernel %zu is %s", what, i, rpt_trace_kernel_at(t, i)->name);
    const rpt_trace_kernel *k = find_kernel(t, "void flash_fwd");
    CHECK(k && k->total_ns == 200250 && k->count == 2, "%s: flash total/count", what);
    k = find_kernel(t, "void cutlass");
    CHECK(k && k->total_ns == 49500 && k->count == 1, "%s: cutlass", what);
    const rpt_trace_stream *s = find_stream(t, "0", "7");
    CHECK(s && s->busy_ns == 249750 && s->events == 3, "%s: dev0 s7 busy %lld", what, s ? (long long)s->busy_ns : -1);
    s = find_stream(t, "0", "8");
    CHECK(s && s->busy_ns == 210000 && s->events == 2, "%s: dev0 s8 busy", what);
    s = find_stream(t, "0", "*");
    CHECK(s && s->busy_ns == 310250 && s->events == 5, "%s: dev0 all busy %lld", what, s ? (long long)s->busy_ns : -1);
    s = find_stream(t, "1", "7");
    CHECK(s && s->busy_ns == 300000, "%s: dev1 s7 busy", what);
    CHECK(rpt_trace_n_streams(t) == 5, "%s: streams %zu", what, rpt_trace_n_streams(t));
    /* sorted: device 0 "*" first */
    CHECK(strcmp(rpt_trace_stream_at(t, 0)->tid, "*") == 0 && strcmp(rpt_trace_stream_at(t, 0)->pid, "0") == 0,
          "%s: stream order", what);
}

static void test_fixtures(void)
{
    char err[512];
    rpt_trace *t = NULL;
    write_file("trace_a.json", kineto_a, 0);
    write_file("trace_a.json.gz", kineto_a, 1);
    CHECK(rpt_trace_load("trace_a.json", &t, err, sizeof err) == 0, "load a: %s", err);
    if (t)
        check_a(t, "plain");
    rpt_trace_free(t);
    t = NULL;
    CHECK(rpt_trace_load("trace_a.json.gz", &t, err, sizeof err) == 0, "load a.gz: %s", err);
    if (t)
        check_a(t, "gzip");
    rpt_trace_free(t);

    t = NULL;
    write_file("trace_b.json.gz", bare_b, 1);
    CHECK(rpt_trace_load("trace_b.json.gz", &t, err, sizeof err) == 0, "load b: %s", err);
    if (t) {
        rpt_trace_info info;
        rpt_trace_get_info(t, &info);
        CHECK(info.gpu_events == 3, "b: gpu events %llu", (unsigned long long)info.gpu_events);
        CHECK(info.span_ns == 40000, "b: span %lld", (long long)info.span_ns);
        const rpt_trace_kernel *k = find_kernel(t, "kernA");
        CHECK(k && k->total_ns == 10000 && k->count == 2, "b: kernA");
        CHECK(find_kernel(t, "notgpu") == NULL, "b: nested stream does not make a GPU event");
        CHECK(find_kernel(t, "nullstream") == NULL, "b: a null stream does not make a GPU event");
        const rpt_trace_stream *s = find_stream(t, "2", "*");
        CHECK(s && s->busy_ns == 15000, "b: dev2 union %lld", s ? (long long)s->busy_ns : -1);
        s = find_stream(t, "2", "4");
        CHECK(s && s->busy_ns == 10000, "b: dev2 s4");
    }
    rpt_trace_free(t);

    t = NULL;
    write_file("trace_engine.json", engine_c, 0);
    CHECK(rpt_trace_load("trace_engine.json", &t, err, sizeof err) == 0, "load engine: %s", err);
    if (t) {
        const rpt_trace_kernel *k = rpt_trace_kernel_at(t, 0);
        CHECK(k && strcmp(k->name, "decode_step") == 0 && k->total_ns == 2650500, "engine: step kernel");
        const rpt_trace_stream *s = find_stream(t, "0", "7");
        CHECK(s && s->busy_ns == 4150500, "engine: busy");
        rpt_trace_info info;
        rpt_trace_get_info(t, &info);
        CHECK(info.span_ns == 4500000, "engine: span");
    }
    rpt_trace_free(t);
}

/* Two threads of CPU events, written out of order, in µs. Thread 1:
 * annotation U [0,130] holds A [0,100] (holding B [10,40] holding C [20,30],
 * and D [50,60]) and E [100,120]; F [200,300] holds G [290,305], which ends
 * past F (rounding) and is clipped to it. Thread 2: H [0,50], overlapping A
 * in time but not nested in it. Step markers, a python_function, a trace
 * span and an op without dur are not operators. Self times: U 10, A 60, B 20,
 * C 10, D 10, E 20, F 90, G 10, H 50: 280 in all, 230 on thread 1. */
static const char *cpu_nested =
    "{\"traceEvents\":["
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"E\",\"pid\":1,\"tid\":1,\"ts\":100,\"dur\":20},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"C\",\"pid\":1,\"tid\":1,\"ts\":20,\"dur\":10},"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":130},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":100},"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"U\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":130},"
    "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"model.py(12): forward\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":400},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"H\",\"pid\":1,\"tid\":2,\"ts\":0,\"dur\":50},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":30},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"D\",\"pid\":1,\"tid\":1,\"ts\":50,\"dur\":10},"
    "{\"ph\":\"X\",\"cat\":\"Trace\",\"name\":\"PyTorch Profiler (0)\",\"pid\":\"Spans\",\"tid\":1,\"ts\":0,\"dur\":400},"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"pid\":1,\"tid\":1,\"ts\":200,\"dur\":110},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"G\",\"pid\":1,\"tid\":1,\"ts\":290,\"dur\":15},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"F\",\"pid\":1,\"tid\":1,\"ts\":200,\"dur\":100},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"nodur\",\"pid\":1,\"tid\":1,\"ts\":5}"
    "]}";

static const rpt_trace_kernel *find_cpu_op(const rpt_trace *t, const char *name)
{
    for (size_t i = 0; i < rpt_trace_n_cpu_ops(t); i++)
        if (strcmp(rpt_trace_cpu_op_at(t, i)->name, name) == 0)
            return rpt_trace_cpu_op_at(t, i);
    return NULL;
}

static void test_cpu_self_time(void)
{
    char err[512];
    rpt_trace *t = NULL;
    write_file("cpu_nested.json", cpu_nested, 0);
    CHECK(rpt_trace_load("cpu_nested.json", &t, err, sizeof err) == 0, "load nested: %s", err);
    if (!t)
        return;
    rpt_trace_info in;
    rpt_trace_get_info(t, &in);
    CHECK(in.gpu_events == 0 && in.cpu_events == 9 && in.cpu_late == 0, "nested: %llu GPU, %llu CPU, %llu late",
          (unsigned long long)in.gpu_events, (unsigned long long)in.cpu_events, (unsigned long long)in.cpu_late);
    CHECK(in.cpu_self_ns == 280000, "nested: self total %lld", (long long)in.cpu_self_ns);
    CHECK(in.steps == 2 && in.step_total_ns == 240000 && in.step_min_ns == 110000 && in.step_max_ns == 130000,
          "nested: steps %llu", (unsigned long long)in.steps);
    struct { const char *name; int64_t self_ns; } want[] = {
        {"U", 10000}, {"A", 60000}, {"B", 20000}, {"C", 10000}, {"D", 10000},
        {"E", 20000}, {"F", 90000}, {"G", 10000}, {"H", 50000},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const rpt_trace_kernel *k = find_cpu_op(t, want[i].name);
        CHECK(k && k->total_ns == want[i].self_ns && k->count == 1, "nested: %s self %lld want %lld", want[i].name,
              k ? (long long)k->total_ns : -1, (long long)want[i].self_ns);
    }
    CHECK(rpt_trace_n_cpu_ops(t) == 9 && strcmp(rpt_trace_cpu_op_at(t, 0)->name, "F") == 0, "nested: F first");
    CHECK(find_cpu_op(t, "ProfilerStep#1") == NULL && find_cpu_op(t, "model.py(12): forward") == NULL &&
          find_cpu_op(t, "PyTorch Profiler (0)") == NULL && find_cpu_op(t, "nodur") == NULL, "nested: non-operators");
    CHECK(rpt_trace_n_threads(t) == 2, "nested: threads %zu", rpt_trace_n_threads(t));
    const rpt_trace_stream *s = rpt_trace_thread_at(t, 0);
    CHECK(s && strcmp(s->tid, "1") == 0 && s->busy_ns == 230000 && s->events == 8, "nested: thread 1");
    rpt_trace_free(t);

    /* An event far behind its thread's released order is counted late, whole. */
    FILE *f = fopen("cpu_late.json", "w");
    CHECK(f != NULL, "fopen cpu_late.json");
    if (!f)
        return;
    fputs("{\"traceEvents\":[", f);
    for (int i = 0; i < RPT_CPU_REORDER + 10; i++)
        fprintf(f, "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op\",\"pid\":1,\"tid\":1,\"ts\":%d,\"dur\":1},",
                10 + 2 * i);
    fputs("{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"old\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":5}]}", f);
    fclose(f);
    t = NULL;
    CHECK(rpt_trace_load("cpu_late.json", &t, err, sizeof err) == 0, "load late: %s", err);
    if (t) {
        rpt_trace_get_info(t, &in);
        const rpt_trace_kernel *k = find_cpu_op(t, "old");
        CHECK(in.cpu_late == 1 && k && k->total_ns == 5000, "late: %llu", (unsigned long long)in.cpu_late);
        CHECK(in.cpu_self_ns == (RPT_CPU_REORDER + 10) * 1000LL + 5000, "late: total %lld", (long long)in.cpu_self_ns);
    }
    rpt_trace_free(t);
}

/* The real torch.profiler trace: a linear-heavy block on the CPU, 3 steps. */
static void test_cpu_real_trace(void)
{
    char err[512];
    rpt_trace *t = NULL;
    const char *path = TRACE_FIXTURES "/cpu_trace.pt.trace.json.gz";
    CHECK(rpt_trace_load(path, &t, err, sizeof err) == 0, "load real: %s", err);
    if (!t)
        return;
    rpt_trace_info in;
    rpt_trace_get_info(t, &in);
    CHECK(in.gpu_events == 0 && in.cpu_events == 288 && in.steps == 3 && in.cpu_late == 0,
          "real: %llu GPU, %llu CPU, %llu steps", (unsigned long long)in.gpu_events,
          (unsigned long long)in.cpu_events, (unsigned long long)in.steps);
    /* 20792.564 µs of self time by an independent sweep over the same file
     * (Python, sorted by start, the same clipping); never more than the span */
    CHECK(in.cpu_self_ns > 20792000 && in.cpu_self_ns < 20793200 && in.cpu_self_ns <= in.span_ns,
          "real: self %lld span %lld", (long long)in.cpu_self_ns, (long long)in.span_ns);
    const rpt_trace_kernel *k = rpt_trace_cpu_op_at(t, 0);
    CHECK(k && strcmp(k->name, "aten::addmm") == 0 && k->count == 12, "real: top op %s", k ? k->name : "-");
    k = find_cpu_op(t, "aten::linear");
    CHECK(k && k->total_ns < 200000, "real: aten::linear's self time excludes its addmm");
    rpt_categories *c = NULL;
    CHECK(rpt_categories_new(&c, err, sizeof err) == 0, "categories: %s", err);
    if (c) {
        int64_t gemm = 0, attn = 0, copies = 0;
        for (size_t i = 0; i < rpt_trace_n_cpu_ops(t); i++) {
            const rpt_trace_kernel *o = rpt_trace_cpu_op_at(t, i);
            const char *cat = rpt_categories_classify(c, o->name);
            gemm += strcmp(cat, "GEMM") == 0 ? o->total_ns : 0;
            attn += strcmp(cat, "attention") == 0 ? o->total_ns : 0;
            copies += strcmp(cat, "elementwise & copies") == 0 ? o->total_ns : 0;
        }
        CHECK(gemm > in.cpu_self_ns / 2 && gemm > attn && gemm > copies && attn > 0 && copies > 0,
              "real: GEMM %lld attention %lld copies %lld", (long long)gemm, (long long)attn, (long long)copies);
        rpt_categories_free(c);
    }
    rpt_trace_free(t);
}

static void test_categories_and_names(void)
{
    char err[256], buf[512];
    rpt_categories *c = NULL;
    CHECK(rpt_categories_new(&c, err, sizeof err) == 0, "categories: %s", err);
    if (!c)
        return;
    struct { const char *name, *cat; } cases[] = {
        {"void flash_fwd_kernel<X>(P)", "attention"},
        {"_tiled_sparse_decode_kernel", "attention"},
        {"ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication"},
        {"void cutlass::Kernel2<cutlass_80_simt_sgemm_64x128_8x5_tn_align1>(Params)", "GEMM"},
        {"nvjet_tst_128x64_64x8", "GEMM"},
        {"fused_moe_kernel", "MoE"},
        {"void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda>", "elementwise & copies"},
        {"Memset (Device)", "elementwise & copies"},
        {"rotary_embedding_kernel", "other"},
        /* CPU operators (vLLM's CPU backend, aten) */
        {"_C::onednn_mm", "GEMM"},
        {"aten::addmm", "GEMM"},
        {"aten::linear", "GEMM"},
        {"_C::cpu_attention_with_kv_cache", "attention"},
        {"aten::_scaled_dot_product_flash_attention_for_cpu", "attention"},
        {"_C_cache_ops::reshape_and_cache", "elementwise & copies"},
        {"aten::copy_", "elementwise & copies"},
        {"aten::to", "elementwise & copies"},
        {"aten::mul", "elementwise & copies"},
        {"_C::silu_and_mul", "elementwise & copies"},
        {"c10d::allreduce_", "communication"},
        {"aten::view", "other"},
        {"aten::mmap_thing", "other"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(strcmp(rpt_categories_classify(c, cases[i].name), cases[i].cat) == 0, "%s -> %s (want %s)",
              cases[i].name, rpt_categories_classify(c, cases[i].name), cases[i].cat);
    CHECK(rpt_categories_set(c, "rope=rotary", err, sizeof err) == 0, "set rope: %s", err);
    CHECK(strcmp(rpt_categories_classify(c, "rotary_embedding_kernel"), "rope") == 0, "user category");
    CHECK(rpt_categories_set(c, "GEMM=xyzzy", err, sizeof err) == 0, "replace GEMM");
    CHECK(strcmp(rpt_categories_classify(c, "nvjet_tst_128x64"), "other") == 0, "GEMM replaced");
    CHECK(rpt_categories_set(c, "bad", err, sizeof err) == LL_EINVAL && strstr(err, "NAME=REGEX"), "no '='");
    CHECK(rpt_categories_set(c, "x=(unclosed", err, sizeof err) == LL_EINVAL && strstr(err, "compile"), "bad regex");
    CHECK(rpt_categories_count(c) == 7, "count %zu", rpt_categories_count(c));
    rpt_categories_free(c);

    CHECK(strcmp(rpt_kernel_short_name("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(Flash_fwd_params)",
                                       0, buf, sizeof buf), "flash_fwd_kernel") == 0, "short 1: %s", buf);
    CHECK(strcmp(rpt_kernel_short_name("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x128_8x5_tn_align1>(Params)",
                                       0, buf, sizeof buf),
                 "cutlass::Kernel2<cutlass_80_simt_sgemm_64x128_8x5_tn_align1>") == 0, "short 2: %s", buf);
    CHECK(strcmp(rpt_kernel_short_name("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<"
                                       "at::native::CUDAFunctor_add<float>>(at::TensorIteratorBase&)::{lambda(int)#1}>"
                                       "(int, at::native::(anonymous namespace)::F)", 0, buf, sizeof buf),
                 "at::native::elementwise_kernel") == 0, "short 3: %s", buf);
    CHECK(strcmp(rpt_kernel_short_name("Memcpy DtoD (Device -> Device)", 0, buf, sizeof buf), "Memcpy DtoD") == 0,
          "short 4: %s", buf);
    rpt_kernel_short_name("a_very_long_kernel_name_that_goes_on_and_on", 20, buf, sizeof buf);
    CHECK(strlen(buf) == 20 && strcmp(buf + 17, "...") == 0, "ellipsis: %s", buf);
}

/* The union against a bitmap, with events out of order inside the window. */
static void test_busy_union(void)
{
    enum { SPAN = 20000, N = 3000 };
    static unsigned char bitmap[SPAN];
    memset(bitmap, 0, sizeof bitmap);
    rpt_busy b;
    memset(&b, 0, sizeof b);
    ll_rng r;
    ll_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) {
        int64_t s = (int64_t)(ll_rng_uniform(&r) * (SPAN - 50));
        int64_t d = (int64_t)(ll_rng_uniform(&r) * 12);
        for (int64_t k = s; k < s + d; k++)
            bitmap[k] = 1;
        if (rpt_busy_add(&b, s, s + d) != 0)
            CHECK(0, "rpt_busy_add failed");
    }
    int64_t want = 0, got = -1;
    for (int k = 0; k < SPAN; k++)
        want += bitmap[k];
    CHECK(rpt_busy_total_ns(&b, &got) == 0 && got == want, "random union: got %lld want %lld", (long long)got,
          (long long)want);
    CHECK(b.late == 0, "no late events");
    rpt_busy_free(&b);

    /* In order beyond the window: memory stays at the window, the sum stays exact. */
    for (int64_t i = 0; i < 3 * RPT_BUSY_WINDOW; i++)
        rpt_busy_add(&b, 10 * i, 10 * i + 4);
    CHECK(b.n <= RPT_BUSY_WINDOW, "window bound: %zu", b.n);
    CHECK(rpt_busy_total_ns(&b, &got) == 0 && got == 4 * 3 * RPT_BUSY_WINDOW, "folded sum");
    rpt_busy_add(&b, 0, 100); /* far behind the frontier */
    CHECK(b.late == 1, "late counted");
    rpt_busy_free(&b);

    /* A device row sees one stream's kernels, then another's (Kineto may
     * group them): 30000 + 30000 events, the second set half-overlapping the
     * first. Exact, and no late events. */
    for (int64_t i = 0; i < 30000; i++)
        rpt_busy_add(&b, 10 * i, 10 * i + 4);
    for (int64_t i = 0; i < 30000; i++)
        rpt_busy_add(&b, 10 * i + 2, 10 * i + 6);
    CHECK(rpt_busy_total_ns(&b, &got) == 0 && got == 6 * 30000, "grouped streams: %lld", (long long)got);
    CHECK(b.late == 0 && b.n == 30000, "grouped: late %llu n %zu", (unsigned long long)b.late, b.n);
    rpt_busy_free(&b);
}

static void test_bad_input(void)
{
    char err[512];
    rpt_trace *t = NULL;
    CHECK(rpt_trace_load("/nonexistent/trace.json", &t, err, sizeof err) == LL_EIO && t == NULL, "missing file");
    CHECK(strstr(err, "/nonexistent/trace.json") != NULL, "message names the file: %s", err);
    write_file("bad_trunc.json", "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,", 0);
    CHECK(rpt_trace_load("bad_trunc.json", &t, err, sizeof err) == LL_EPARSE, "truncated: %s", err);
    write_file("bad_syntax.json", "{\"traceEvents\":[{\"ph\" \"X\"}]}", 0);
    CHECK(rpt_trace_load("bad_syntax.json", &t, err, sizeof err) == LL_EPARSE && strstr(err, "byte"),
          "syntax: %s", err);
    write_file("not_trace.json", "{\"hello\":[1,2,3]}", 0);
    CHECK(rpt_trace_load("not_trace.json", &t, err, sizeof err) == LL_EPARSE && strstr(err, "traceEvents"),
          "not a trace: %s", err);
    /* GPU events without a numeric ts or dur are counted and left out; a CPU
     * op without dur still spans, a CPU op without ts is not GPU input. */
    write_file("bad_fields.json",
               "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":10,\"dur\":5},"
               "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":\"20\",\"dur\":5},"
               "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":30},"
               "{\"ph\":\"X\",\"name\":\"m\",\"ts\":40,\"dur\":-1,\"args\":{\"stream\":7}},"
               "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"c\",\"ts\":50},"
               "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"c\",\"dur\":9}]}", 0);
    CHECK(rpt_trace_load("bad_fields.json", &t, err, sizeof err) == 0, "bad fields load: %s", err);
    if (t) {
        rpt_trace_info in;
        rpt_trace_get_info(t, &in);
        CHECK(in.events == 6 && in.gpu_events == 1 && in.bad_events == 3,
              "bad fields: %llu events, %llu GPU, %llu bad", (unsigned long long)in.events,
              (unsigned long long)in.gpu_events, (unsigned long long)in.bad_events);
        CHECK(in.gpu_total_ns == 5000 && in.span_ns == 40000, "bad fields: GPU %lld ns, span %lld ns",
              (long long)in.gpu_total_ns, (long long)in.span_ns);
        rpt_trace_free(t);
        t = NULL;
    }
    /* ts + dur past int64 (a corrupt or hostile file): left out and counted,
     * never added (signed overflow); the sane kernel beside it is kept. */
    write_file("bad_huge.json",
               "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":9000000000000000,"
               "\"dur\":9000000000000000},{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":2},"
               "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"c\",\"ts\":-9000000000000000,\"dur\":1},"
               "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":3,\"dur\":9000000000000}]}", 0);
    CHECK(rpt_trace_load("bad_huge.json", &t, err, sizeof err) == 0, "huge fields load: %s", err);
    if (t) {
        rpt_trace_info in;
        rpt_trace_get_info(t, &in);
        CHECK(in.gpu_events == 1 && in.bad_events == 2 && in.gpu_total_ns == 2000 && in.span_ns == 2000,
              "huge fields: %llu GPU, %llu bad, GPU %lld ns, span %lld ns", (unsigned long long)in.gpu_events,
              (unsigned long long)in.bad_events, (long long)in.gpu_total_ns, (long long)in.span_ns);
        rpt_trace_free(t);
        t = NULL;
    }
    write_file("empty.json", "", 0);
    CHECK(rpt_trace_load("empty.json", &t, err, sizeof err) == LL_EPARSE, "empty: %s", err);
    CHECK(t == NULL, "no object on failure");
}

static void test_print(void)
{
    char err[256];
    rpt_trace *t[2] = {NULL, NULL};
    const char *labels[2] = {"rank0", "rank1"};
    if (rpt_trace_load("trace_a.json", &t[0], err, sizeof err) || rpt_trace_load("trace_a.json.gz", &t[1], err, sizeof err)) {
        CHECK(0, "load for print: %s", err);
        goto out;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    rpt_trace_print_opts o = {.top = 3};
    CHECK(rpt_trace_print(f, t, labels, 2, &o, err, sizeof err) == 0, "print: %s", err);
    fclose(f);
    /* nccl: 300 µs per rank -> 0.60 ms over both, share 300/759.75 = 39.5% */
    CHECK(strstr(text, " 39.5%       0.60         2      300.0       0.30       0.30  ncclDevKernel_AllReduce_Sum_f32_RING_LL") != NULL,
          "nccl row:\n%s", text);
    CHECK(strstr(text, "(2 more)") != NULL, "rest row");
    CHECK(strstr(text, "communication") && strstr(text, "attention") && strstr(text, "rank1"), "tables:\n%s", text);
    /* device 0 all streams: 310.25 / 700 = 44.3% */
    CHECK(strstr(text, "device 0 all streams") && strstr(text, " 44.3%"), "busy:\n%s", text);
    free(text);

    text = NULL;
    f = open_memstream(&text, &len);
    o.json = 1;
    CHECK(rpt_trace_print(f, t, labels, 1, &o, err, sizeof err) == 0, "json: %s", err);
    fclose(f);
    cJSON *j = cJSON_ParseWithOpts(text, NULL, 1);
    CHECK(j != NULL, "json parses");
    cJSON *k0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "kernels"), 0);
    CHECK(k0 && ll_json_num(k0, "total_us", 0) == 300 && strcmp(ll_json_str(k0, "category", ""), "communication") == 0,
          "json kernel 0");
    cJSON_Delete(j);
    free(text);
out:
    rpt_trace_free(t[0]);
    rpt_trace_free(t[1]);
}

/* `loadlaw trace` itself: exit codes, --category, --top, --wide. */
static void test_cli(const char *bin)
{
    char cmd[2048], err[256], *out = NULL;
    size_t len;
    struct { const char *args; int want; } cases[] = {
        {"", 2}, {"--top 0 trace_a.json", 2}, {"--category nope trace_a.json", 2},
        {"--bogus trace_a.json", 2}, {"/nonexistent.json", 1}, {"bad_syntax.json", 1}, {"--help", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s trace %s > /dev/null 2>&1", bin, cases[i].args);
        CHECK(tu_sh(cmd) == cases[i].want, "'trace %s' want exit %d", cases[i].args, cases[i].want);
    }
    snprintf(cmd, sizeof cmd, "%s trace trace_a.json trace_b.json.gz --top 2 --category 'copies=memcpy|memset' "
                              "--category 'attention=xyzzy' > cli.out 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "trace two files");
    if (ll_read_file("cli.out", &out, &len, err, sizeof err) == 0) {
        CHECK(strstr(out, "[2] trace_b.json.gz") != NULL, "per-file legend:\n%s", out);
        CHECK(strstr(out, "  copies ") != NULL && strstr(out, "  attention ") == NULL, "user categories:\n%s", out);
        CHECK(strstr(out, "(5 more)") != NULL, "--top 2 leaves 5 of 7 rows:\n%s", out);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s trace trace_a.json --wide > cli_wide.out 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "trace --wide");
    if (ll_read_file("cli_wide.out", &out, &len, err, sizeof err) == 0) {
        CHECK(strstr(out, "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>(Flash_fwd_params)") != NULL,
              "full names with --wide:\n%s", out);
        free(out);
    }
}

/* CPU traces through the command: two files together (each named, each
 * file's share), a directory, JSON; a GPU trace with CPU ops stays a GPU one. */
static void test_cli_cpu(const char *bin)
{
    char cmd[2048], err[256], *out = NULL;
    size_t len;
    const char *real = TRACE_FIXTURES "/cpu_trace.pt.trace.json.gz";
    CHECK(tu_sh("rm -rf cpu_dir && mkdir cpu_dir && cp " TRACE_FIXTURES "/cpu_trace.pt.trace.json.gz "
                "cpu_dir/worker.pt.trace.json.gz && cp cpu_nested.json cpu_dir/api_server.json && "
                "touch cpu_dir/notes.txt") == 0, "cpu_dir");
    snprintf(cmd, sizeof cmd, "%s trace cpu_dir > cli_cpu.out 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "trace a directory");
    if (ll_read_file("cli_cpu.out", &out, &len, err, sizeof err) == 0) {
        /* 0.28 ms of 21.07 ms in all: 1.3% and 98.7%; names in order */
        CHECK(strstr(out, "[1] cpu_dir/api_server.json: 14 events, 0 on the GPU") &&
              strstr(out, "1.3% of the files' operator time") && strstr(out, "[2] cpu_dir/worker.pt.trace.json.gz") &&
              strstr(out, "98.7% of the files' operator time") && !strstr(out, "notes.txt"), "directory:\n%s", out);
        CHECK(strstr(out, "CPU operators (no GPU events)") && strstr(out, "top CPU operators by self time (all files)"),
              "CPU header:\n%s", out);
        char *row = strstr(out, "  operator\n"), *eol = row ? strchr(row + 11, '\n') : NULL;
        if (eol)
            *eol = '\0'; /* the first row alone */
        CHECK(row && strstr(row + 11, "aten::addmm"), "addmm first: %s", row ? row : out);
        if (eol)
            *eol = '\n';
        char *cats = strstr(out, "by category");
        CHECK(cats && strstr(cats, "ms/step") && strstr(cats, "GEMM ") && strstr(cats, "pid "), "categories:\n%s", out);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s trace %s cpu_nested.json --json > cli_cpu.json 2>&1", bin, real);
    CHECK(tu_sh(cmd) == 0, "trace --json on CPU traces");
    if (ll_read_file("cli_cpu.json", &out, &len, err, sizeof err) == 0) {
        cJSON *j = cJSON_ParseWithOpts(out, NULL, 1);
        CHECK(j && strcmp(ll_json_str(j, "breakdown", ""), "cpu") == 0, "json breakdown");
        cJSON *o0 = j ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "operators"), 0) : NULL;
        CHECK(o0 && strcmp(ll_json_str(o0, "name", ""), "aten::addmm") == 0 &&
              strcmp(ll_json_str(o0, "category", ""), "GEMM") == 0, "json operator 0");
        cJSON *f1 = j ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 1) : NULL;
        CHECK(f1 && ll_json_num(f1, "cpu_self_us", 0) == 280 && ll_json_num(f1, "steps", 0) == 2, "json file 1");
        cJSON_Delete(j);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s trace trace_a.json > cli_gpu.out 2>&1", bin);
    CHECK(tu_sh(cmd) == 0, "GPU trace");
    if (ll_read_file("cli_gpu.out", &out, &len, err, sizeof err) == 0) {
        CHECK(strstr(out, "top kernels by total GPU time") && !strstr(out, "CPU operators"), "GPU stays GPU:\n%s", out);
        free(out);
    }
    CHECK(tu_sh("mkdir -p empty_dir") == 0, "empty_dir");
    snprintf(cmd, sizeof cmd, "%s trace empty_dir > /dev/null 2>&1", bin);
    CHECK(tu_sh(cmd) == 2, "a directory without traces is a usage error");
}

int main(int argc, char **argv)
{
    test_fixtures();
    test_cpu_self_time();
    test_cpu_real_trace();
    test_categories_and_names();
    test_busy_union();
    test_bad_input();
    test_print();
    if (argc > 1) {
        test_cli(argv[1]);
        test_cli_cpu(argv[1]);
    }
    TEST_MAIN_END();
}
