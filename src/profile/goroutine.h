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
 * The collection is thread sampling's (source/thread_sample.h).
 *
 * debug=0 pprof goroutine/count, debug=1 grouped by stack, debug=2 one
 * block per thread with its tid, state, system call and name from /proc
 * and the "created by" frame; ?seconds=N a delta, as Go serves it.
 */
#ifndef CPROF_GOROUTINE_H
#define CPROF_GOROUTINE_H

#include "profile/registry.h"

CPROF__HIDDEN extern const cprof__profile_def cprof__goroutine_profile;

#endif
