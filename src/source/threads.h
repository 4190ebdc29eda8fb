/*
 * Threads: the pthread_create interposer that every thread-aware source
 * builds on, and the threadcreate profile it feeds. A thread created through
 * pthread_create starts in a cprof trampoline that registers its stack
 * bounds (for the frame walker) before running the application's function,
 * and unregisters them when it exits, however it exits.
 */
#ifndef CPROF_THREADS_H
#define CPROF_THREADS_H

#include <pthread.h>

#include "capture/agg.h"

/* Starts one of cprof's own threads: created directly (not counted in
 * threadcreate), named name (a string that outlives the thread's start,
 * at most 15 bytes; the thread names itself), with every signal blocked so that no signal
 * meant for the application is ever handled on it, and marked as profiler
 * code for its whole life (cprof__guarded). Threads that cprof's code
 * creates through pthread_create (libmicrohttpd's, while cprof is guarded)
 * are marked the same way and not counted either. Returns 0 or an errno
 * value. Normal context. */
CPROF__HIDDEN int cprof__thread_spawn(pthread_t *thread, void *(*fn)(void *),
                                      void *arg, const char *name);

/* Hooks the trampoline runs on each thread it starts, guarded: on_start
 * as the thread starts (after its stack bounds are registered), on_exit as
 * it exits, however it exits. Each source registers its own once (the CPU
 * timers, the heap sampler's spare page), so the sources never call each
 * other; either may be NULL; at most 4 pairs, a pair given twice counts
 * once. Thread-safe; normal context. */
CPROF__HIDDEN void cprof__threads_hooks(void (*on_start)(void),
                                        void (*on_exit)(void));

/* The stack of every thread cprof starts (cprof__thread_spawn's, and
 * those libraries start while cprof's code runs, e.g. libmicrohttpd's,
 * whose creator asks for no size of its own). The deepest path measured
 * is symbolizing source lines with libdw (dwarf_getsrclines keeps its
 * tables on the stack) under the wall sampler's goroutine collection:
 * about 170 KiB; it overflows 128 KiB and runs in 256 KiB (docs/heap.md,
 * "Address space"). 512 KiB leave a margin of three. Sanitizers' frames
 * are several times larger. glibc carves the static TLS and the guard page
 * from it. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CPROF__THREAD_STACK ((size_t)2 * 1024 * 1024)
#else
#define CPROF__THREAD_STACK ((size_t)512 * 1024)
#endif

/* Sets attr's stack size to CPROF__THREAD_STACK (never below glibc's
 * minimum); attr must be initialised. Returns 0 or an errno value. */
CPROF__HIDDEN int cprof__thread_stack_attr(pthread_attr_t *attr);

/* Prepares the module; idempotent and thread-safe. Not signal-safe. */
CPROF__HIDDEN void cprof__threads_init(void);

/* For the threadcreate profile: creations counted per creating stack; NULL
 * when the table could not be made. */
CPROF__HIDDEN cprof__agg *cprof__threads_creations(void);

#endif
