/*
 * Aggregation tables. A table owns one zeroed mapping made when it is
 * created: open-addressing keys (linear probing), then nvalues counters per
 * key. It comes from mmap rather than calloc, so that its pages are the
 * kernel's zero pages until a key lands on them: a table sized for
 * thousands of stacks costs a program that records a few almost nothing
 * (calloc would clear it all whenever it came from the heap).
 * cprof__agg_add() runs in signal context: it only loads, CASes and adds
 * atomics, never locks, allocates or waits. Creation, foreach, clear
 * and free run in normal context.
 *
 * A key is (stack id << 32 | tag); 0 marks an empty slot, which is why a
 * stack id of 0 (CPROF__STACK_NONE) is never stored. A key is claimed by one
 * compare-and-swap. The counters need no publication step: they were zero
 * before the claim, so an adder that finds the key (or wins it) just adds.
 * Counters are added with relaxed atomics; foreach sees each counter's value
 * at some moment, not a snapshot of the whole table.
 */
#include <stdatomic.h>
#include <sys/mman.h>

#include "capture/agg.h"
#include "base/mem.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2,
               "aggregation needs lock-free 64-bit atomics to be signal-safe");

struct cprof__agg {
  size_t nvalues;
  size_t capacity; /* keys allowed */
  size_t nslots;   /* a power of two, at least capacity * 4 / 3 */
  _Atomic uint64_t *keys;
  _Atomic int64_t *vals; /* nslots * nvalues */
  size_t map_len;
  _Atomic size_t used;
  _Atomic uint64_t drops;
  /* One bit per GROUP slots that hold a key: the scans (foreach, clear)
   * visit only those, so a table mostly empty costs no fault on its
   * untouched pages (a fork child that dumps scanned all of them, 2 ms). */
  _Atomic uint64_t groups[];
};

#define GROUP ((size_t)512) /* a page of keys */

cprof__agg *cprof__agg_new(size_t nvalues, size_t capacity) {
  if (nvalues == 0 || nvalues > CPROF__AGG_MAX_VALUES || capacity == 0 ||
      capacity > ((size_t)1 << 40))
    return NULL;
  size_t nslots = 4;
  while (nslots < capacity + capacity / 3 + 1) nslots <<= 1;

  size_t words = (nslots / GROUP + 63) / 64 + 1;
  cprof__agg *a = cprof__calloc(1, sizeof(*a) + words * sizeof(uint64_t));
  if (!a) return NULL;
  a->nvalues = nvalues;
  a->capacity = capacity;
  a->nslots = nslots;
  size_t keys_len = nslots * sizeof(*a->keys);
  a->map_len = keys_len + nslots * nvalues * sizeof(*a->vals);
  void *map = mmap(NULL, a->map_len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) {
    cprof__free(a);
    return NULL;
  }
  a->keys = map;
  a->vals = (_Atomic int64_t *)((char *)map + keys_len);
  return a;
}

void cprof__agg_free(cprof__agg *a) {
  if (!a) return;
  munmap((void *)a->keys, a->map_len);
  cprof__free(a);
}

#define CLUSTER 64

CPROF__SIGNAL_SAFE static uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

CPROF__SIGNAL_SAFE static void add_at(cprof__agg *a, size_t i, const int64_t *vals) {
  _Atomic int64_t *v = &a->vals[i * a->nvalues];
  for (size_t j = 0; j < a->nvalues; j++)
    if (vals[j]) atomic_fetch_add_explicit(&v[j], vals[j], memory_order_relaxed);
}

CPROF__SIGNAL_SAFE static bool drop(cprof__agg *a) {
  atomic_fetch_add_explicit(&a->drops, 1, memory_order_relaxed);
  return false;
}

CPROF__SIGNAL_SAFE bool cprof__agg_add(cprof__agg *a, cprof__stack_id sid, uint32_t tag,
                    const int64_t *vals) {
  if (sid == CPROF__STACK_NONE) return drop(a);
  uint64_t key = (uint64_t)sid << 32 | tag;
  size_t mask = a->nslots - 1;
  /* A stack's keys start within one window of CLUSTER slots: the tags of
   * a stack (the heap's size classes, say) share a page or two of the
   * table instead of landing on a page each, and every page first
   * touched costs a fault. */
  size_t i = (((size_t)mix(sid) & ~(size_t)(CLUSTER - 1)) |
              ((size_t)mix(key) & (CLUSTER - 1))) & mask;
  for (size_t probes = 0; probes < a->nslots; probes++, i = (i + 1) & mask) {
    uint64_t cur = atomic_load_explicit(&a->keys[i], memory_order_relaxed);
    if (cur == 0) {
      if (atomic_load_explicit(&a->used, memory_order_relaxed) >= a->capacity)
        return drop(a);
      if (atomic_compare_exchange_strong_explicit(&a->keys[i], &cur, key,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
        atomic_fetch_add_explicit(&a->used, 1, memory_order_relaxed);
        atomic_fetch_or_explicit(&a->groups[i / GROUP / 64],
                                 (uint64_t)1 << (i / GROUP % 64),
                                 memory_order_relaxed);
        add_at(a, i, vals);
        return true;
      }
      /* Lost the claim: cur now holds the winner's key. */
    }
    if (cur == key) {
      add_at(a, i, vals);
      return true;
    }
  }
  return drop(a);
}

static bool group_used(const cprof__agg *a, size_t g) {
  return (atomic_load_explicit(&((cprof__agg *)a)->groups[g / 64],
                               memory_order_relaxed) >>
          (g % 64)) &
         1;
}

void cprof__agg_foreach(cprof__agg *a,
                        void (*cb)(cprof__stack_id sid, uint32_t tag,
                                   const int64_t *vals, void *ctx),
                        void *ctx) {
  int64_t vals[CPROF__AGG_MAX_VALUES];
  for (size_t g = 0; g * GROUP < a->nslots; g++) {
    if (!group_used(a, g)) continue;
    size_t end = (g + 1) * GROUP < a->nslots ? (g + 1) * GROUP : a->nslots;
    for (size_t i = g * GROUP; i < end; i++) {
      uint64_t key = atomic_load_explicit(&a->keys[i], memory_order_relaxed);
      if (key == 0) continue;
      for (size_t j = 0; j < a->nvalues; j++)
        vals[j] = atomic_load_explicit(&a->vals[i * a->nvalues + j],
                                       memory_order_relaxed);
      cb((cprof__stack_id)(key >> 32), (uint32_t)key, vals, ctx);
    }
  }
}

void cprof__agg_clear(cprof__agg *a) {
  for (size_t g = 0; g * GROUP < a->nslots; g++) {
    if (!group_used(a, g)) continue;
    size_t end = (g + 1) * GROUP < a->nslots ? (g + 1) * GROUP : a->nslots;
    for (size_t i = g * GROUP * a->nvalues; i < end * a->nvalues; i++)
      atomic_store_explicit(&a->vals[i], 0, memory_order_relaxed);
  }
}

uint64_t cprof__agg_drops(const cprof__agg *a) {
  return atomic_load_explicit(&((cprof__agg *)a)->drops, memory_order_relaxed);
}

size_t cprof__agg_nvalues(const cprof__agg *a) { return a->nvalues; }
