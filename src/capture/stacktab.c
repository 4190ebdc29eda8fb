/*
 * The stack table. It owns one anonymous mapping, reserved by
 * cprof__stacktab_init() and never freed: a header, an open-addressing array
 * of slots (linear probing, at most 75% full) and a pool of frames handed out
 * by an atomic bump pointer. cprof__stacktab_intern() and _get() run in
 * signal context: they must never lock, allocate, wait for another thread or
 * change errno. Initialisation may call mmap and runs in normal context only.
 *
 * A slot is empty while its hash is 0. An inserter claims it by setting the
 * hash with compare-and-swap, takes frames from the pool, copies the stack
 * and publishes the slot by a release store of its state. Because a signal
 * handler may interrupt the very thread that claimed a slot, nobody waits for
 * a claimed slot to become ready: a lookup that meets one skips it and keeps
 * probing, so a stack being inserted concurrently can end up with two ids.
 * Readers merge stacks by content, so the duplicate costs only space.
 *
 * An id is its slot's index plus 2, which keeps 0 (none) and 1 (overflow)
 * free and makes _get() a single indexed load.
 */
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "capture/stack.h"
#include "capture/stacktab.h"

#define CPROF__STACKTAB_SLOTS ((size_t)1 << 16)
#define CPROF__STACKTAB_FRAMES ((size_t)2 << 20)

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "the stack table needs lock-free atomics to be signal-safe");

enum {
  SLOT_PENDING = 0, /* empty, or claimed and being written */
  SLOT_READY = 1,   /* frames published */
  SLOT_DEAD = 2     /* claimed, but the frame pool ran out: skipped forever */
};

typedef struct {
  _Atomic uint64_t hash; /* 0 while empty */
  _Atomic uint32_t state;
  uint32_t n;   /* depth, valid once READY */
  uint32_t off; /* index of the first frame in the pool */
} slot;

typedef struct {
  size_t nslots; /* a power of two */
  size_t limit;  /* claims allowed: 75% of nslots */
  size_t nframes;
  slot *slots;
  uintptr_t *pool;
  size_t map_len;
  _Atomic size_t claimed;
  _Atomic size_t pool_used;
  _Atomic size_t size;
  _Atomic uint64_t overflows;
} table;

static _Atomic(table *) the_table;

static const uintptr_t overflow_stack[1] = {CPROF__PC_OVERFLOW};

static size_t align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

int cprof__stacktab_init_sized(size_t slots, size_t frames) {
  if (atomic_load_explicit(&the_table, memory_order_acquire)) return 0;
  size_t nslots = 4;
  while (nslots < slots) nslots <<= 1;
  if (frames < 1 || nslots > (size_t)UINT32_MAX - 2 ||
      frames > (size_t)UINT32_MAX)
    return CPROF_EINVAL;

  size_t slots_at = align_up(sizeof(table), 64);
  size_t pool_at = align_up(slots_at + nslots * sizeof(slot), 64);
  size_t len = align_up(pool_at + frames * sizeof(uintptr_t), 4096);
  void *map = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return CPROF_ENOMEM;

  /* The mapping is zero-filled: every slot starts empty and every counter
   * at zero. */
  table *t = map;
  t->nslots = nslots;
  t->limit = nslots / 4 * 3;
  t->nframes = frames;
  t->slots = (slot *)((char *)map + slots_at);
  t->pool = (uintptr_t *)((char *)map + pool_at);
  t->map_len = len;

  table *expected = NULL;
  if (!atomic_compare_exchange_strong_explicit(&the_table, &expected, t,
                                               memory_order_acq_rel,
                                               memory_order_acquire))
    munmap(map, len); /* another thread won the race; its table stands */
  return 0;
}

void cprof__stacktab_reset_for_tests(void) {
  table *t = atomic_exchange(&the_table, NULL);
  if (t) munmap(t, t->map_len);
}

int cprof__stacktab_init(void) {
  return cprof__stacktab_init_sized(CPROF__STACKTAB_SLOTS,
                                    CPROF__STACKTAB_FRAMES);
}

/* A 64-bit hash of the frames, never 0 (0 marks an empty slot). */
uint64_t cprof__stacktab_hash(const uintptr_t *pcs, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
  for (size_t i = 0; i < n; i++) {
    h ^= (uint64_t)pcs[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h ? h : 1;
}

static cprof__stack_id overflow(table *t) {
  atomic_fetch_add_explicit(&t->overflows, 1, memory_order_relaxed);
  return CPROF__STACK_OVERFLOW;
}

/* Fills a slot this thread has claimed. */
static cprof__stack_id fill(table *t, size_t i, const uintptr_t *pcs,
                            size_t n) {
  slot *s = &t->slots[i];
  size_t off =
      atomic_fetch_add_explicit(&t->pool_used, n, memory_order_relaxed);
  if (off > t->nframes || n > t->nframes - off) {
    atomic_store_explicit(&s->state, SLOT_DEAD, memory_order_relaxed);
    return overflow(t);
  }
  memcpy(&t->pool[off], pcs, n * sizeof(uintptr_t));
  s->n = (uint32_t)n;
  s->off = (uint32_t)off;
  atomic_store_explicit(&s->state, SLOT_READY, memory_order_release);
  atomic_fetch_add_explicit(&t->size, 1, memory_order_relaxed);
  return (cprof__stack_id)(i + 2);
}

CPROF__SIGNAL_SAFE cprof__stack_id cprof__stacktab_intern(const uintptr_t *pcs, size_t n) {
  table *t = atomic_load_explicit(&the_table, memory_order_acquire);
  if (!t) return CPROF__STACK_OVERFLOW;
  if (!pcs || n == 0 || n > CPROF__STACK_BUF) return overflow(t);

  uint64_t h = cprof__stacktab_hash(pcs, n);
  size_t mask = t->nslots - 1;
  size_t i = (size_t)h & mask;
  for (size_t probes = 0; probes < t->nslots; probes++, i = (i + 1) & mask) {
    slot *s = &t->slots[i];
    uint64_t cur = atomic_load_explicit(&s->hash, memory_order_acquire);
    if (cur == 0) {
      /* The stack is not in the table (short of a racing insert). */
      if (atomic_load_explicit(&t->claimed, memory_order_relaxed) >=
              t->limit ||
          atomic_load_explicit(&t->pool_used, memory_order_relaxed) + n >
              t->nframes)
        return overflow(t);
      if (atomic_compare_exchange_strong_explicit(&s->hash, &cur, h,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire)) {
        atomic_fetch_add_explicit(&t->claimed, 1, memory_order_relaxed);
        return fill(t, i, pcs, n);
      }
      /* Lost the claim: cur now holds the winner's hash. */
    }
    if (cur != h) continue;
    if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_READY)
      continue; /* being written, perhaps by the thread we interrupted */
    if (s->n == n && memcmp(&t->pool[s->off], pcs, n * sizeof(uintptr_t)) == 0)
      return (cprof__stack_id)(i + 2);
  }
  return overflow(t);
}

size_t cprof__stacktab_get(cprof__stack_id id, const uintptr_t **pcs) {
  if (id == CPROF__STACK_OVERFLOW) {
    *pcs = overflow_stack;
    return 1;
  }
  table *t = atomic_load_explicit(&the_table, memory_order_acquire);
  if (!t || id < 2 || (size_t)id - 2 >= t->nslots) return 0;
  slot *s = &t->slots[id - 2];
  if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_READY)
    return 0;
  *pcs = &t->pool[s->off];
  return s->n;
}

uint64_t cprof__stacktab_overflows(void) {
  table *t = atomic_load_explicit(&the_table, memory_order_acquire);
  return t ? atomic_load_explicit(&t->overflows, memory_order_relaxed) : 0;
}

size_t cprof__stacktab_size(void) {
  table *t = atomic_load_explicit(&the_table, memory_order_acquire);
  return t ? atomic_load_explicit(&t->size, memory_order_relaxed) : 0;
}
