/*
 * The goroutine profile, named "goroutine" as in Go and also reachable as
 * "threads": the current stack of every thread of the process. Each thread
 * is sent a real-time signal (SIGRTMIN+5 unless CPROF_THREADS_SIGNAL says
 * another offset from SIGRTMIN) and walks its own stack in the handler; the
 * collector waits a bounded time for each answer, so a thread that blocks
 * the signal or does not answer is reported with a synthetic frame, never
 * waited for forever. Threads are asked one at a time, so each stops only
 * for its own stack walk.
 *
 * debug=0 pprof goroutine/count, debug=1 grouped by stack, debug=2 one
 * block per thread with its tid, state and name from /proc.
 */
#ifndef CPROF_GOROUTINE_H
#define CPROF_GOROUTINE_H

#include <stdint.h>

#include "profile/registry.h"

CPROF__HIDDEN extern const cprof__profile_def cprof__goroutine_profile;

/* Figures for the last collection: how many threads were asked, how many
 * answered, the whole collection's wall time and the slowest single
 * answer (signal sent to stack copied). Thread-safe. */
typedef struct cprof__goroutine_stats {
  int threads, answered;
  int64_t total_ns, max_answer_ns;
} cprof__goroutine_stats;
CPROF__HIDDEN void cprof__goroutine_last_stats(cprof__goroutine_stats *out);

#endif
