/*
 * The region and the live set of sampled blocks (heap_live.c), for the
 * heap sampler's own files: where a sampled block is placed so that free()
 * knows it by its address, and which sampled blocks are not yet freed.
 *
 * What free()'s and malloc()'s paths test on every call is here as static
 * inline functions over hidden globals, not as calls into heap_live.c: the
 * line every malloc() and free() reads (cprof__heap_hot) and the region's
 * bounds. Everything else is a call, made only for a pointer on a page
 * boundary, a sampled allocation or a block cprof placed. All of it is
 * uninstrumented (CPROF__HEAP_NO_SAN), like the interposers.
 */
#ifndef CPROF_HEAP_LIVE_H
#define CPROF_HEAP_LIVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/real_alloc.h"
#include "capture/agg.h"
#include "source/heap_sampler.h"

/* Sampled blocks are handed out at page boundaries (see "Recognising the
 * free of a sampled block" in heap_live.c), and so are arena blocks. */
#define CPROF__HEAP_PAGE ((uintptr_t)4096)

/* What malloc() and free() read on every call, with the few pointers the
 * sampled paths start from, in one cache line that is written only at
 * set-up (and, for free_next and the counts, in the rare cases described
 * with them). Defined in heap_live.c, the lowest of the three files;
 * heap_interpose.c's free() reads free_next. */
struct cprof__heap_hot {
  /* Where free() sends a pointer that is not on a page boundary: the
   * allocator's free, or the interposers' slow free while unaligned
   * sampled blocks live (cprof__heap_update_free_next). */
  _Atomic(cprof__free_fn) free_next;
  _Atomic uint64_t unaligned_live;
  _Atomic uint64_t listed; /* blocks in the live set */
  _Atomic unsigned region_chunks; /* chunks cprof__heap_in_region reads */
  /* Set once the sampler is set up, by a constructor (heap_sampler.c):
   * nothing is sampled before, when the runtime under us (a sanitizer's,
   * say) may not be ready for anything but allocation. Read at every
   * sample, so kept in this line rather than one that samples write. */
  _Atomic bool set_up;
  _Atomic(cprof__agg *) samples;
  /* The sampled blocks off a page boundary that found no slot, and how
   * many slots hold an address of each hash (cprof__heap_unaligned). */
  _Atomic uint64_t unaligned_spilled;
  _Atomic uint8_t unaligned_held[16];
};
_Static_assert(sizeof(struct cprof__heap_hot) <= 64, "one cache line");
CPROF__HIDDEN extern _Alignas(64) struct cprof__heap_hot cprof__heap_hot;

/* Recomputes free_next from unaligned_live, under free()'s target lock;
 * the live set calls it when the count leaves or reaches zero. */
CPROF__HIDDEN void cprof__heap_update_free_next(void);

/* The interposers' free for a pointer that may be a sampled block's:
 * registered once, by their set-up (cprof__heap_init), before any sampled
 * block is placed. */
CPROF__HIDDEN void cprof__heap_live_slow_free(cprof__free_fn f);

/* free()'s target lock, for the fork handlers (heap_interpose.c): taken
 * before a fork, given back in the parent, taken over in the child. */
CPROF__HIDDEN void cprof__heap_free_next_lock(void);
CPROF__HIDDEN void cprof__heap_free_next_unlock(void);
CPROF__HIDDEN void cprof__heap_free_next_release_stale(void);

/* The region's chunks: chunk k, mapped when the first of its pages is
 * needed, holds pages [first, first + pages) (see "The region" in
 * heap_live.c). */
#define CPROF__HEAP_REGION_CHUNK0_SHIFT 7 /* the first chunk: 128 pages */
#define CPROF__HEAP_REGION_CHUNKS 8
CPROF__HIDDEN extern _Alignas(64) _Atomic(unsigned char *)
    cprof__heap_region_chunk[CPROF__HEAP_REGION_CHUNKS];

CPROF__HEAP_NO_SAN static inline size_t cprof__heap_region_chunk_first(
    unsigned k) {
  return k ? (size_t)1 << (CPROF__HEAP_REGION_CHUNK0_SHIFT + k - 1) : 0;
}

CPROF__HEAP_NO_SAN static inline size_t cprof__heap_region_chunk_pages(
    unsigned k) {
  return (size_t)1 << (CPROF__HEAP_REGION_CHUNK0_SHIFT + (k ? k - 1 : 0));
}

/* Whether p lies in the region, and in which page. */
CPROF__HEAP_NO_SAN static inline bool cprof__heap_region_page_of(
    const void *p, size_t *page) {
  unsigned n = atomic_load_explicit(&cprof__heap_hot.region_chunks,
                                    memory_order_relaxed);
  for (unsigned k = 0; k < n; k++) {
    unsigned char *c = atomic_load_explicit(&cprof__heap_region_chunk[k],
                                            memory_order_relaxed);
    uintptr_t off = (uintptr_t)p - (uintptr_t)c;
    if (c && off < cprof__heap_region_chunk_pages(k) * CPROF__HEAP_PAGE) {
      *page = cprof__heap_region_chunk_first(k) + off / CPROF__HEAP_PAGE;
      return true;
    }
  }
  return false;
}

CPROF__HEAP_NO_SAN static inline bool cprof__heap_in_region(const void *p) {
  size_t page;
  return cprof__heap_region_page_of(p, &page);
}

/* The addresses of the sampled blocks not on a page boundary while they
 * are few (see "Blocks off a page boundary" in heap_live.c): each slot
 * holds one or 0, in a line of their own. Those that found no free slot
 * are counted in cprof__heap_hot.unaligned_spilled, and for each of
 * CPROF__HEAP_UNALIGNED_HASHES hashes of an address, how many slots hold
 * an address of that hash in cprof__heap_hot.unaligned_held: a free()
 * reads those in the line it reads anyway, and the slots only when the
 * pointer's count is not 0. All are written only when such a block is
 * tracked or forgotten. */
#define CPROF__HEAP_UNALIGNED_SLOTS 7
#define CPROF__HEAP_UNALIGNED_HASHES 16
struct cprof__heap_unaligned {
  _Atomic uintptr_t at[CPROF__HEAP_UNALIGNED_SLOTS];
};
CPROF__HIDDEN extern _Alignas(64) struct cprof__heap_unaligned
    cprof__heap_unaligned;
_Static_assert(sizeof cprof__heap_hot.unaligned_held ==
                   CPROF__HEAP_UNALIGNED_HASHES,
               "a count for each hash");

/* The hash of an address off a page boundary: bits of its offset in the
 * page and of its page, so that blocks at one offset in their pages (the
 * allocator's mapped blocks) spread too. */
static inline unsigned cprof__heap_unaligned_hash(const void *p) {
  uintptr_t a = (uintptr_t)p;
  return (unsigned)((a >> 4) ^ (a >> 12)) &
         (CPROF__HEAP_UNALIGNED_HASHES - 1);
}

/* Whether p, a pointer off a page boundary, may be a sampled block's:
 * a slot holds it, or some such block found no slot. */
CPROF__HEAP_NO_SAN static inline bool cprof__heap_unaligned_may_be(
    const void *p) {
  if (atomic_load_explicit(&cprof__heap_hot.unaligned_spilled,
                           memory_order_relaxed) != 0)
    return true;
  if (atomic_load_explicit(
          &cprof__heap_hot.unaligned_held[cprof__heap_unaligned_hash(p)],
          memory_order_relaxed) == 0)
    return false;
  for (int i = 0; i < CPROF__HEAP_UNALIGNED_SLOTS; i++)
    if (atomic_load_explicit(&cprof__heap_unaligned.at[i],
                             memory_order_relaxed) == (uintptr_t)p)
      return true;
  return false;
}

/* Whether free(p) must look further than the allocator underneath: a
 * pointer on a page boundary, or one off it while sampled blocks live off
 * one and it may be one of them. */
CPROF__HEAP_NO_SAN static inline bool cprof__heap_free_checks(const void *p) {
  return ((uintptr_t)p & (CPROF__HEAP_PAGE - 1)) == 0 ||
         (atomic_load_explicit(&cprof__heap_hot.unaligned_live,
                               memory_order_relaxed) != 0 &&
          cprof__heap_unaligned_may_be(p));
}

/* A tracking word: stack id << 40 | requested size. */
#define CPROF__HEAP_META_SIZE_BITS 40
#define CPROF__HEAP_META_SIZE_MASK (((uint64_t)1 << 39) - 1)

/* The tracking word of a block of size bytes sampled with stack sid;
 * 0 when either does not fit. */
static inline uint64_t cprof__heap_make_meta(cprof__stack_id sid,
                                             size_t size) {
  if (sid >= ((uint64_t)1 << (64 - CPROF__HEAP_META_SIZE_BITS)) ||
      size > CPROF__HEAP_META_SIZE_MASK)
    return 0;
  return (uint64_t)sid << CPROF__HEAP_META_SIZE_BITS | size;
}

/* Adds p to the live set, with its tracking word and the distance back to
 * the allocator's block; returns the address of its tracking word, NULL
 * when the set is full or cannot grow. */
CPROF__HIDDEN _Atomic uint64_t *cprof__heap_live_insert(void *p, uint64_t meta,
                                                        uint32_t delta);

/* A block of the live set as cprof__heap_live_find finds it: its tracking
 * word and the distance back to the allocator's block, both 0 when it is
 * not there. Returned by value (in two registers) rather than through
 * pointers to the caller's locals, which would have to outlive the call:
 * the interposers' calls after a lookup stay tail calls. */
typedef struct cprof__heap_live_entry {
  uint64_t meta;
  uint32_t delta;
  bool found;
} cprof__heap_live_entry;

/* Finds p in the live set, and takes it out when remove is set. Only the
 * owner of p looks it up, after its insert. */
CPROF__HIDDEN cprof__heap_live_entry cprof__heap_live_find(const void *p,
                                                           bool remove);

/* Frees a block of the region, p in page i (cprof__heap_region_page_of).
 * A pointer inside a page, or a page not in use (freed twice), is not one
 * cprof handed out: it is left alone. */
CPROF__HIDDEN void cprof__heap_region_free(const void *p, size_t i);

/* Where a sampled block of n bytes goes so that free() knows it by its
 * address: a page of the region, or a block a page larger from the
 * allocator underneath (zeroed when zero is set) handed out at its first
 * page boundary. NULL when it cannot go there (the caller allocates as
 * usual); errno is kept. *meta receives the block's tracking word, whose
 * stack id cprof__heap_record fills in. */
CPROF__HIDDEN void *cprof__heap_place_sampled(size_t n, bool zero,
                                              _Atomic uint64_t **meta);

/* Counts a sampled block that could not be tracked for its free
 * (cprof__heap_untracked). */
CPROF__HIDDEN void cprof__heap_count_untracked(void);

/* The bytes cprof may still copy to move sampled realloc results to a
 * page boundary (heap_interpose.c): each sample earns rate / 64 of them,
 * up to CPROF__HEAP_COPY_BUDGET_MAX, so that the copies stay below 1/64
 * of the bytes the program allocates, whatever its reallocs. */
#define CPROF__HEAP_COPY_SHARE 64
#define CPROF__HEAP_COPY_BUDGET_MAX ((int64_t)16 << 20)
CPROF__HIDDEN extern _Atomic int64_t cprof__heap_copy_budget;

/* Adds a sample's share to the budget (cprof__heap_record). */
CPROF__HIDDEN void cprof__heap_copy_earn(long rate);

/* Takes n bytes from the budget; false, taking nothing, when it has
 * fewer or n is past CPROF__HEAP_COPY_BUDGET_MAX. */
CPROF__HIDDEN bool cprof__heap_copy_spend(size_t n);

#endif
