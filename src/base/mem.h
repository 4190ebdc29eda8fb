/*
 * The profiler's own memory. Every allocation cprof makes goes through these
 * functions, to cprof's own heap (base/own_heap.h; under a sanitizer, the
 * allocator underneath cprof's interposers, base/real_alloc.h), so the
 * profiler's allocations never reach the heap sampler nor the program's
 * heap. Code that calls into a library that allocates on its own (libdw,
 * zlib) brackets the call with cprof__guard_enter()/cprof__guard_exit():
 * the library's malloc calls do pass through the interposers, which send
 * a guarded thread's requests to cprof's own heap too, and the guard
 * parks the sampler's countdown so they are neither sampled nor counted.
 * None of this may be called from a signal handler.
 */
#ifndef CPROF_MEM_H
#define CPROF_MEM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

CPROF__HIDDEN void *cprof__malloc(size_t n);
CPROF__HIDDEN void *cprof__calloc(size_t n, size_t size);
CPROF__HIDDEN void *cprof__realloc(void *p, size_t n);
CPROF__HIDDEN void cprof__free(void *p);
CPROF__HIDDEN char *cprof__strdup(const char *s);
/* Frees a block a library allocated with the process's malloc (realpath,
 * __cxa_demangle): through the process's free, which knows it. */
CPROF__HIDDEN void cprof__free_foreign(void *p);

/* Marks the calling thread as running profiler code; nests. */
CPROF__HIDDEN void cprof__guard_enter(void);
CPROF__HIDDEN void cprof__guard_exit(void);
/* Set once by the heap sampler: called as a thread enters and leaves the
 * outermost guard (source/heap_sampler.h, cprof__heap_park). */
CPROF__HIDDEN void cprof__guard_hooks(void (*park)(void), void (*unpark)(void));
/* The guard's depth on this thread (mem.c). volatile: the allocator cannot
 * see that cprof's malloc reads it, and gcc would otherwise drop the
 * increments around a call to malloc as dead stores. */
CPROF__HIDDEN extern __thread volatile int cprof__guard_depth CPROF__TLS;

/* True while the calling thread runs profiler code. Signal-safe. Inline,
 * since the heap sampler's malloc checks it on every allocation; one
 * initial-exec TLS load, never instrumented (even unoptimised), since it
 * runs where a sanitizer has not set the thread up yet. */
__attribute__((always_inline, no_sanitize("address", "thread", "undefined")))
static inline bool cprof__guarded(void) {
  return cprof__guard_depth > 0;
}

/* Whether the page of a table's zero-filled mapping at offset off has not
 * been written yet, by one bit per page in written (set from now on). A
 * lookup that may turn into an insert reads such a page by a write that
 * changes nothing (an atomic add of 0): a page first touched by a load
 * maps the kernel's zero page, and the store that follows faults again,
 * two faults instead of one. A page written once is read by loads, so
 * that a fork child's lookups share the parent's pages rather than copy
 * them. Signal-safe. */
__attribute__((always_inline)) static inline bool cprof__page_unwritten(
    _Atomic uint64_t *written, size_t off) {
  size_t page = off / 4096;
  uint64_t bit = (uint64_t)1 << (page % 64);
  _Atomic uint64_t *w = &written[page / 64];
  if (atomic_load_explicit(w, memory_order_relaxed) & bit) return false;
  atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
  return true;
}

/* The words of a written bitmap (cprof__page_unwritten) for len bytes of a
 * table that starts on a page. */
static inline size_t cprof__page_words(size_t len) {
  return (len / 4096 + 63) / 64 + 1;
}

/* Appends to a caller's buffer; returns 0 or CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__buf_append(cprof_buf *b, const void *data, size_t n);
CPROF__HIDDEN int cprof__buf_printf(cprof_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
