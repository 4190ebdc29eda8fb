/*
 * The heap sampler's region and live set: where a sampled block is placed
 * so that free() knows it by its address (a page of the region, or a block
 * a page larger from the allocator underneath, tracked here), and the
 * sampled blocks not yet freed, with the counts and the walk the profiles
 * read. The interposers (heap_interpose.c) and the record of a sample
 * (heap_sampler.c) place, track and forget blocks through heap_live.h,
 * whose inline tests free()'s and malloc()'s paths make without a call.
 *
 * It calls the allocator underneath through base/real_alloc.h only, the
 * sampler for its rate, and heap_interpose.c back only to point free() at
 * its slow path while unaligned sampled blocks live
 * (cprof__heap_update_free_next, which takes the brief lock on free()'s
 * target). Like the interposers it runs uninstrumented in every context
 * the application allocates from: it must never allocate through the
 * application's path, take any other lock or change errno; its tables
 * grow by mapping a chunk with one raw mmap, and are read and written
 * lock-free.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/internal.h"
#include "base/real_alloc.h"
#include "base/rng.h"
#include "base/spin.h"
#include "base/sys.h"
#include "source/heap_live.h"
#include "source/heap_sampler.h"

#define NO_SAN CPROF__HEAP_NO_SAN

/* Where free() goes until the allocator underneath is known (see
 * free_unresolved). */
static void free_unresolved(void *p);

/* The line every malloc() and free() reads (heap_live.h). */
_Alignas(64) struct cprof__heap_hot cprof__heap_hot = {.free_next =
                                                           free_unresolved};

/* The slots of the sampled blocks off a page boundary (heap_live.h). */
_Alignas(64) struct cprof__heap_unaligned cprof__heap_unaligned;

/*
 * free_next follows unaligned_live: the interposers' slow free (registered
 * by them, cprof__heap_live_slow_free) while it is not zero, the
 * allocator's free otherwise. It is recomputed from the count under a
 * lock whenever the count leaves or reaches zero (the live set calls
 * cprof__heap_update_free_next), and the thread whose insert raised the
 * count from zero does so before it hands its block out, so a free of any
 * unaligned sampled block finds free_slow. The lock is taken only at
 * those transitions (and around fork, so that a child never inherits it
 * held).
 */
static CPROF__FORK_LOCK cprof__spin free_next_lock;
CPROF__SPIN_FUNCTIONS(NO_SAN)
static _Atomic(cprof__free_fn) slow_free;

NO_SAN void cprof__heap_live_slow_free(cprof__free_fn f) {
  atomic_store(&slow_free, f);
}

NO_SAN void cprof__heap_free_next_lock(void) { spin_lock(&free_next_lock); }

NO_SAN void cprof__heap_free_next_unlock(void) { spin_unlock(&free_next_lock); }

NO_SAN void cprof__heap_free_next_release_stale(void) {
  spin_release_stale(&free_next_lock);
}

NO_SAN void cprof__heap_update_free_next(void) {
  cprof__heap_free_next_lock();
  cprof__free_fn f = atomic_load(&cprof__heap_hot.unaligned_live) != 0
                         ? atomic_load(&slow_free)
                         : CPROF__ALLOC_LOAD(free);
  atomic_store_explicit(&cprof__heap_hot.free_next, f, memory_order_release);
  cprof__heap_free_next_unlock();
}


/* Until the allocator underneath is found, only null and arena blocks
 * exist, and their free is ignored. Once it is (free is set before malloc,
 * so any other block implies it), free() is pointed at it for good. */
NO_SAN static void free_unresolved(void *p) {
  cprof__alloc_resolve();
  if (CPROF__ALLOC_LOAD(free) == cprof__alloc_bootstrap_free) return;
  cprof__heap_update_free_next();
  cprof__free_fn f =
      atomic_load_explicit(&cprof__heap_hot.free_next, memory_order_acquire);
  if (f != free_unresolved) f(p);
}


/* The sampling rate (the heap sampler sets it, heap_sampler.h): here,
 * because placing a sampled block depends on it. */
static _Atomic long heap_rate = CPROF__HEAP_DEFAULT_RATE;

long cprof__heap_rate(void) { return atomic_load(&heap_rate); }

long cprof__heap_rate_exchange(long rate) {
  return atomic_exchange(&heap_rate, rate);
}

bool cprof__heap_rate_replace(long from, long to) {
  return atomic_compare_exchange_strong(&heap_rate, &from, to);
}

#define PAGE CPROF__HEAP_PAGE
#define LOAD(v) atomic_load_explicit(&(v), memory_order_relaxed)

typedef struct live_node live_node;

/*
 * Recognising the free of a sampled block. free() must tell the few
 * sampled blocks from all others without reading memory: a load that
 * misses the cache on every free costs more than everything else cprof
 * does. So sampled blocks are placed at page boundaries, and free()'s
 * fast path tests only the pointer's low 12 bits:
 *   - a block of up to a page goes to a page of the region, cprof's own
 *     reserved mapping, with its tracking word in region_meta;
 *   - a larger one is allocated a page larger from the allocator underneath
 *     and handed out at its first page boundary; the live set (below)
 *     keeps the distance back to the allocator's block.
 * One pointer in 256 that the allocator returns is on a page boundary by
 * chance: its free pays a filter load on the slow path.
 *
 * Some sampled blocks stay where the allocator put them: all of them at
 * rates below CPROF__HEAP_ALIGN_MIN_RATE (where a page per sample would
 * cost too much memory), realloc results larger than a page (moving them
 * means copying them), and blocks whose placement failed.
 * cprof__heap_hot.unaligned_live counts them; while it is not zero,
 * free_next sends every pointer to the slow path. The count shares the
 * line every malloc() and free() reads, so at those low rates each change
 * costs the other threads a cache miss.
 *
 * Blocks off a page boundary. At the default rate such blocks are few
 * (a compiler that grows its vectors by realloc keeps one or two live
 * for most of its run), but while one lives every free() takes the slow
 * path. So their addresses also go to CPROF__HEAP_UNALIGNED_SLOTS slots
 * in one cache line (cprof__heap_unaligned), which that path compares
 * the pointer with: a pointer none holds goes straight to the allocator,
 * without the filter's load, which misses the cache. Before the slots,
 * that path reads the count of slotted addresses of the pointer's hash,
 * one of 16 in the line every free() reads: that one load rules most
 * pointers out (the compare with all seven slots, and then a read of a
 * line of their own, which a compiler evicts between its frees, were its
 * largest costs in free()). A block that finds every slot taken is
 * counted as spilled instead, and while any is, the slow path reads the
 * filter as before (at rates below CPROF__HEAP_ALIGN_MIN_RATE, where
 * every sampled block is off a page boundary). A slot is written before its block is handed out and
 * cleared by the block's free, before the allocator can hand the
 * address out again.
 */
#define REGION_PAGES ((size_t)1 << 14) /* 64 MiB of address space at most */

/*
 * The live set: sampled blocks not yet freed, by address, except those in
 * the region. A node holds the address (0 when free), meta = stack id << 40
 * | requested size (the stack id is 0 for a block kept only for its
 * offset), and the offset back to the allocator's block: 24 bytes in all.
 * Nodes are taken by an atomic bump of an index and are never unlinked, so
 * readers walk chains without any reclamation scheme; the nodes in use are
 * bounded by the most sampled blocks ever live at once. Node i lives in
 * chunk i / NODE_CHUNK of a fixed table, each chunk mapped by the first
 * insert that needs it and published by compare-and-swap, never moved: a
 * node is linked into a bucket only after its chunk is published, so a
 * reader that follows a link always finds the chunk. A chunk that cannot
 * be mapped (`ulimit -v`) leaves the block untracked, as a full set does.
 *
 * The filter is read on the slow path of free(), for page-aligned pointers
 * (or every pointer while unaligned_live is not zero): 256 KiB of counts of
 * the live set's blocks. A page-aligned address counts in the byte of its
 * page (modulo 1 GiB), so the few bytes a heap's pages map to stay in the
 * cache for the pointers that are page-aligned by chance; any other address
 * counts in the byte of its 64-byte granule (modulo 16 MiB), so that
 * unaligned sampled blocks, which are dense at low rates, mark few of the
 * blocks around them. Counts saturate at 255 and then stay, which only
 * costs false positives.
 */
#define BUCKET_BITS 16
#define FILTER_BITS 18
#define FILTER_GRANULE_SHIFT 6
#define FILTER_PAGE_SHIFT 12
#define LIVE_NODES ((size_t)1 << 21)
#define NODE_CHUNK_SHIFT 13 /* 8 Ki nodes, 192 KiB, per chunk */
#define NODE_CHUNK ((size_t)1 << NODE_CHUNK_SHIFT)
#define NODE_CHUNKS (LIVE_NODES / NODE_CHUNK)
#define REGION_BUSY ((uint64_t)1 << 39)

struct live_node {
  _Atomic uintptr_t addr;
  _Atomic uint64_t meta;
  _Atomic uint32_t next;  /* node index + 1; 0 ends the chain */
  _Atomic uint32_t delta; /* bytes from the allocator's block to addr */
};

static _Atomic uint32_t buckets[(size_t)1 << BUCKET_BITS];
static _Alignas(4096) _Atomic uint8_t filter[(size_t)1 << FILTER_BITS];
static _Alignas(64) _Atomic size_t nodes_used;
static _Atomic uint64_t untracked;
static _Alignas(64) _Atomic(live_node *) node_chunks[NODE_CHUNKS];
/* How many times mapping a chunk of the live set or the region failed. */
static _Atomic uint64_t grow_failures;

/*
 * The region: up to REGION_PAGES pages, one sampled block per page, in
 * CPROF__HEAP_REGION_CHUNKS chunks that double in size (0.5, 0.5, 1, 2, 4,
 * 8, 16 and 32 MiB; their addresses share a cache line), each mapped when
 * the first page in it is needed and published by compare-and-swap, never
 * moved or unmapped; cprof__heap_hot.region_chunks says how many
 * cprof__heap_in_region() looks at, at most 8 (a program whose live sampled
 * blocks fit 1 MiB looks at two). Free pages form a lock-free stack whose
 * head carries a tag against ABA; region_meta[i] is page i's tracking word
 * (REGION_BUSY | stack id << 40 | size, 0 when free). A freed page keeps
 * its memory for the next sample, so the region's resident size is at most
 * a page per sampled block ever live at once. A chunk that cannot be
 * mapped sends the block to the allocator underneath, as a full region
 * does.
 */
_Static_assert(((size_t)1 << CPROF__HEAP_REGION_CHUNK0_SHIFT)
                       << (CPROF__HEAP_REGION_CHUNKS - 1) ==
                   REGION_PAGES,
               "the region's chunks add up to REGION_PAGES");
static _Atomic uint64_t region_meta[REGION_PAGES];
static _Atomic uint32_t region_next[REGION_PAGES];
_Alignas(64) _Atomic(unsigned char *)
    cprof__heap_region_chunk[CPROF__HEAP_REGION_CHUNKS];
static _Alignas(64) _Atomic uint64_t region_head; /* tag << 32 | top + 1 */
static _Atomic uint32_t region_used;

/* The page of the region this thread freed last, kept for its next
 * sample (index + 1; 0 when none): a thread that frees its own samples,
 * as most do, then never touches the free list other threads share. It
 * goes back to the list when the thread exits (cprof__heap_thread_exit). */
static __thread uint32_t tls_spare CPROF__TLS;

/* The chunk of the region that holds page i. */
NO_SAN static inline unsigned region_chunk_of(size_t i) {
  size_t q = i >> CPROF__HEAP_REGION_CHUNK0_SHIFT;
  return q ? 64 - (unsigned)__builtin_clzll((unsigned long long)q) : 0;
}

/* The chunk of the region that holds page i, mapped now if no thread has
 * yet (the loser of a race unmaps its copy); NULL when it cannot be. The
 * chunk is counted in cprof__heap_hot.region_chunks before any of its pages
 * is handed out, so a free of one finds it. */
NO_SAN static unsigned char *region_grow(size_t i) {
  unsigned k = region_chunk_of(i);
  unsigned char *c = atomic_load_explicit(&cprof__heap_region_chunk[k],
                                          memory_order_acquire);
  if (!c) {
    size_t len = cprof__heap_region_chunk_pages(k) * PAGE;
    unsigned char *m = cprof__sys_map(len);
    if (!m) {
      atomic_fetch_add_explicit(&grow_failures, 1, memory_order_relaxed);
      return NULL;
    }
    if (atomic_compare_exchange_strong_explicit(&cprof__heap_region_chunk[k],
                                                &c, m, memory_order_acq_rel,
                                                memory_order_acquire))
      c = m;
    else
      cprof__sys_unmap(m, len);
  }
  unsigned have = LOAD(cprof__heap_hot.region_chunks);
  while (have < k + 1 &&
         !atomic_compare_exchange_weak_explicit(
             &cprof__heap_hot.region_chunks, &have, k + 1,
             memory_order_relaxed, memory_order_relaxed)) {
  }
  return c;
}

/* The address of page i, whose chunk is mapped. */
NO_SAN static inline unsigned char *region_page(size_t i) {
  unsigned k = region_chunk_of(i);
  return LOAD(cprof__heap_region_chunk[k]) +
         (i - cprof__heap_region_chunk_first(k)) * PAGE;
}

NO_SAN static void *region_alloc(size_t n, _Atomic uint64_t **meta) {
#ifdef __SANITIZE_THREAD__
  /* Under TSan, pages passed between threads by cprof's own
   * (uninstrumented) code would look like races: sampled blocks are placed
   * by the allocator underneath instead. */
  (void)n;
  (void)meta;
  return NULL;
#endif
  size_t i;
  if (tls_spare) {
    i = tls_spare - 1;
    tls_spare = 0;
    goto take;
  }
  uint64_t head = atomic_load_explicit(&region_head, memory_order_acquire);
  for (;;) {
    uint32_t top = (uint32_t)head;
    if (top == 0) {
      if (LOAD(region_used) >= REGION_PAGES) return NULL;
      i = atomic_fetch_add_explicit(&region_used, 1, memory_order_relaxed);
      if (i >= REGION_PAGES) return NULL;
      if (!region_grow(i)) {
        /* The page is given back unless another thread took one since. */
        uint32_t mine = (uint32_t)i + 1;
        atomic_compare_exchange_strong_explicit(&region_used, &mine,
                                                (uint32_t)i,
                                                memory_order_relaxed,
                                                memory_order_relaxed);
        return NULL;
      }
      break;
    }
    uint32_t next = LOAD(region_next[top - 1]);
    uint64_t want = ((head >> 32) + 1) << 32 | next;
    if (atomic_compare_exchange_weak_explicit(&region_head, &head, want,
                                              memory_order_acquire,
                                              memory_order_acquire)) {
      i = top - 1;
      break;
    }
  }
take:
  atomic_store_explicit(&region_meta[i], REGION_BUSY | n, memory_order_relaxed);
  *meta = &region_meta[i];
  return region_page(i);
}

NO_SAN static void region_release(size_t i) {
  uint64_t head = LOAD(region_head);
  uint64_t want;
  do {
    atomic_store_explicit(&region_next[i], (uint32_t)head,
                          memory_order_relaxed);
    want = ((head >> 32) + 1) << 32 | (uint64_t)(i + 1);
  } while (!atomic_compare_exchange_weak_explicit(
      &region_head, &head, want, memory_order_release, memory_order_relaxed));
}

NO_SAN static inline uint64_t addr_hash(const void *p) {
  return ((uint64_t)(uintptr_t)p >> 4) * CPROF__GOLDEN;
}

NO_SAN static inline _Atomic uint8_t *filter_slot(const void *p) {
  uintptr_t a = (uintptr_t)p;
  unsigned shift = a & (PAGE - 1) ? FILTER_GRANULE_SHIFT : FILTER_PAGE_SHIFT;
  return &filter[(a >> shift) & (((uintptr_t)1 << FILTER_BITS) - 1)];
}

/* Whether p may be in the live set. */
NO_SAN static inline bool maybe_sampled(const void *p) {
  return LOAD(*filter_slot(p)) != 0;
}

NO_SAN static void filter_add(const void *p, int delta) {
  _Atomic uint8_t *f = filter_slot(p);
  uint8_t cur = LOAD(*f);
  for (;;) {
    if (cur == 255 || (delta < 0 && cur == 0)) return;
    if (atomic_compare_exchange_weak_explicit(f, &cur, (uint8_t)(cur + delta),
                                              memory_order_relaxed,
                                              memory_order_relaxed))
      return;
  }
}

/* Puts p, a block off a page boundary, in a free slot and counts it under
 * its hash, or counts it as spilled. Both happen before p is handed out,
 * so its free finds them. */
NO_SAN static void unaligned_add(const void *p) {
  for (int i = 0; i < CPROF__HEAP_UNALIGNED_SLOTS; i++) {
    uintptr_t zero = 0;
    if (LOAD(cprof__heap_unaligned.at[i]) == 0 &&
        atomic_compare_exchange_strong_explicit(
            &cprof__heap_unaligned.at[i], &zero, (uintptr_t)p,
            memory_order_relaxed, memory_order_relaxed)) {
      atomic_fetch_add_explicit(
          &cprof__heap_hot.unaligned_held[cprof__heap_unaligned_hash(p)], 1,
          memory_order_relaxed);
      return;
    }
  }
  atomic_fetch_add_explicit(&cprof__heap_hot.unaligned_spilled, 1,
                            memory_order_relaxed);
}

/* Takes p out of its slot, or out of the spilled count when no slot holds
 * it. Only the owner of p calls it, once for each unaligned_add. */
NO_SAN static void unaligned_remove(const void *p) {
  for (int i = 0; i < CPROF__HEAP_UNALIGNED_SLOTS; i++) {
    uintptr_t want = (uintptr_t)p;
    if (LOAD(cprof__heap_unaligned.at[i]) == want &&
        atomic_compare_exchange_strong_explicit(
            &cprof__heap_unaligned.at[i], &want, 0, memory_order_relaxed,
            memory_order_relaxed)) {
      atomic_fetch_sub_explicit(
          &cprof__heap_hot.unaligned_held[cprof__heap_unaligned_hash(p)], 1,
          memory_order_relaxed);
      return;
    }
  }
  atomic_fetch_sub_explicit(&cprof__heap_hot.unaligned_spilled, 1,
                            memory_order_relaxed);
}

/* Counts a block into or out of cprof__heap_hot.unaligned_live, and points
 * free() at its slow path or back when the count leaves or reaches zero. */
NO_SAN static void count_unaligned(int64_t delta) {
  uint64_t before = atomic_fetch_add_explicit(
      &cprof__heap_hot.unaligned_live, (uint64_t)delta, memory_order_relaxed);
  if (before == (delta > 0 ? 0 : 1)) cprof__heap_update_free_next();
}

/* Node i of the live set, linked into a bucket (so its chunk exists). */
NO_SAN static inline live_node *node_at(size_t i) {
  return &LOAD(node_chunks[i >> NODE_CHUNK_SHIFT])[i & (NODE_CHUNK - 1)];
}

/* Node i, a new one, its chunk mapped now if no thread has yet (the loser
 * of a race unmaps its copy); NULL when the chunk cannot be mapped. */
NO_SAN static live_node *node_new(size_t i) {
  _Atomic(live_node *) *slot = &node_chunks[i >> NODE_CHUNK_SHIFT];
  live_node *c = atomic_load_explicit(slot, memory_order_acquire);
  if (!c) {
    live_node *m = cprof__sys_map(NODE_CHUNK * sizeof(live_node));
    if (!m) {
      atomic_fetch_add_explicit(&grow_failures, 1, memory_order_relaxed);
      return NULL;
    }
    if (atomic_compare_exchange_strong_explicit(slot, &c, m,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
      c = m;
    else
      cprof__sys_unmap(m, NODE_CHUNK * sizeof(live_node));
  }
  return &c[i & (NODE_CHUNK - 1)];
}

NO_SAN _Atomic uint64_t *cprof__heap_live_insert(void *p, uint64_t meta,
                                                 uint32_t delta) {
  _Atomic uint32_t *b = &buckets[addr_hash(p) >> (64 - BUCKET_BITS)];
  live_node *n = NULL;
  for (uint32_t i = atomic_load_explicit(b, memory_order_acquire); i;
       i = atomic_load_explicit(&node_at(i - 1)->next, memory_order_acquire)) {
    uintptr_t zero = 0;
    live_node *c = node_at(i - 1);
    if (LOAD(c->addr) == 0 &&
        atomic_compare_exchange_strong_explicit(
            &c->addr, &zero, (uintptr_t)p, memory_order_acquire,
            memory_order_relaxed)) {
      n = c;
      break;
    }
  }
  if (!n) {
    size_t idx =
        atomic_fetch_add_explicit(&nodes_used, 1, memory_order_relaxed);
    if (idx >= LIVE_NODES) return NULL;
    n = node_new(idx);
    if (!n) {
      /* The index is given back unless another thread took one since;
       * foreach_live skips one that is not. */
      size_t mine = idx + 1;
      atomic_compare_exchange_strong_explicit(&nodes_used, &mine, idx,
                                              memory_order_relaxed,
                                              memory_order_relaxed);
      return NULL;
    }
    atomic_store_explicit(&n->addr, (uintptr_t)p, memory_order_relaxed);
    uint32_t head = atomic_load_explicit(b, memory_order_relaxed);
    do {
      atomic_store_explicit(&n->next, head, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(
        b, &head, (uint32_t)idx + 1, memory_order_release,
        memory_order_relaxed));
  }
  atomic_store_explicit(&n->meta, meta, memory_order_relaxed);
  atomic_store_explicit(&n->delta, delta, memory_order_relaxed);
  filter_add(p, 1);
  atomic_fetch_add_explicit(&cprof__heap_hot.listed, 1, memory_order_relaxed);
  if ((uintptr_t)p & (PAGE - 1)) {
    unaligned_add(p);
    count_unaligned(1);
  }
  return &n->meta;
}

/* Only the owner of p looks it up, after its insert, so a plain scan
 * suffices. NO_SAN, like free: TSan's own thread start frees memory
 * through this allocator before the thread is set up for instrumented
 * code, and a pointer the filter cannot rule out gets here. */
NO_SAN cprof__heap_live_entry cprof__heap_live_find(const void *p,
                                                    bool remove) {
  cprof__heap_live_entry e = {0, 0, false};
  /* An empty set answers from the line every free() reads: the pointers
   * the allocator puts on a page boundary by chance get no further. A
   * block's insert is seen here, as the count is raised before the
   * block is handed out. */
  if (!p || LOAD(cprof__heap_hot.listed) == 0) return e;
  if ((uintptr_t)p & (PAGE - 1)) {
    /* Off a page boundary, a slot that holds p says it is listed; with
     * none spilled, no slot holding it says it is not. */
    if (!cprof__heap_unaligned_may_be(p)) return e;
    if (LOAD(cprof__heap_hot.unaligned_spilled) != 0 && !maybe_sampled(p))
      return e;
  } else if (!maybe_sampled(p)) {
    return e;
  }
  _Atomic uint32_t *b = &buckets[addr_hash(p) >> (64 - BUCKET_BITS)];
  for (uint32_t i = atomic_load_explicit(b, memory_order_acquire); i;
       i = atomic_load_explicit(&node_at(i - 1)->next, memory_order_acquire)) {
    live_node *n = node_at(i - 1);
    if (LOAD(n->addr) != (uintptr_t)p) continue;
    e.meta = LOAD(n->meta);
    e.delta = LOAD(n->delta);
    e.found = true;
    if (remove) {
      atomic_store_explicit(&n->addr, 0, memory_order_release);
      filter_add(p, -1);
      atomic_fetch_sub_explicit(&cprof__heap_hot.listed, 1,
                                memory_order_relaxed);
      if ((uintptr_t)p & (PAGE - 1)) {
        unaligned_remove(p);
        count_unaligned(-1);
      }
    }
    return e;
  }
  return e;
}

NO_SAN void cprof__heap_region_free(const void *p, size_t i) {
  if ((uintptr_t)p & (PAGE - 1)) return;
  uint64_t meta = atomic_exchange_explicit(&region_meta[i], 0,
                                           memory_order_acq_rel);
  if (!(meta & REGION_BUSY)) return;
  if (tls_spare)
    region_release(i);
  else
    tls_spare = (uint32_t)(i + 1);
}

NO_SAN void *cprof__heap_place_sampled(size_t n, bool zero,
                                       _Atomic uint64_t **meta) {
  if (cprof__heap_rate() < CPROF__HEAP_ALIGN_MIN_RATE ||
      n > CPROF__HEAP_META_SIZE_MASK)
    return NULL;
  int saved = errno;
  void *p = NULL;
  if (n <= PAGE) {
    p = region_alloc(n, meta);
    if (p && zero) memset(p, 0, n);
  }
  if (!p) {
    cprof__calloc_fn c = CPROF__ALLOC_LOAD(calloc);
    unsigned char *base = NULL;
    if (!zero)
      base = CPROF__ALLOC_LOAD(malloc)(n + PAGE);
    else if (c)
      base = c(1, n + PAGE);
    if (base) {
      unsigned char *a =
          (unsigned char *)(((uintptr_t)base + PAGE - 1) & ~(PAGE - 1));
      _Atomic uint64_t *m = cprof__heap_live_insert(a, n, (uint32_t)(a - base));
      if (m) {
        *meta = m;
        p = a;
      } else {
        CPROF__ALLOC_LOAD(free)(base);
      }
    }
  }
  errno = saved;
  return p;
}

NO_SAN void cprof__heap_count_untracked(void) {
  atomic_fetch_add_explicit(&untracked, 1, memory_order_relaxed);
}

_Atomic int64_t cprof__heap_copy_budget;

NO_SAN void cprof__heap_copy_earn(long rate) {
  /* A race may take the budget a share past its bound: no matter. */
  if (rate > 0 && LOAD(cprof__heap_copy_budget) < CPROF__HEAP_COPY_BUDGET_MAX)
    atomic_fetch_add_explicit(&cprof__heap_copy_budget,
                              rate / CPROF__HEAP_COPY_SHARE,
                              memory_order_relaxed);
}

NO_SAN bool cprof__heap_copy_spend(size_t n) {
  int64_t b = LOAD(cprof__heap_copy_budget);
  do {
    if (n > (uint64_t)CPROF__HEAP_COPY_BUDGET_MAX || b < (int64_t)n)
      return false;
  } while (!atomic_compare_exchange_weak_explicit(
      &cprof__heap_copy_budget, &b, b - (int64_t)n, memory_order_relaxed,
      memory_order_relaxed));
  return true;
}

/* The C++ allocation functions (cxx_interpose.c) share this sampler: see
 * heap_sampler.h. */
_Atomic uint64_t *const cprof__heap_unaligned_count =
    &cprof__heap_hot.unaligned_live;

NO_SAN void *cprof__heap_place(size_t n, _Atomic uint64_t **meta) {
  *meta = NULL;
  return cprof__heap_place_sampled(n, false, meta);
}

NO_SAN bool cprof__heap_release(void *p) {
  if (!p || CPROF__LIKELY(!cprof__heap_free_checks(p))) return false;
  if (cprof__in_arena(p)) return true; /* never freed */
  size_t page;
  if (cprof__heap_region_page_of(p, &page)) {
    cprof__heap_region_free(p, page);
    return true;
  }
  uint32_t delta = cprof__heap_live_find(p, true).delta;
  if (delta == 0) return false;
  CPROF__ALLOC_LOAD(free)((unsigned char *)p - delta);
  return true;
}

/* Calls fn with the tracking word of every live sampled block, skipping
 * those kept only for their offset (stack id 0). Blocks allocated or freed
 * meanwhile may or may not be seen. Uninstrumented like the interposers
 * that write the set: its chunks are published by their (uninstrumented)
 * atomics, which a sanitizer cannot see order the chunk's mapping before
 * this read. */
NO_SAN static void foreach_live(void (*fn)(uint64_t meta, void *ctx),
                                void *ctx) {
  size_t used = atomic_load_explicit(&nodes_used, memory_order_acquire);
  if (used > LIVE_NODES) used = LIVE_NODES;
  for (size_t k = 0; k * NODE_CHUNK < used; k++) {
    /* A chunk whose mapping failed is skipped. */
    live_node *c = atomic_load_explicit(&node_chunks[k], memory_order_acquire);
    size_t end = used - k * NODE_CHUNK;
    if (end > NODE_CHUNK) end = NODE_CHUNK;
    for (size_t i = 0; c && i < end; i++) {
      uint64_t m = LOAD(c[i].meta);
      if (LOAD(c[i].addr) != 0 && m >> CPROF__HEAP_META_SIZE_BITS) fn(m, ctx);
    }
  }
  size_t pages = LOAD(region_used);
  if (pages > REGION_PAGES) pages = REGION_PAGES;
  for (size_t i = 0; i < pages; i++) {
    uint64_t m = LOAD(region_meta[i]);
    if (m >> CPROF__HEAP_META_SIZE_BITS) fn(m & ~REGION_BUSY, ctx);
  }
}

static void count_live(uint64_t meta, void *ctx) {
  (void)meta;
  ++*(uint64_t *)ctx;
}

/* Counted when asked, not kept: a counter every sample and every sampled
 * free updated was a cache line both threads of a churn fought over. */
uint64_t cprof__heap_live_sampled(void) {
  uint64_t n = 0;
  foreach_live(count_live, &n);
  return n;
}

void cprof__heap_thread_exit(void) {
  if (tls_spare) region_release(tls_spare - 1);
  tls_spare = 0;
}

uint64_t cprof__heap_region_pages(void) {
  size_t used = LOAD(region_used);
  return used < REGION_PAGES ? used : REGION_PAGES;
}

uint64_t cprof__heap_unaligned_live(void) {
  return LOAD(cprof__heap_hot.unaligned_live);
}

uint64_t cprof__heap_untracked(void) { return LOAD(untracked); }
uint64_t cprof__heap_grow_failures(void) { return LOAD(grow_failures); }

typedef struct live_ctx {
  void (*fn)(cprof__stack_id sid, size_t size, void *ctx);
  void *ctx;
} live_ctx;

static void decode_live(uint64_t meta, void *ctx) {
  live_ctx *c = ctx;
  c->fn((cprof__stack_id)(meta >> CPROF__HEAP_META_SIZE_BITS),
        (size_t)(meta & CPROF__HEAP_META_SIZE_MASK), c->ctx);
}

void cprof__heap_foreach_live(void (*fn)(cprof__stack_id sid, size_t size,
                                         void *ctx),
                              void *ctx) {
  live_ctx c = {fn, ctx};
  foreach_live(decode_live, &c);
}
