/* bench_mutex built without cprof: the baseline. */
#define BENCH_PLAIN 1
#include "bench_mutex.c"
