/*
 * The addresses of cprof's interposers as a program's calls reach them,
 * registered by the source/ interposers when they start, so that the encoder
 * can tell a stack's first frame called an interposer directly rather
 * than through a tail call, without naming any of them; and likewise the
 * thread trampoline's. Lock-free; normal context.
 */
#ifndef CPROF_INTERPOSERS_H
#define CPROF_INTERPOSERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

/* Registers interposers' addresses (as a program's calls reach them) for
 * the tail-call frames: the modules that define interposers call it once
 * when they start. Thread-safe; at most 64 in all. */
CPROF__HIDDEN void cprof__interposers_register(const uintptr_t *addrs,
                                               size_t n);

/* True when addr is a registered interposer. */
CPROF__HIDDEN bool cprof__is_interposer(uint64_t addr);

/* The first addresses of the functions every thread that cprof's
 * pthread_create starts runs in: the program's threads' trampoline, and
 * cprof's own threads' start. Registered by the threads source when it
 * starts, so that the encoder can end a stack below the trampoline and the
 * goroutine profile can tell a thread still on its way in, without naming
 * that source. 0 until registered (then no stack holds them). */
CPROF__HIDDEN void cprof__thread_entry_register(uintptr_t start,
                                                uintptr_t spawn);
CPROF__HIDDEN uintptr_t cprof__thread_entry_start(void);
CPROF__HIDDEN uintptr_t cprof__thread_entry_spawn(void);

#endif
