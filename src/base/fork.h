/*
 * cprof's fork handlers, in one place and in one fixed order. Every
 * module registers its handlers here, never with pthread_atfork, under its
 * own slot in cprof__fork_slot; this file registers one set with
 * pthread_atfork, at its first use, and runs the modules' in slot order:
 *   - Prepare handlers run from the top layer down (sinks first, base
 *     last), so a fork takes cprof's locks in the order its code nests
 *     them: a higher layer calls into a lower one while holding its own
 *     lock, never the other way round. cprof's own heap (base/own_heap.h)
 *     is the lowest slot, so its lock is the last one a fork takes: any
 *     other lock of cprof's may be held by a thread that is allocating
 *     (the unwind tables' writer, say), and taking the heap's first would
 *     wait on that thread while it waits on the heap.
 *   - Parent and child handlers run from the bottom up: a child's base
 *     and capture are whole again before a source restarts its timers,
 *     and every profile before a sink restarts its windows or threads.
 *   - A module registered while a fork runs is left out of that fork.
 *   - A thread of cprof's started in a fork child while the child
 *     handlers run (the process tree's agent, the dumper, the thread
 *     scanner) waits until all of them have run before it does anything
 *     (source/threads.h, cprof__thread_spawn): before, a thread started by
 *     one module's child handler could take another module's lock that a
 *     later child handler had still to reset.
 * None of this may be called from a fork handler or a signal handler.
 */
#ifndef CPROF_FORK_H
#define CPROF_FORK_H

#include <stdbool.h>

#include "base/internal.h"

/* Every module with fork handlers, bottom layer first; within a layer,
 * a module that calls another while holding its lock comes after it. */
typedef enum cprof__fork_slot {
  /* base */
  CPROF__FORK_OWN_HEAP,      /* base/own_heap.c (registered by this file) */
  CPROF__FORK_DYNLOAD,       /* base/dynload.c */
  /* capture */
  CPROF__FORK_UNWIND,        /* capture/cfi: the unwind tables' writer */
  CPROF__FORK_LABELS,        /* capture/labels.c */
  /* source */
  CPROF__FORK_SIGNALS,       /* source/sig_interpose.c */
  CPROF__FORK_FDS,           /* source/fd_interpose.c */
  CPROF__FORK_HEAP,          /* the heap sampler */
  CPROF__FORK_LOCKS,         /* source/lock_interpose.c */
  CPROF__FORK_CPU_TIMERS,    /* source/cpu_timer.c */
  CPROF__FORK_THREAD_SCAN,   /* source/thread_scan.c: calls the CPU timers */
  CPROF__FORK_THREAD_SAMPLE, /* source/thread_sample.c */
  /* encode */
  CPROF__FORK_SYMBOLS,       /* encode/symbolize.c */
  /* profile */
  CPROF__FORK_CPU_PROFILE,   /* profile/cpu.c */
  CPROF__FORK_HEAP_PEAK,     /* profile/heap_peak.c */
  CPROF__FORK_WALL,          /* profile/wall.c: calls thread sampling */
  /* sink */
  CPROF__FORK_HTTP,          /* sink/http_handler.c */
  CPROF__FORK_TREE,          /* sink/tree.c */
  CPROF__FORK_DUMP,          /* sink/dump.c: restarts its windows last */
  CPROF__FORK_SLOTS
} cprof__fork_slot;

/* Registers a module's handlers in its slot, as pthread_atfork does (any
 * may be NULL). Returns 0, or EINVAL for a bad slot or one already taken
 * by other handlers (registering the same ones again changes nothing, and
 * takes no lock). A module that registers on first use, from whatever
 * thread, calls this each time rather than through pthread_once: a first
 * registration waits while a fork is under way (the lock is held across
 * it), and a fork child whose parent forked in that wait would inherit
 * the once "running" under ThreadSanitizer, whose pthread_once (unlike
 * glibc's) does not start over in a child: its first use would wait for
 * ever. */
CPROF__HIDDEN int cprof__atfork(cprof__fork_slot slot,
                                void (*prepare)(void), void (*parent)(void),
                                void (*child)(void));

/* Registers fn to run in a fork child after every slot's child handler:
 * for a module of a lower layer that settles what the higher ones'
 * handlers left (the CPU timers give back their signal if no session
 * restarted in the child). At most 4; registering fn again changes
 * nothing. Returns 0, or EINVAL when full. */
CPROF__HIDDEN int cprof__atfork_child_last(void (*fn)(void));

/* True in a fork child while cprof's child handlers run. */
CPROF__HIDDEN bool cprof__fork_child_running(void);

/* Waits, in a thread started by a child handler, until cprof's child
 * handlers have all run. */
CPROF__HIDDEN void cprof__fork_child_wait(void);

#endif
