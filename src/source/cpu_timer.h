/*
 * The CPU profiler: per-thread CPU-time timers delivering SIGPROF to the
 * thread that used the time, a signal handler that walks and aggregates the
 * interrupted stack, and sessions, each with its own aggregate, which the
 * CPU profile (profile/cpu.c) turns into pprof.
 *
 * One sampling engine serves up to CPROF__CPU_SESSIONS independent sessions
 * (the application's own cprof_cpu_start, the HTTP endpoint, a dump, the
 * pusher): each session has its own table, so one consumer stopping or
 * starting never disturbs another. The engine runs at the rate of the first
 * session that started it; later sessions share that rate and say so in
 * their profile's period.
 */
#ifndef CPROF_CPU_TIMER_H
#define CPROF_CPU_TIMER_H

#include "base/internal.h"
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "capture/agg.h"

#define CPROF__CPU_SESSIONS 4
#define CPROF__CPU_DEFAULT_HZ 100
#define CPROF__CPU_MAX_HZ 10000

typedef struct cprof__cpu_session cprof__cpu_session;

/* Starts a session at hz (0 = default). Returns 0, CPROF_EINVAL for a rate
 * out of range, CPROF_EBUSY when every session slot is taken, CPROF_ESYS
 * when no signal is free (source/signals.h), timers cannot be created
 * or may not be (a seccomp filter).
 * Normal context; thread-safe. */
CPROF__HIDDEN int cprof__cpu_session_start(int hz, cprof__cpu_session **out);

/* Marks a session as one that follows the process into its fork
 * children: there it carries on from zero (its table cleared, its window
 * starting at the fork) on the forking thread, whose timer is armed again.
 * Other sessions are released in a child. Thread-safe. */
CPROF__HIDDEN void cprof__cpu_session_follow_forks(cprof__cpu_session *s);

/* A thread's name, as kept for threads that exited during a session. */
typedef struct cprof__cpu_thread_name {
  pid_t tid;
  char name[16];
} cprof__cpu_thread_name;

/* What a session measured: samples per (stack, tid) with values
 * {count, cpu ns}, its window, the samples it had no room for, and the
 * names of threads that exited while it ran. */
typedef struct cprof__cpu_window {
  cprof__agg *agg;
  int hz;
  int64_t start_ns, end_ns;
  uint64_t lost;
  uint64_t unarmed; /* threads that could not be given a timer */
  uint64_t no_room; /* samples not taken for want of stack (in lost) */
  int signo; /* the timers' signal at the end (0: none, the engine stopped) */
  cprof__cpu_thread_name *gone;
  size_t ngone;
} cprof__cpu_window;

/* Ends a session. With keep, hands what it measured to *out (free it with
 * cprof__cpu_window_free); otherwise discards it. Returns 0 or
 * CPROF_EINVAL for a session that is not running. */
CPROF__HIDDEN int cprof__cpu_session_end(cprof__cpu_session *s, bool keep,
                                         cprof__cpu_window *out);
CPROF__HIDDEN void cprof__cpu_window_free(cprof__cpu_window *w);

/* The rate the engine samples at now, 0 when it is idle. */
CPROF__HIDDEN int cprof__cpu_engine_hz(void);

/* Registers the function the engine calls (normal context, no lock of the
 * engine's held) each time it starts, and in a fork child where it goes
 * on: the thread scanner's wake (thread_scan.h), which is built on this
 * source, so that this one never calls it by name. One listener. */
CPROF__HIDDEN void cprof__cpu_engine_listen(void (*on_start)(void));

/* The thread hooks this source registers with the pthread_create
 * trampoline (threads.h) when a session first starts: a thread starting
 * (arm its timer if the engine runs) and exiting (disarm it and remember
 * its name). Normal context. */
CPROF__HIDDEN void cprof__cpu_thread_started(void);
CPROF__HIDDEN void cprof__cpu_thread_exiting(void);

/* Given tids, every thread in /proc/self/task: arms a timer for each that
 * has none (threads started without cprof's trampoline) and deletes those
 * of threads that are gone; returns how many it armed. For the
 * scanner (thread_scan.c). Normal context. */
CPROF__HIDDEN size_t cprof__cpu_rescan(const pid_t *tids, size_t n);

/* Checks that the engine's signal still has its handler (a raw
 * rt_sigaction bypasses the interposers); when it does not, the timers
 * move to another free signal. For the scanner, while the engine runs.
 * Normal context. */
CPROF__HIDDEN void cprof__cpu_signal_check(void);

/* Reads CPROF_CPU_SIGNAL (once; init calls it at load, so a bad value is
 * reported then). */
CPROF__HIDDEN void cprof__cpu_env_init(void);

#endif
