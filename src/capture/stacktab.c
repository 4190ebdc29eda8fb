/*
 * The stack table. It owns one anonymous mapping made by
 * cprof__stacktab_init() and never freed (a header; an open-addressing
 * index, linear probing, at most 75% full; and the records the index
 * points to, handed out in order), and a pool of frames handed out by an
 * atomic bump pointer. The pool is a fixed table of chunks, each mapped
 * the first time a stack needs it and published by compare-and-swap, so
 * that loading cprof reserves only the index and the records; a chunk
 * never moves once published. cprof__stacktab_intern() and _get() run in
 * signal context: they must never lock, allocate (but map a chunk by a raw
 * system call), wait for another thread or change errno. Initialisation
 * may call mmap and runs in normal context only.
 *
 * An index entry is 0 while empty, else the high half of its stack's hash
 * and its record's number plus 1. An inserter takes the next record, takes
 * frames from the pool, copies the stack, marks the record ready, and only
 * then publishes it by a compare-and-swap of an empty entry: a lookup
 * never meets a stack being written, and a signal handler that interrupts
 * an inserter simply inserts too. When two threads insert the same new
 * stack at once, the loser finds the winner's entry and takes its id; its
 * own record stays unused, so a duplicate costs only space (readers merge
 * stacks by content anyway).
 *
 * The records are dense: a program's first thousand stacks fill a few
 * pages of them, and the 8-byte index entries a third as many pages as
 * 24-byte slots scattered by hash did (each page first touched is a page
 * fault: a compiler's 1,063 heap stacks touched 384 pages of slots).
 *
 * A stack's frames lie in one chunk: one that would cross a chunk's end
 * starts the next chunk instead. When a chunk cannot be mapped (`ulimit -v`),
 * the stack goes to the overflow id like one that finds the table full, and
 * a later stack tries the mapping again.
 *
 * An id is its record's number plus 2, which keeps 0 (none) and 1
 * (overflow) free and makes _get() a single indexed load.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include "base/mem.h"
#include "base/sys.h"
#include "capture/stack.h"
#include "capture/stacktab.h"

#define CPROF__STACKTAB_SLOTS ((size_t)1 << 16)
#define CPROF__STACKTAB_FRAMES ((size_t)2 << 20)
/* The frame pool's chunks: at most POOL_CHUNKS of them, 16 Ki frames
 * (128 KiB) each for the default pool, larger for a larger one. */
#define POOL_CHUNKS 128
#define POOL_CHUNK_SHIFT 14

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "the stack table needs lock-free atomics to be signal-safe");

enum {
  REC_PENDING = 0, /* taken and being written (never indexed) */
  REC_READY = 1    /* frames copied: the record may be indexed */
};

typedef struct {
  uint64_t hash;
  _Atomic uint32_t state;
  uint32_t n;   /* depth, valid once READY */
  uint32_t off; /* index of the first frame in the pool */
} record;

typedef struct {
  size_t nslots; /* index entries, a power of two */
  size_t limit;  /* records: 75% of nslots */
  size_t nframes;
  unsigned chunk_shift; /* frames per chunk: 1 << chunk_shift */
  _Atomic uint64_t *index;
  record *recs;
  size_t map_len;
  _Atomic(uintptr_t *) pool[POOL_CHUNKS]; /* NULL until first needed */
  _Atomic size_t claimed; /* records taken (may pass limit) */
  _Atomic size_t pool_used;
  _Atomic size_t size;
  _Atomic uint64_t overflows;
  _Atomic uint64_t written[]; /* a bit per page of the index written */
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

  /* Chunks of 16 Ki frames, or fewer for a smaller pool (but room for the
   * deepest stack), or more when POOL_CHUNKS of them would not hold the
   * pool. */
  unsigned shift = 8;
  while (shift < POOL_CHUNK_SHIFT && ((size_t)1 << shift) < frames) shift++;
  while (((frames - 1) >> shift) + 1 > POOL_CHUNKS) shift++;

  size_t limit = nslots / 4 * 3;
  /* The index starts on a page of its own, so that its written bits
   * (cprof__page_unwritten) count its own pages. */
  size_t words = cprof__page_words(nslots * sizeof(uint64_t));
  size_t index_at = align_up(sizeof(table) + words * sizeof(uint64_t), 4096);
  size_t recs_at = align_up(index_at + nslots * sizeof(uint64_t), 64);
  size_t len = align_up(recs_at + limit * sizeof(record), 4096);
  void *map = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return CPROF_ENOMEM;

  /* The mapping is zero-filled: every entry starts empty, every counter at
   * zero and every chunk unmapped. */
  table *t = map;
  t->nslots = nslots;
  t->limit = limit;
  t->nframes = frames;
  t->chunk_shift = shift;
  t->index = (_Atomic uint64_t *)((char *)map + index_at);
  t->recs = (record *)((char *)map + recs_at);
  t->map_len = len;

  table *expected = NULL;
  if (!atomic_compare_exchange_strong_explicit(&the_table, &expected, t,
                                               memory_order_acq_rel,
                                               memory_order_acquire))
    munmap(map, len); /* another thread won the race; its table stands */
  return 0;
}

CPROF__SIGNAL_SAFE static size_t chunk_bytes(const table *t) {
  return ((size_t)1 << t->chunk_shift) * sizeof(uintptr_t);
}

void cprof__stacktab_reset_for_tests(void) {
  table *t = atomic_exchange(&the_table, NULL);
  if (!t) return;
  for (size_t k = 0; k < POOL_CHUNKS; k++) {
    uintptr_t *c = atomic_load(&t->pool[k]);
    if (c) munmap(c, chunk_bytes(t));
  }
  munmap(t, t->map_len);
}

int cprof__stacktab_init(void) {
  return cprof__stacktab_init_sized(CPROF__STACKTAB_SLOTS,
                                    CPROF__STACKTAB_FRAMES);
}

/* A 64-bit hash of the frames, never 0 (0 marks an empty slot). */
CPROF__SIGNAL_SAFE uint64_t cprof__stacktab_hash(const uintptr_t *pcs, size_t n) {
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

CPROF__SIGNAL_SAFE static cprof__stack_id overflow(table *t) {
  atomic_fetch_add_explicit(&t->overflows, 1, memory_order_relaxed);
  return CPROF__STACK_OVERFLOW;
}

/* The frame at pool index off, in a chunk already mapped. */
CPROF__SIGNAL_SAFE static inline uintptr_t *frame_at(table *t, size_t off) {
  uintptr_t *c = atomic_load_explicit(&t->pool[off >> t->chunk_shift],
                                      memory_order_relaxed);
  return c + (off & (((size_t)1 << t->chunk_shift) - 1));
}

/* Chunk k of the pool, mapped now if no thread has yet; NULL when the
 * mapping fails. Two threads may map it at once: the loser unmaps its
 * copy. */
CPROF__SIGNAL_SAFE static uintptr_t *pool_chunk(table *t, size_t k) {
  uintptr_t *c = atomic_load_explicit(&t->pool[k], memory_order_acquire);
  if (c) return c;
  uintptr_t *m = cprof__sys_map(chunk_bytes(t));
  if (!m) return NULL;
  if (atomic_compare_exchange_strong_explicit(&t->pool[k], &c, m,
                                              memory_order_acq_rel,
                                              memory_order_acquire))
    return m;
  cprof__sys_unmap(m, chunk_bytes(t));
  return c;
}

/* Where the next n frames would go: at pool_used, or at the next chunk's
 * start if they would cross this chunk's end. */
CPROF__SIGNAL_SAFE static inline size_t frames_start(const table *t, size_t cur, size_t n) {
  size_t mask = ((size_t)1 << t->chunk_shift) - 1;
  return (cur & mask) + n > mask + 1 ? (cur | mask) + 1 : cur;
}

/* Takes n frames from the pool, in one mapped chunk; false when the pool
 * is used up or its next chunk cannot be mapped (the frames are given back
 * when no other thread took any meanwhile). */
CPROF__SIGNAL_SAFE static bool take_frames(table *t, size_t n, size_t *out) {
  size_t cur = atomic_load_explicit(&t->pool_used, memory_order_relaxed);
  size_t off;
  do {
    off = frames_start(t, cur, n);
    if (off > t->nframes || n > t->nframes - off) return false;
  } while (!atomic_compare_exchange_weak_explicit(
      &t->pool_used, &cur, off + n, memory_order_relaxed,
      memory_order_relaxed));
  if (!pool_chunk(t, off >> t->chunk_shift)) {
    size_t mine = off + n;
    atomic_compare_exchange_strong_explicit(&t->pool_used, &mine, cur,
                                            memory_order_relaxed,
                                            memory_order_relaxed);
    return false;
  }
  *out = off;
  return true;
}

/* Whether the chunk the next n frames would go to is mapped (mapping it
 * now if need be), checked before a record is taken, so that a pool that
 * cannot grow does not use up records. */
CPROF__SIGNAL_SAFE static bool pool_ready(table *t, size_t n) {
  size_t off = frames_start(
      t, atomic_load_explicit(&t->pool_used, memory_order_relaxed), n);
  if (off > t->nframes || n > t->nframes - off) return false;
  return pool_chunk(t, off >> t->chunk_shift) != NULL;
}

/* Takes a record and copies the stack into it; its number, or -1 when the
 * records or the frame pool are used up. */
CPROF__SIGNAL_SAFE static long make_record(table *t, uint64_t h,
                                           const uintptr_t *pcs, size_t n) {
  if (atomic_load_explicit(&t->claimed, memory_order_relaxed) >= t->limit ||
      !pool_ready(t, n))
    return -1;
  size_t r = atomic_fetch_add_explicit(&t->claimed, 1, memory_order_relaxed);
  size_t off;
  if (r >= t->limit || !take_frames(t, n, &off)) return -1;
  record *rec = &t->recs[r];
  memcpy(frame_at(t, off), pcs, n * sizeof(uintptr_t));
  rec->hash = h;
  rec->n = (uint32_t)n;
  rec->off = (uint32_t)off;
  atomic_store_explicit(&rec->state, REC_READY, memory_order_release);
  return (long)r;
}

CPROF__SIGNAL_SAFE cprof__stack_id cprof__stacktab_intern(const uintptr_t *pcs, size_t n) {
  table *t = atomic_load_explicit(&the_table, memory_order_acquire);
  if (!t) return CPROF__STACK_OVERFLOW;
  if (!pcs || n == 0 || n > CPROF__STACK_BUF) return overflow(t);

  uint64_t h = cprof__stacktab_hash(pcs, n);
  uint64_t tag = h >> 32 << 32;
  size_t mask = t->nslots - 1;
  size_t i = (size_t)h & mask;
  long mine = -1; /* this call's record, once made */
  for (size_t probes = 0; probes < t->nslots; probes++, i = (i + 1) & mask) {
    uint64_t e =
        cprof__page_unwritten(t->written, i * sizeof *t->index)
            ? atomic_fetch_add_explicit(&t->index[i], 0, memory_order_acquire)
            : atomic_load_explicit(&t->index[i], memory_order_acquire);
    if (e == 0) {
      /* The stack is not in the table (short of a racing insert). */
      if (mine < 0 && (mine = make_record(t, h, pcs, n)) < 0)
        return overflow(t);
      if (atomic_compare_exchange_strong_explicit(
              &t->index[i], &e, tag | (uint64_t)(mine + 1),
              memory_order_acq_rel, memory_order_acquire)) {
        atomic_fetch_add_explicit(&t->size, 1, memory_order_relaxed);
        return (cprof__stack_id)(mine + 2);
      }
      /* Lost the entry: e now holds the winner's. */
    }
    if ((e & ~(uint64_t)UINT32_MAX) != tag) continue;
    size_t r = (size_t)(uint32_t)e - 1;
    if (r >= t->limit) continue;
    const record *rec = &t->recs[r];
    if (atomic_load_explicit(&rec->state, memory_order_acquire) != REC_READY)
      continue;
    if (rec->hash == h && rec->n == n &&
        memcmp(frame_at(t, rec->off), pcs, n * sizeof(uintptr_t)) == 0)
      return (cprof__stack_id)(r + 2);
  }
  return overflow(t);
}

size_t cprof__stacktab_get(cprof__stack_id id, const uintptr_t **pcs) {
  if (id == CPROF__STACK_OVERFLOW) {
    *pcs = overflow_stack;
    return 1;
  }
  table *t = atomic_load_explicit(&the_table, memory_order_acquire);
  if (!t || id < 2 || (size_t)id - 2 >= t->limit) return 0;
  const record *rec = &t->recs[id - 2];
  if (atomic_load_explicit(&rec->state, memory_order_acquire) != REC_READY)
    return 0;
  *pcs = frame_at(t, rec->off);
  return rec->n;
}

uint64_t cprof__stacktab_overflows(void) {
  table *t = atomic_load_explicit(&the_table, memory_order_acquire);
  return t ? atomic_load_explicit(&t->overflows, memory_order_relaxed) : 0;
}

size_t cprof__stacktab_size(void) {
  table *t = atomic_load_explicit(&the_table, memory_order_acquire);
  return t ? atomic_load_explicit(&t->size, memory_order_relaxed) : 0;
}
