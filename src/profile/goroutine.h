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
 * records as the profile's collect, but each thread's state is the one
 * its first look found, and a running thread's answer is waited for (at
 * most wait_ns) even when it sleeps meanwhile, so that its stack is of
 * its next moment on a CPU; one that did not answer by then is read from
 * /proc if it sleeps, still recorded as running. Normal context. */
CPROF__HIDDEN int cprof__goroutine_sample(cprof__records *out,
                                          int64_t wait_ns);

/* Figures for the last collection: how many threads it listed, how many
 * stacks it got, how many of those were read from /proc, how many
 * running threads were sampled by perf events (and how many of those
 * answered that way), how many were asked for the signal
 * (cprof__task_ask_on_cpu),
 * how many of those went to sleep first and were read instead, and how
 * many could not be asked (no timer); how many looks past the deadline
 * waited on for a thread still waiting for a CPU; the whole collection's
 * wall time and the slowest answer; and, over the process's life, how many signals
 * the handler found had cut a system call short (never expected to be
 * nonzero), and how many threads were sampled by perf events and asked
 * for the signal in all. Thread-safe. */
typedef struct cprof__goroutine_stats {
  int threads, answered, read, signalled, slept, no_timer, perf,
      perf_answered, starved_waits;
  int64_t total_ns, max_answer_ns, interrupted;
  int64_t perf_total, signalled_total; /* over the process's life */
} cprof__goroutine_stats;
CPROF__HIDDEN void cprof__goroutine_last_stats(cprof__goroutine_stats *out);

/* Reads CPROF_THREADS_SIGNAL (once; init calls it at load, so a bad
 * value is reported then). */
CPROF__HIDDEN void cprof__goroutine_env_init(void);

#endif
