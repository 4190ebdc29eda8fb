/*
 * cprof's own heap: where the memory cprof allocates comes from, its own
 * (base/mem.h) and that of the libraries it calls while guarded (libdw,
 * zlib, libcurl, libmicrohttpd, and libc's own on those calls), so that no
 * thread of cprof's makes the allocator underneath give it an arena
 * (glibc reserves 64 MiB of address space for each) and cprof's memory
 * stays out of the program's heap.
 *
 * Small blocks (up to CPROF__OWN_SMALL_MAX bytes) come from one range of
 * CPROF__OWN_RANGE bytes, aligned to its size and mapped on first use, so
 * that free() tells them apart by one shift and compare of the pointer
 * (cprof__own_small). Larger blocks are mappings of their own, page
 * aligned, listed in a small table that free()'s page-boundary slow path
 * looks in (cprof__own_large). When the range is full or the table is,
 * a request goes to the allocator underneath instead, as before this heap
 * existed. Blocks may be freed or reallocated on any thread, through these
 * functions or the exported free and realloc.
 *
 * Under a sanitizer (ASan, TSan) this heap is off: cprof's memory comes
 * from the sanitizer's allocator, which checks it (cprof__own_enabled).
 * Normal context only, never a signal handler; errno is kept on success.
 */
#ifndef CPROF_OWN_HEAP_H
#define CPROF_OWN_HEAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CPROF__OWN_ENABLED 0
#else
#define CPROF__OWN_ENABLED 1
#endif

/* The range of small blocks: 16 MiB, aligned to its size. */
#define CPROF__OWN_RANGE_SHIFT 24
#define CPROF__OWN_RANGE ((size_t)1 << CPROF__OWN_RANGE_SHIFT)
#define CPROF__OWN_SMALL_MAX ((size_t)64 * 1024)

/* The range's address shifted right by CPROF__OWN_RANGE_SHIFT; UINTPTR_MAX
 * (no pointer's) until it is mapped. */
CPROF__HIDDEN extern _Atomic uintptr_t cprof__own_tag;

static inline __attribute__((always_inline)) bool cprof__own_small(
    const void *p) {
  return ((uintptr_t)p >> CPROF__OWN_RANGE_SHIFT) ==
         atomic_load_explicit(&cprof__own_tag, memory_order_relaxed);
}

/* Whether p is a large block of this heap. Cheap when none is live. */
CPROF__HIDDEN bool cprof__own_large(const void *p);

static inline __attribute__((always_inline)) bool cprof__own_block(
    const void *p) {
  return cprof__own_small(p) || cprof__own_large(p);
}

/* The allocator's functions, with malloc's meaning; each falls back to the
 * allocator underneath when this heap cannot serve the request (and is
 * then that allocator's block, which cprof__own_free passes on). */
CPROF__HIDDEN void *cprof__own_malloc(size_t n);
CPROF__HIDDEN void *cprof__own_calloc(size_t n, size_t size);
CPROF__HIDDEN void *cprof__own_memalign(size_t align, size_t n);
/* For blocks of this heap only (cprof__own_block). */
CPROF__HIDDEN void cprof__own_free(void *p);
CPROF__HIDDEN void *cprof__own_realloc(void *p, size_t n);
CPROF__HIDDEN size_t cprof__own_usable_size(const void *p);

/* Blocks and bytes in use, and the range's bytes ever carved (for the
 * heap profile's trailer and the tests). */
typedef struct cprof__own_stats {
  uint64_t small_blocks, small_bytes, range_used;
  uint64_t large_blocks, large_bytes;
  uint64_t fallbacks; /* requests sent to the allocator underneath */
} cprof__own_stats;
CPROF__HIDDEN void cprof__own_stats_get(cprof__own_stats *s);

/* Fork: the prepare handler takes the heap's lock, the others release it
 * (base/fork.c registers them before any other of cprof's). */
CPROF__HIDDEN void cprof__own_atfork_prepare(void);
CPROF__HIDDEN void cprof__own_atfork_parent(void);
CPROF__HIDDEN void cprof__own_atfork_child(void);

#endif
