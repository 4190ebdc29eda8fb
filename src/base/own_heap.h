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

/* What free() reads of this heap, in one line: the range's address
 * shifted right by CPROF__OWN_RANGE_SHIFT (UINTPTR_MAX, no pointer's,
 * until it is mapped), which every free() reads, and what free()'s
 * page-boundary path reads first (cprof__own_large): a summary of the
 * live large blocks' addresses, bit h set while some live block's page
 * has hash h (cprof__own_summary_of). The allocator underneath puts about
 * one block in 256 on a page boundary by chance; this line rules nearly
 * all of those out without a cache miss of its own. Written under the
 * heap's lock. */
#define CPROF__OWN_SUMMARY_WORDS 7
#define CPROF__OWN_SUMMARY_BITS (CPROF__OWN_SUMMARY_WORDS * 64)
struct cprof__own_hot {
  _Atomic uintptr_t tag;
  _Atomic uint64_t large_bits[CPROF__OWN_SUMMARY_WORDS];
};
_Static_assert(sizeof(struct cprof__own_hot) == 64, "one cache line");
CPROF__HIDDEN extern _Alignas(64) struct cprof__own_hot cprof__own_hot;

static inline __attribute__((always_inline)) bool cprof__own_small(
    const void *p) {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  /* free() reads this on every call: a compare with the tag in memory (an
   * aligned word, so a relaxed atomic load) saves the load into a register
   * that gcc makes of an atomic. */
  bool eq;
  uintptr_t a = (uintptr_t)p;
  __asm__("shrq %[shift], %[a]\n\t"
          "cmpq %[tag], %[a]"
          : "=@cce"(eq), [a] "+r"(a)
          : [shift] "i"(CPROF__OWN_RANGE_SHIFT), [tag] "m"(cprof__own_hot.tag)
          : "cc");
  return eq;
#else
  return ((uintptr_t)p >> CPROF__OWN_RANGE_SHIFT) ==
         atomic_load_explicit(&cprof__own_hot.tag, memory_order_relaxed);
#endif
}

static inline unsigned cprof__own_summary_of(uintptr_t p) {
  return (unsigned)(((p >> 12) * 0x9e3779b97f4a7c15ull) >> 32) %
         CPROF__OWN_SUMMARY_BITS;
}

/* Whether p, with its summary bit set, is a live large block: a probe of
 * the heap's table. */
CPROF__HIDDEN bool cprof__own_large_listed(const void *p);

/* Whether p is a large block of this heap (page aligned, its summary bit
 * set, and in the table). */
static inline __attribute__((always_inline)) bool cprof__own_large(
    const void *p) {
  uintptr_t a = (uintptr_t)p;
  if ((a & 4095) != 0) return false;
  unsigned h = cprof__own_summary_of(a);
  if (CPROF__LIKELY((atomic_load_explicit(&cprof__own_hot.large_bits[h / 64],
                                          memory_order_relaxed) >>
                         (h % 64) & 1) == 0))
    return false;
  return cprof__own_large_listed(p);
}

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
