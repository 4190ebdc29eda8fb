/*
 * The goroutine profile, named "goroutine" as in Go and also reachable as
 * "threads": the current stack of every thread of the process but cprof's
 * own. A thread stopped in the kernel (blocked in a system call, asleep)
 * is read from /proc/self/task/TID/syscall and its stack walked from
 * there, without touching it; only a thread the kernel reports running is
 * sent a real-time signal (SIGRTMIN+5 unless CPROF_THREADS_SIGNAL says
 * another offset from SIGRTMIN) and walks its own stack in the handler.
 * All running threads are asked at once and waited for with one bounded
 * deadline, so a thread that blocks the signal or does not answer is
 * reported with a synthetic frame, never waited for forever.
 *
 * debug=0 pprof goroutine/count, debug=1 grouped by stack, debug=2 one
 * block per thread with its tid, state, system call and name from /proc
 * and the "created by" frame; ?seconds=N a delta, as Go serves it.
 */
#ifndef CPROF_GOROUTINE_H
#define CPROF_GOROUTINE_H

#include <stdint.h>

#include "profile/registry.h"

CPROF__HIDDEN extern const cprof__profile_def cprof__goroutine_profile;

/* One collection as a sampler wants it (the wall profile): the same
 * records as the profile's collect, but each running thread is signalled
 * as soon as it is seen running and waited for before the next thread is
 * looked at, so that every thread's state and stack are as of one moment
 * (a batched collection looks again at running threads only after it has
 * read all the others, and a thread that went to sleep meanwhile would be
 * counted in its wait). Normal context. */
CPROF__HIDDEN int cprof__goroutine_sample(cprof__records *out);

/* Figures for the last collection: how many threads it listed, how many
 * stacks it got, how many of those were read from /proc and how many
 * threads were sent the signal, the whole collection's wall time and the
 * slowest answer to the signal; and, over the process's life, how many
 * signals the handler found had cut a system call short (never expected
 * to be nonzero). Thread-safe. */
typedef struct cprof__goroutine_stats {
  int threads, answered, read, signalled;
  int64_t total_ns, max_answer_ns, interrupted;
} cprof__goroutine_stats;
CPROF__HIDDEN void cprof__goroutine_last_stats(cprof__goroutine_stats *out);

#endif
