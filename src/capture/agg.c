/*
 * Aggregation tables. A table owns one zeroed mapping made when it is
 * created: an open-addressing index (linear probing, at most 75% full),
 * then the records it points to, handed out in order: a key each, and
 * nvalues counters per record. It comes from mmap rather than calloc, so
 * that its pages are the kernel's zero pages until a key lands on them:
 * a table sized for thousands of stacks costs a program that records a
 * few almost nothing (calloc would clear it all whenever it came from the
 * heap). cprof__agg_add() runs in signal context: it only loads, CASes
 * and adds atomics, never locks, allocates or waits. Creation, foreach,
 * clear and free run in normal context.
 *
 * A key is (stack id << 32 | tag); 0 marks an empty record, which is why a
 * stack id of 0 (CPROF__STACK_NONE) is never stored. An index entry is 0
 * while empty, else its record's number plus 1. An adder that meets no
 * entry for its key takes a record, writes the key into it and publishes
 * it by a compare-and-swap of an empty entry, so a lookup never meets a
 * record without its key. When two threads add the same new key at once,
 * the loser finds the winner's entry and adds there; its own record, never
 * published, gets its key cleared and goes to a few spare slots for the
 * next new key (one that finds them all taken is lost, which the records'
 * slack beyond the capacity absorbs). The counters need no publication
 * step: they are zero until their record is published, so an adder that
 * finds the key (or wins it) just adds. Counters are added with relaxed
 * atomics; foreach sees each counter's value at some moment, not a
 * snapshot of the whole table.
 *
 * The records are dense: a profile's first thousand keys fill a few pages,
 * and the 4-byte index entries touch a page per 1,024 slots. Keys and
 * counters kept in slots scattered by hash made each new key fault in up to
 * two pages of a 1.5 MiB table: 700 faults in a compiler's run, each tens of
 * microseconds on a virtual machine.
 */
#include <stdatomic.h>
#include <sys/mman.h>

#include "capture/agg.h"
#include "base/mem.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "aggregation needs lock-free atomics to be signal-safe");

#define SPARES 8

struct cprof__agg {
  size_t nvalues;
  size_t capacity; /* keys allowed */
  size_t nslots;   /* index entries, a power of two, at least capacity * 4/3 */
  size_t nrecs;    /* records: capacity and a slack for lost races */
  _Atomic uint32_t *index;
  _Atomic uint64_t *keys; /* nrecs */
  _Atomic int64_t *vals;  /* nrecs * nvalues */
  size_t map_len;
  _Atomic size_t used;    /* keys published */
  _Atomic size_t claimed; /* records taken (may pass nrecs) */
  _Atomic uint64_t drops;
  _Atomic uint32_t spares[SPARES]; /* a record's number plus 1, or 0 */
  _Atomic uint64_t written[]; /* a bit per page of the index written */
};

cprof__agg *cprof__agg_new(size_t nvalues, size_t capacity) {
  if (nvalues == 0 || nvalues > CPROF__AGG_MAX_VALUES || capacity == 0 ||
      capacity > ((size_t)1 << 28))
    return NULL;
  size_t nslots = 4;
  while (nslots < capacity + capacity / 3 + 1) nslots <<= 1;

  size_t words = cprof__page_words(nslots * sizeof(uint32_t));
  cprof__agg *a = cprof__calloc(1, sizeof(*a) + words * sizeof(uint64_t));
  if (!a) return NULL;
  a->nvalues = nvalues;
  a->capacity = capacity;
  a->nslots = nslots;
  a->nrecs = capacity + capacity / 8 + SPARES;
  size_t index_len = nslots * sizeof(*a->index);
  size_t keys_len = a->nrecs * sizeof(*a->keys);
  a->map_len = index_len + keys_len + a->nrecs * nvalues * sizeof(*a->vals);
  void *map = mmap(NULL, a->map_len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) {
    cprof__free(a);
    return NULL;
  }
  a->index = map;
  a->keys = (_Atomic uint64_t *)((char *)map + index_len);
  a->vals = (_Atomic int64_t *)((char *)map + index_len + keys_len);
  return a;
}

void cprof__agg_free(cprof__agg *a) {
  if (!a) return;
  munmap((void *)a->index, a->map_len);
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

CPROF__SIGNAL_SAFE static void add_at(cprof__agg *a, size_t r,
                                      const int64_t *vals) {
  _Atomic int64_t *v = &a->vals[r * a->nvalues];
  for (size_t j = 0; j < a->nvalues; j++)
    if (vals[j]) atomic_fetch_add_explicit(&v[j], vals[j], memory_order_relaxed);
}

CPROF__SIGNAL_SAFE static bool drop(cprof__agg *a) {
  atomic_fetch_add_explicit(&a->drops, 1, memory_order_relaxed);
  return false;
}

/* A record for a new key: a spare one, else the next; -1 when none is
 * left. Its counters are zero. */
CPROF__SIGNAL_SAFE static long take_record(cprof__agg *a) {
  for (size_t s = 0; s < SPARES; s++) {
    uint32_t v = atomic_load_explicit(&a->spares[s], memory_order_relaxed);
    if (v && atomic_compare_exchange_strong_explicit(
                 &a->spares[s], &v, 0, memory_order_acquire,
                 memory_order_relaxed))
      return (long)v - 1;
  }
  size_t r = atomic_fetch_add_explicit(&a->claimed, 1, memory_order_relaxed);
  return r < a->nrecs ? (long)r : -1;
}

/* Gives back a record never published (its key cleared, so that foreach
 * skips it); lost when every spare slot is taken. */
CPROF__SIGNAL_SAFE static void park_record(cprof__agg *a, long r) {
  atomic_store_explicit(&a->keys[r], 0, memory_order_relaxed);
  for (size_t s = 0; s < SPARES; s++) {
    uint32_t v = 0;
    if (atomic_compare_exchange_strong_explicit(
            &a->spares[s], &v, (uint32_t)r + 1, memory_order_release,
            memory_order_relaxed))
      return;
  }
}

CPROF__SIGNAL_SAFE bool cprof__agg_add(cprof__agg *a, cprof__stack_id sid,
                                       uint32_t tag, const int64_t *vals) {
  if (sid == CPROF__STACK_NONE) return drop(a);
  uint64_t key = (uint64_t)sid << 32 | tag;
  size_t mask = a->nslots - 1;
  /* A stack's keys start within one window of CLUSTER entries: the tags
   * of a stack (the heap's size classes, say) share a page of the index
   * instead of landing on a page each, and every page first touched
   * costs a fault. */
  size_t i = (((size_t)mix(sid) & ~(size_t)(CLUSTER - 1)) |
              ((size_t)mix(key) & (CLUSTER - 1))) & mask;
  long mine = -1; /* this call's record, once taken */
  for (size_t probes = 0; probes < a->nslots; probes++, i = (i + 1) & mask) {
    uint32_t e =
        cprof__page_unwritten(a->written, i * sizeof *a->index)
            ? atomic_fetch_add_explicit(&a->index[i], 0, memory_order_acquire)
            : atomic_load_explicit(&a->index[i], memory_order_acquire);
    if (e == 0) {
      if (atomic_load_explicit(&a->used, memory_order_relaxed) >=
          a->capacity)
        break;
      if (mine < 0) {
        if ((mine = take_record(a)) < 0) return drop(a);
        atomic_store_explicit(&a->keys[mine], key, memory_order_relaxed);
      }
      if (atomic_compare_exchange_strong_explicit(
              &a->index[i], &e, (uint32_t)mine + 1, memory_order_acq_rel,
              memory_order_acquire)) {
        atomic_fetch_add_explicit(&a->used, 1, memory_order_relaxed);
        add_at(a, (size_t)mine, vals);
        return true;
      }
      /* Lost the entry: e now holds the winner's. */
    }
    size_t r = (size_t)e - 1;
    if (atomic_load_explicit(&a->keys[r], memory_order_relaxed) == key) {
      if (mine >= 0) park_record(a, mine);
      add_at(a, r, vals);
      return true;
    }
  }
  if (mine >= 0) park_record(a, mine);
  return drop(a);
}

/* Records taken so far (some may be spare or being written: key 0). */
static size_t records_taken(const cprof__agg *a) {
  size_t n = atomic_load_explicit(&((cprof__agg *)a)->claimed,
                                  memory_order_acquire);
  return n < a->nrecs ? n : a->nrecs;
}

void cprof__agg_foreach(cprof__agg *a,
                        void (*cb)(cprof__stack_id sid, uint32_t tag,
                                   const int64_t *vals, void *ctx),
                        void *ctx) {
  int64_t vals[CPROF__AGG_MAX_VALUES];
  size_t n = records_taken(a);
  for (size_t r = 0; r < n; r++) {
    uint64_t key = atomic_load_explicit(&a->keys[r], memory_order_relaxed);
    if (key == 0) continue;
    for (size_t j = 0; j < a->nvalues; j++)
      vals[j] = atomic_load_explicit(&a->vals[r * a->nvalues + j],
                                     memory_order_relaxed);
    cb((cprof__stack_id)(key >> 32), (uint32_t)key, vals, ctx);
  }
}

void cprof__agg_clear(cprof__agg *a) {
  size_t n = records_taken(a) * a->nvalues;
  for (size_t i = 0; i < n; i++)
    atomic_store_explicit(&a->vals[i], 0, memory_order_relaxed);
}

uint64_t cprof__agg_drops(const cprof__agg *a) {
  return atomic_load_explicit(&((cprof__agg *)a)->drops, memory_order_relaxed);
}

size_t cprof__agg_nvalues(const cprof__agg *a) { return a->nvalues; }
