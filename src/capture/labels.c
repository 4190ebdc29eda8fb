/*
 * Label sets (labels.h). A set is one allocation: the header, then its
 * strings; it is filled in, then published into the id table with a
 * release store, and never written again, so a signal handler holding its
 * pointer reads it without a lock. Making sets takes a lock and an index
 * by content, so the same pairs always give the same set; sets are never
 * freed (a process makes a bounded number: CPROF__LABELSETS_MAX).
 * Calls base/ and capture/stacktab only.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/fork.h"
#include "base/hmap.h"
#include "base/lock.h"
#include "base/mem.h"
#include "capture/saferead.h"
#include "capture/labels.h"
#include "capture/stack.h"

struct cprof_labels {
  uint32_t id; /* index into sets + 1 */
  uint32_t n;  /* pairs */
  const char *kv[2 * CPROF_LABELS_MAX_PAIRS];
};

static _Atomic(const cprof_labels *) sets[CPROF__LABELSETS_MAX];
static _Atomic uint32_t nsets;
static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;
static cprof__hmap by_hash; /* content hash (+ probe) -> id, under make_lock */

/* The calling thread's current set, and its thread id once the thread
 * has published where this record is (publish_thread), so that a sampler
 * on another thread can read it (cprof__labels_of). */
typedef struct thread_labels {
  const cprof_labels *set;
  pid_t tid;
} thread_labels;
static __thread thread_labels tls CPROF__TLS;

/*
 * Where each thread that ever took a set keeps its record: {tid, address
 * of its thread_labels}, open addressing, lock-free. An entry is never
 * removed; it is stale once the record at its address no longer names its
 * tid (the thread exited and the memory went to another thread, or was
 * unmapped), and a publishing thread takes over a stale entry on its probe
 * path. Readers check the record's tid, and the set it points to against
 * the id table, so a stale or racing entry reads as "no labels".
 */
#define THREAD_SLOTS 8192
#define THREAD_PROBE 64
static struct {
  _Atomic pid_t tid;
  _Atomic uintptr_t at;
} threads_tab[THREAD_SLOTS];

static size_t thread_slot(pid_t tid) {
  return (size_t)(((uint32_t)tid * 2654435761u) >> 19) & (THREAD_SLOTS - 1);
}

/* The record at an entry, read without faulting; false when unreadable. */
static bool read_record(uintptr_t at, thread_labels *out) {
  return at && cprof__safe_read(at, out, sizeof *out);
}

static void publish_thread(void) {
  pid_t tid = (pid_t)syscall(SYS_gettid);
  tls.tid = tid;
  size_t at = thread_slot(tid);
  for (int i = 0; i < THREAD_PROBE; i++, at = (at + 1) & (THREAD_SLOTS - 1)) {
    pid_t cur = atomic_load(&threads_tab[at].tid);
    thread_labels rec;
    bool stale = cur != 0 && cur != tid &&
                 !(read_record(atomic_load(&threads_tab[at].at), &rec) &&
                   rec.tid == cur);
    if (cur == tid || ((cur == 0 || stale) &&
                       atomic_compare_exchange_strong(&threads_tab[at].tid,
                                                      &cur, tid))) {
      atomic_store(&threads_tab[at].at, (uintptr_t)&tls);
      return;
    }
  }
}

/* A fork child may inherit make_lock held by a thread it does not have;
 * its one thread has a new id, and the others' entries are gone. */
static void child_after_fork(void) {
  pthread_mutex_init(&make_lock, NULL);
  memset(threads_tab, 0, sizeof threads_tab);
  if (tls.tid) publish_thread();
}

static void fork_init(void) {
  cprof__atfork(CPROF__FORK_LABELS, NULL, NULL, child_after_fork);
}

const cprof_labels *cprof_labels_current(void) { return tls.set; }

const cprof_labels *cprof_labels_push(const cprof_labels *set) {
  const cprof_labels *prev = tls.set;
  if (set && !tls.tid) publish_thread();
  tls.set = set;
  atomic_signal_fence(memory_order_seq_cst);
  return prev;
}

void cprof_labels_pop(const cprof_labels *previous) {
  tls.set = previous;
  atomic_signal_fence(memory_order_seq_cst);
}

void cprof_do(const cprof_labels *set, void (*fn)(void *arg), void *arg) {
  const cprof_labels *prev = cprof_labels_push(set);
  if (fn) fn(arg);
  cprof_labels_pop(prev);
}

const char *cprof_labels_value(const cprof_labels *set, const char *key) {
  if (!set || !key) return NULL;
  for (uint32_t i = 0; i < set->n; i++)
    if (strcmp(set->kv[2 * i], key) == 0) return set->kv[2 * i + 1];
  return NULL;
}

size_t cprof__labels_pairs(const cprof_labels *set, const char *const **kv) {
  *kv = set->kv;
  return set->n;
}

static const cprof_labels *by_id(uintptr_t id) {
  if (id == 0 || id > atomic_load_explicit(&nsets, memory_order_acquire))
    return NULL;
  return atomic_load_explicit(&sets[id - 1], memory_order_acquire);
}

CPROF__SIGNAL_SAFE static size_t mark_set(uintptr_t *pcs, size_t n,
                                           size_t cap,
                                           const cprof_labels *set) {
  if (!set || cap < 2) return n;
  if (n >= cap) {
    n = cap - 1;
    pcs[n - 1] = CPROF__PC_TRUNCATED;
  }
  pcs[n] = CPROF__PC_LABELS | set->id;
  return n + 1;
}

CPROF__SIGNAL_SAFE size_t cprof__labels_mark(uintptr_t *pcs, size_t n,
                                             size_t cap) {
  return mark_set(pcs, n, cap, tls.set);
}

const cprof_labels *cprof__labels_strip(const uintptr_t *pcs, size_t *n) {
  if (*n == 0 || (pcs[*n - 1] & CPROF__PC_LABELS_MASK) != CPROF__PC_LABELS)
    return NULL;
  const cprof_labels *set = by_id(pcs[*n - 1] & ~CPROF__PC_LABELS_MASK);
  if (set) --*n;
  return set;
}

static cprof__stack_id restack(cprof__stack_id sid,
                               const cprof_labels *set) {
  const uintptr_t *pcs;
  size_t n = cprof__stacktab_get(sid, &pcs);
  if (n == 0) return sid;
  const cprof_labels *had = cprof__labels_strip(pcs, &n);
  if (had == set) return sid;
  uintptr_t buf[CPROF__STACK_BUF];
  if (n > CPROF__ARRAY_LEN(buf)) n = CPROF__ARRAY_LEN(buf);
  memcpy(buf, pcs, n * sizeof *buf);
  n = mark_set(buf, n, CPROF__ARRAY_LEN(buf), set);
  return cprof__stacktab_intern(buf, n);
}

cprof__stack_id cprof__labels_restack(cprof__stack_id sid) {
  return restack(sid, tls.set);
}

cprof__stack_id cprof__labels_restack_with(cprof__stack_id sid,
                                           const cprof_labels *set) {
  return restack(sid, set);
}

const cprof_labels *cprof__labels_of(pid_t tid) {
  size_t at = thread_slot(tid);
  for (int i = 0; i < THREAD_PROBE; i++, at = (at + 1) & (THREAD_SLOTS - 1)) {
    pid_t cur = atomic_load(&threads_tab[at].tid);
    if (cur == 0) return NULL;
    if (cur != tid) continue;
    thread_labels rec;
    uint32_t id;
    if (!read_record(atomic_load(&threads_tab[at].at), &rec) ||
        rec.tid != tid || !rec.set ||
        !cprof__safe_read((uintptr_t)rec.set, &id, sizeof id))
      return NULL;
    return by_id(id) == rec.set ? rec.set : NULL;
  }
  return NULL;
}

/* Pairs sorted by key, so equal contents compare equal. */
typedef struct pair {
  const char *k, *v;
} pair;

static int by_key(const void *a, const void *b) {
  return strcmp(((const pair *)a)->k, ((const pair *)b)->k);
}

static bool same(const cprof_labels *s, const pair *p, size_t n) {
  if (s->n != n) return false;
  for (size_t i = 0; i < n; i++)
    if (strcmp(s->kv[2 * i], p[i].k) || strcmp(s->kv[2 * i + 1], p[i].v))
      return false;
  return true;
}

/* Finds or makes the set of n sorted pairs; make_lock held. */
static int intern(const pair *p, size_t n, const cprof_labels **out) {
  uint64_t h = CPROF__HASH_SEED;
  for (size_t i = 0; i < n; i++) {
    h = cprof__hash_bytes(h, p[i].k, strlen(p[i].k) + 1);
    h = cprof__hash_bytes(h, p[i].v, strlen(p[i].v) + 1);
  }
  uint64_t id;
  for (uint64_t probe = h;; probe = probe + 1 ? probe + 1 : 1) {
    if (!cprof__hmap_get(&by_hash, probe, &id)) {
      h = probe;
      break;
    }
    const cprof_labels *s = by_id((uintptr_t)id);
    if (s && same(s, p, n)) {
      *out = s;
      return 0;
    }
  }
  uint32_t count = atomic_load_explicit(&nsets, memory_order_relaxed);
  if (count >= CPROF__LABELSETS_MAX) return CPROF_ENOMEM;
  size_t bytes = sizeof(cprof_labels);
  for (size_t i = 0; i < n; i++) bytes += strlen(p[i].k) + strlen(p[i].v) + 2;
  cprof_labels *s = cprof__calloc(1, bytes);
  if (!s) return CPROF_ENOMEM;
  if (cprof__hmap_put(&by_hash, h, count + 1) != 0) {
    cprof__free(s);
    return CPROF_ENOMEM;
  }
  char *str = (char *)(s + 1);
  for (size_t i = 0; i < n; i++) {
    for (int j = 0; j < 2; j++) {
      const char *from = j ? p[i].v : p[i].k;
      size_t len = strlen(from) + 1;
      memcpy(str, from, len);
      s->kv[2 * i + j] = str;
      str += len;
    }
  }
  s->n = (uint32_t)n;
  s->id = count + 1;
  atomic_store_explicit(&sets[count], s, memory_order_release);
  atomic_store_explicit(&nsets, count + 1, memory_order_release);
  *out = s;
  return 0;
}

int cprof_labels_new(const cprof_labels *base, const char *const *kv,
                     size_t npairs, const cprof_labels **out) {
  if (!out || (npairs && !kv)) return CPROF_EINVAL;
  *out = NULL;
  pair p[2 * CPROF_LABELS_MAX_PAIRS];
  size_t n = 0;
  if (base)
    for (uint32_t i = 0; i < base->n; i++)
      p[n++] = (pair){base->kv[2 * i], base->kv[2 * i + 1]};
  for (size_t i = 0; i < npairs; i++) {
    const char *k = kv[2 * i], *v = kv[2 * i + 1];
    if (!k || !v || !*k) return CPROF_EINVAL;
    size_t j = 0;
    while (j < n && strcmp(p[j].k, k) != 0) j++;
    if (j == n) {
      if (n == CPROF_LABELS_MAX_PAIRS) return CPROF_ENOMEM;
      n++;
    }
    p[j] = (pair){k, v};
  }
  if (n == 0) return 0; /* the empty set is "no labels" */
  qsort(p, n, sizeof *p, by_key);
  fork_init();
  cprof__lock(&make_lock);
  int err = intern(p, n, out);
  cprof__unlock(&make_lock);
  return err;
}
