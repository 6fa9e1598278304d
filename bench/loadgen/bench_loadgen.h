/* bench_loadgen.h (internal to bench/loadgen/): the benchmarks that
 * bench_loadgen.c's main runs from the folder's other files. Each prints its
 * figures to stdout and its failures to stderr; none stops the others. */
#ifndef LOADLAW_BENCH_LOADGEN_H
#define LOADLAW_BENCH_LOADGEN_H

/* bench_itl.c: one level of C streams on the in-process engine `spec`
 * (an eng_parse_spec string), max_tokens per request, on `threads` loadgen
 * workers; stamp: the client's load.arrival_stamp ("kernel" or "user").
 * Prints the ITL error against the engine's true steps, the delay's split
 * and the client's own figures. */
void bench_itl(int C, const char *spec, int max_tokens, int threads, const char *stamp);

/* bench_stamp.c: C loopback socket pairs, one 288-byte frame on each every
 * 30 ms for `steps` steps; prints kernel stamp - write() and read - write(). */
void bench_stamp(int C, int steps);

#endif
