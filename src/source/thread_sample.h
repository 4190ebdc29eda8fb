/*
 * Thread sampling: the current stack of every thread of the process but
 * cprof's own, taken without interrupting a thread that is blocked. A
 * thread stopped in the kernel (blocked in a system call, asleep) is read
 * from /proc/self/task/TID/syscall and its stack walked from there; a
 * running thread is sampled by a perf event where the kernel allows it,
 * else sent a real-time signal (SIGRTMIN+5 unless CPROF_THREADS_SIGNAL
 * says another offset from SIGRTMIN) and walks its own stack in the
 * handler. All running threads are asked at once and waited for with one
 * bounded deadline, so a thread that blocks the signal or does not answer
 * is reported with a synthetic frame, never waited for forever.
 *
 * The goroutine profile lists what it collects; the wall profile samples
 * it at a fixed rate. Each record is one thread: its stack, the tid as
 * the tag, and values {1, the state letter from /proc, how the stack was
 * taken, the system call it waits in + 1 (0: none)}. Normal context; the
 * handler is async-signal-safe.
 */
#ifndef CPROF_THREAD_SAMPLE_H
#define CPROF_THREAD_SAMPLE_H

#include <stdint.h>

#include "base/internal.h"
#include "capture/records.h"

/* Every thread's stack now, as the goroutine profile lists them: objects
 * loaded since the last collection get their unwind tables first. Returns
 * 0 or a cprof_err. */
CPROF__HIDDEN int cprof__thread_sample_all(cprof__records *out);

/* How many threads there are, cprof's own left out (the index page's
 * count). */
CPROF__HIDDEN long cprof__thread_sample_count(void);

/* One collection as a sampler wants it (the wall profile): the same
 * records as cprof__thread_sample_all, but each thread's state is the one
 * its first look found, and a running thread's answer is waited for (at
 * most wait_ns) even when it sleeps meanwhile, so that its stack is of
 * its next moment on a CPU; one that did not answer by then is read from
 * /proc if it sleeps, still recorded as running. Normal context. */
CPROF__HIDDEN int cprof__thread_sample_running(cprof__records *out,
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
typedef struct cprof__thread_sample_stats {
  int threads, answered, read, signalled, slept, no_timer, perf,
      perf_answered, starved_waits;
  int64_t total_ns, max_answer_ns, interrupted;
  int64_t perf_total, signalled_total; /* over the process's life */
} cprof__thread_sample_stats;
CPROF__HIDDEN void cprof__thread_sample_last_stats(
    cprof__thread_sample_stats *out);

/* Reads CPROF_THREADS_SIGNAL (once; init calls it at load, so a bad
 * value is reported then). */
CPROF__HIDDEN void cprof__thread_sample_env_init(void);

#endif
