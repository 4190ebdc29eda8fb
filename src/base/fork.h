/*
 * cprof's fork handlers, in one place. Every module registers its
 * handlers here, not with pthread_atfork: this file registers one set
 * with pthread_atfork, at its first use, and runs the modules' in order.
 *   - Prepare handlers run last-registered first, and cprof's own heap's
 *     (base/own_heap.h) is registered before any other, so its lock is
 *     the last one a fork takes: any other lock of cprof's may be held by
 *     a thread that is allocating (the unwind tables' writer, say), and
 *     taking the heap's first would wait on that thread while it waits
 *     on the heap.
 *   - Parent and child handlers run first-registered first.
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

/* The most handler sets cprof registers. */
#define CPROF__FORK_HANDLERS 32

/* Registers a module's handlers, as pthread_atfork does (any may be
 * NULL). Returns 0, or ENOMEM when the table is full. */
CPROF__HIDDEN int cprof__atfork(void (*prepare)(void), void (*parent)(void),
                                void (*child)(void));

/* True in a fork child while cprof's child handlers run. */
CPROF__HIDDEN bool cprof__fork_child_running(void);

/* Waits, in a thread started by a child handler, until cprof's child
 * handlers have all run. */
CPROF__HIDDEN void cprof__fork_child_wait(void);

#endif
