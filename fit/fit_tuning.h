/* fit_tuning.h (internal to fit/): the thresholds the analysis judges by,
 * each with why it has its value. The figures they judge are defined at the
 * top of the file named beside each group. */
#ifndef LOADLAW_FIT_TUNING_H
#define LOADLAW_FIT_TUNING_H

/* ---- reading the run (load.c, load_paged.c) -------------------------------- */

/* A run is held whole (every request, 320 bytes, and every chunk, 16 bytes a
 * token event) up to this many chunk events: 64 MB of chunks, a quarter of
 * the 256 MB that `fit` may take on any run (issue 42), the rest left to one
 * level's analysis. Past it the run is paged (fit_internal.h): 16 bytes a
 * request line and one level read back at a time, its chunks decoded from
 * the file per request. Runs under it are read exactly as before. */
#define FIT_RESIDENT_EVENTS ((size_t)1 << 22)

/* ---- the law (regress.c, analyze_law.c) ----------------------------------- */

/* Outliers of the law's fit: more than this many robust standard deviations
 * from the median of their N's points (from the bisquare line where an N has
 * too few points to judge: regress.c judge_by_level), never a level's bulk.
 * Exponential jitter puts 1e-4 of its mass beyond that (its mean moves by
 * 0.1% of the jitter; at 8 the law sat 0.8 standard errors low with 30%
 * exponential jitter); a stall of several steps is far beyond it. */
#define FIT_TRIM_SD 12.0

/* One engine step as the client sees it (analyze_law.c "One engine step"):
 * steady samples of one level with the same N join the step of the first
 * while they arrive within this share of their OWN gap after it. */
#define FIT_STEP_GROUP_FRAC 0.5

/* reduce.c "Steps kept": the engine steps kept for the law, the model family
 * and compare's units, run-wide, at most this many; past it every level
 * keeps 1 in 2^j of its steps, the same j for all (so every level keeps its
 * share and an unweighted fit sees the same mix). A step is one point of
 * the law: at C = 1 one a token, so a billion-token run would hold ~0.3
 * billion. 2^19 steps: 20 MB kept, and the law's robust fit and the model
 * check over them (~150 bytes a point) stay under ~100 MB, where the
 * sampling error of the law's coefficients is far inside their interval. */
#define FIT_STEPS_KEEP ((size_t)1 << 19)

/* load.c: the engine's own step records (a bundled engine's run writes one a
 * step) kept for its law and the report, at most this many; past it 1 in
 * 2^j, evenly through the run, noted: 48 bytes a record, 24 MB at most. */
#define FIT_ENGINE_STEPS_KEEP ((size_t)1 << 19)

/* The report's step charts (reduce.c "Chart sample"): up to this many step
 * samples of each kind (steady, other) are kept whole, so a run of that size
 * charts exactly as when every sample was held; past it every second one of
 * those kept is let go and the stride doubles. 24 bytes a point: at most
 * ~12.6 MB for both kinds, whatever the run's length. */
#define FIT_CHART_KEEP ((size_t)1 << 18)
/* naive.c: the naive fit (every gap) keeps its points up to this many, so a
 * run of that size gets fit_line's figures to the bit; past it, running sums
 * (16 bytes a sample and fit_line's copies of as many are what it saves).
 * Distinct N counted exactly up to FIT_NAIVE_DISTINCT (a 1 MB set). */
#define FIT_NAIVE_KEEP ((size_t)1 << 20)
#define FIT_NAIVE_DISTINCT ((size_t)1 << 16)
/* figures.c: a level's latency figures of one kind (ITL: one value an event)
 * are exact percentiles of the sorted values up to this many, then from a
 * log-bucketed histogram (common ll_pct, LL_PCT_REL_ERR) that a note names:
 * 8 MB a kind at most, not 8 bytes an event. */
#define FIT_PCT_EXACT ((size_t)1 << 20)
/* stream.c: a level with more chunks than this (fit_options.stream_events
 * 0) is walked as one time-ordered sweep that holds no per-event array (its
 * K line alone is 16 bytes a chunk, its samples 56); at or below it, the
 * exact walk, whose output every run of that size already had. The exact
 * walk holds ~90 bytes a chunk at its peak (samples, K line, the steps'
 * sort, the gaps at C): 2^20 chunks keep that under ~100 MB, while every
 * recorded run and test of the usual size stays on it. The sweep gives the
 * same figures to ~1e-14 (tests/fit test_fit_stream.c), past
 * fit_options.stream_exact gaps its burst share and median step from a
 * histogram, noted. */
#define FIT_STREAM_EVENTS ((size_t)1 << 20)
/* model_stream.c: past this many points a model's fit makes each row of its
 * design on the fly (sequential QR) instead of GSL's n x p matrix and its
 * copy; up to it, GSL's fit exactly as before. */
#define FIT_MODEL_STREAM_MIN ((size_t)1 << 20)

/* ---- the model family (model.c) -------------------------------------------- */

/* The context term is identifiable only when K does not move with N: over
 * the law's points, |corr(N, K)| above this leaves it "not identifiable from
 * this run" (vary prompt lengths, load.vary_context). */
#define FIT_CONTEXT_COLLINEAR 0.995

/* ---- reads in bursts, and a client that set the pace (analyze.c) ---------- */

/* A level is noted as unreliable when more than FIT_BURST_NOTE_FRAC of its
 * samples are shorter than a tenth of its 90th-percentile gap (with at least
 * FIT_BURST_MIN_SAMPLES). The 75th percentile stays a real step until three
 * quarters of the gaps are bursts, where a median or a law fitted on the same
 * gaps would already be dragged down. Only reported: the law keeps the
 * samples (a burst gap is not steady-state timing, but dropping it would
 * hide the tokens its neighbour's long gap carried). */
#define FIT_BURST_MIN_SAMPLES 20
#define FIT_BURST_NOTE_FRAC 0.05

/* The client set a level's pace (fit_level.client_bound) when any of:
 *  - its busiest worker thread was on a CPU at least FIT_CLIENT_BUSY_FRAC of
 *    the level's wall time: a saturated read loop, whose lag, not the
 *    server's steps, spaces the arrivals;
 *  - it parsed at least FIT_CLIENT_EVENTS_PER_READ token chunks per socket
 *    read AND the level's gaps were bursts (burst_gap_frac over
 *    FIT_BURST_NOTE_FRAC): reads that each collect several steps;
 *  - its median gap was under FIT_CLIENT_GAP_FRAC of the engine's own step
 *    at C (engine step records, else the run line's law): one stream cannot
 *    see tokens faster than the engine steps.
 * The burst check alone is relative to the level's own gaps and misses a
 * level whose gaps are all bursts; these are absolute. */
#define FIT_CLIENT_BUSY_FRAC 0.9
#define FIT_CLIENT_EVENTS_PER_READ 2.0
#define FIT_CLIENT_GAP_FRAC 0.5

/* ---- notes on prompts and the server's cache (analyze_notes.c, said.c) ---- */

/* Prompt drift worth a note: the server's mean prompt tokens against those
 * built to a length with a tokenizer. */
#define FIT_PROMPT_DRIFT_FRAC 0.02
/* The same against a length asked without a tokenizer (built as words: an
 * estimate; give --tokenizer for exact lengths). */
#define FIT_PROMPT_EST_DRIFT_FRAC 0.05
/* A sweep's prompts are fresh unless its scenario shares them: a cached
 * share above this is noted (TTFT then measures the cache, not prefill).
 * Below it: a chat template's opening, the same for every request (~10
 * tokens), served from the cache by servers that cache per token. */
#define FIT_CACHE_NOTE_FRAC 0.10

/* ---- the server's figures (server.c) --------------------------------------- */

/* A closed-loop level's server N disagrees with the client's D = C when
 * |N - C| > FIT_SERVER_N_REL * C + FIT_SERVER_N_ABS (another tenant, or a
 * server that caps its batch). */
#define FIT_SERVER_N_REL 0.10
#define FIT_SERVER_N_ABS 1.0
/* SGLang refreshes its gauges every --decode-log-interval steps (default
 * 40): a gen_throughput that held one value longer than this while the
 * level ran is noted. */
#define FIT_SGLANG_STALE_S 2.0

/* ---- the GPU diagnosis (gpu.c), first rule that holds ---------------------- */

/* latency-bound: SM >= FIT_DIAG_SM_BUSY, tensor and DRAM < FIT_DIAG_LOW,
 * power < FIT_DIAG_POWER_LOW of the limit: SMs wait on launches and small
 * per-head work (the story: 340 W of 600 W). */
#define FIT_DIAG_SM_BUSY 0.8
#define FIT_DIAG_LOW 0.3
#define FIT_DIAG_POWER_LOW 0.7
/* compute-bound: tensor >= FIT_DIAG_TENSOR_HIGH, power >= FIT_DIAG_POWER_CAP. */
#define FIT_DIAG_TENSOR_HIGH 0.5
#define FIT_DIAG_POWER_CAP 0.9
/* bandwidth-bound: DRAM >= FIT_DIAG_DRAM_PEAK. */
#define FIT_DIAG_DRAM_PEAK 0.7
/* admission-bound: the server's waiting requests grew by this much across
 * the level (the server, not the GPU, holds them back). */
#define FIT_DIAG_WAIT_GROWTH 1.0

#endif
