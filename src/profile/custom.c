/*
 * Custom profiles (custom.h). Each profile maps keys to the stack id that
 * added them, under its own lock; collecting counts the keys per stack
 * (labelled stacks apart), and writing is the shared count-profile writer,
 * so the formats, deltas and channels are those of threadcreate.
 *
 * The registry's definitions carry functions without a context, so each
 * of the CPROF__CUSTOM_MAX slots has its own three small functions that
 * pass their slot on (generated below); a profile takes the next free slot
 * and keeps it for the life of the process, as Go's profiles are never
 * unregistered. Calls base/, capture/ and encode/; normal context.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "base/hmap.h"
#include "base/lock.h"
#include "base/mem.h"
#include "capture/sample.h"
#include "capture/stack.h"
#include "capture/stacktab.h"
#include "encode/writer.h"
#include "profile/custom.h"
#include "profile/registry.h"

#define NAME_MAX_LEN 128

typedef struct entry {
  uintptr_t key;
  cprof__stack_id sid;
} entry;

struct cprof_profile {
  cprof__profile_def def;
  char *name, *description;
  pthread_mutex_t lock;
  entry *v; /* live keys, in no order */
  size_t len, cap;
  /* hkey(key) -> position in v + 1; 0 once removed. The map keeps the keys
   * it ever held, so it is rebuilt when most of them are gone. */
  cprof__hmap index;
  size_t dead;
};

static cprof_profile slots[CPROF__CUSTOM_MAX];
static _Atomic size_t nslots;
static pthread_mutex_t new_lock = PTHREAD_MUTEX_INITIALIZER;

/* hmap keys are nonzero: a key is held as key + 1 (UINTPTR_MAX, whose
 * + 1 is 0, is refused). */
static uint64_t hkey(uintptr_t key) { return (uint64_t)key + 1; }

static bool find(const cprof_profile *p, uintptr_t key, size_t *pos) {
  uint64_t at;
  if (!cprof__hmap_get(&p->index, hkey(key), &at) || at == 0) return false;
  *pos = (size_t)at - 1;
  return true;
}

static int rebuild(cprof_profile *p) {
  cprof__hmap fresh = {0};
  for (size_t i = 0; i < p->len; i++)
    if (cprof__hmap_put(&fresh, hkey(p->v[i].key), i + 1) != 0) {
      cprof__hmap_free(&fresh);
      return CPROF_ENOMEM;
    }
  cprof__hmap_free(&p->index);
  p->index = fresh;
  p->dead = 0;
  return 0;
}

int cprof_profile_add(cprof_profile *p, uintptr_t key, int skip) {
  if (!p || skip < 0 || key == UINTPTR_MAX) return CPROF_EINVAL;
  cprof__stack_refresh_try();
  /* From the caller of this function, skip more frames out. */
  const cprof__sample_at at = {.from = CPROF__SAMPLE_HERE,
                               .skip = 1 + (size_t)skip};
  cprof__stack_id sid = cprof__sample_stack(&at, CPROF__SAMPLE_LABELS);
  int err = 0;
  size_t pos;
  cprof__lock(&p->lock);
  if (find(p, key, &pos)) {
    err = CPROF_EDUPLICATE;
  } else if (p->len == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 16;
    entry *v = cprof__realloc(p->v, cap * sizeof *v);
    if (v) {
      p->v = v;
      p->cap = cap;
    } else {
      err = CPROF_ENOMEM;
    }
  }
  if (!err) err = cprof__hmap_put(&p->index, hkey(key), p->len + 1);
  if (!err) p->v[p->len++] = (entry){key, sid};
  cprof__unlock(&p->lock);
  return err;
}

int cprof_profile_remove(cprof_profile *p, uintptr_t key) {
  if (!p) return CPROF_EINVAL;
  size_t pos;
  int err = 0;
  cprof__lock(&p->lock);
  if (find(p, key, &pos)) {
    /* The last entry takes the removed one's place. */
    cprof__hmap_put(&p->index, hkey(key), 0);
    p->v[pos] = p->v[--p->len];
    if (pos < p->len) cprof__hmap_put(&p->index, hkey(p->v[pos].key), pos + 1);
    if (++p->dead > 2 * p->len + 64) err = rebuild(p);
  }
  cprof__unlock(&p->lock);
  return err == CPROF_ENOMEM ? 0 : err; /* a stale index is still right */
}

long cprof_profile_len(const cprof_profile *p) {
  if (!p) return CPROF_EINVAL;
  cprof_profile *m = (cprof_profile *)p;
  cprof__lock(&m->lock);
  long n = (long)m->len;
  cprof__unlock(&m->lock);
  return n;
}

/* The records: one count per (stack id) that holds keys. */
static int slot_collect(size_t slot, cprof__records *out) {
  cprof_profile *p = &slots[slot];
  cprof__hmap per_stack = {0}; /* sid -> record + 1 */
  int err = 0;
  out->time_ns = cprof__now_ns();
  cprof__lock(&p->lock);
  for (size_t i = 0; !err && i < p->len; i++) {
    uint64_t at;
    if (cprof__hmap_get(&per_stack, p->v[i].sid, &at)) {
      out->v[at - 1].v[0]++;
      continue;
    }
    const int64_t one = 1;
    err = cprof__records_add(out, p->v[i].sid, 0, &one, 1);
    if (!err) err = cprof__hmap_put(&per_stack, p->v[i].sid, out->len);
  }
  cprof__unlock(&p->lock);
  cprof__hmap_free(&per_stack);
  return err;
}

static long slot_entries(size_t slot) {
  return cprof_profile_len(&slots[slot]);
}

static int slot_write(size_t slot, const cprof__records *recs, int debug,
                      int64_t duration_ns, const cprof_sink *sink) {
  return cprof__write_count_profile(slots[slot].name, recs, debug,
                                    duration_ns, false, sink);
}

/* Each slot's functions. */
#define SLOT(id, i)                                                        \
  static int collect_##id(cprof__records *out) {                           \
    return slot_collect(i, out);                                           \
  }                                                                        \
  static long entries_##id(void) { return slot_entries(i); }               \
  static int write_##id(const cprof__records *r, int debug, int64_t ns,    \
                        const cprof_sink *sink) {                          \
    return slot_write(i, r, debug, ns, sink);                              \
  }
#define SLOT8(b)                                                           \
  SLOT(b##0, b * 8 + 0) SLOT(b##1, b * 8 + 1) SLOT(b##2, b * 8 + 2)        \
  SLOT(b##3, b * 8 + 3) SLOT(b##4, b * 8 + 4) SLOT(b##5, b * 8 + 5)        \
  SLOT(b##6, b * 8 + 6) SLOT(b##7, b * 8 + 7)
SLOT8(0) SLOT8(1) SLOT8(2) SLOT8(3) SLOT8(4) SLOT8(5) SLOT8(6) SLOT8(7)

typedef struct slot_fns {
  int (*collect)(cprof__records *);
  long (*entries)(void);
  int (*write)(const cprof__records *, int, int64_t, const cprof_sink *);
} slot_fns;

#define FNS(id) {collect_##id, entries_##id, write_##id}
#define FNS8(b) \
  FNS(b##0), FNS(b##1), FNS(b##2), FNS(b##3), FNS(b##4), FNS(b##5), \
  FNS(b##6), FNS(b##7)
static const slot_fns fns[CPROF__CUSTOM_MAX] = {
    FNS8(0), FNS8(1), FNS8(2), FNS8(3), FNS8(4), FNS8(5), FNS8(6), FNS8(7)};

/* Names no channel could carry, or that a route already takes. */
static bool name_ok(const char *name) {
  static const char *const taken[] = {"profile", "cpu",   "cmdline",
                                      "symbol",  "trace", "threads",
                                      "custom"};
  size_t len = strlen(name);
  if (len == 0 || len > NAME_MAX_LEN) return false;
  for (const char *c = name; *c; c++)
    if ((unsigned char)*c <= ' ' || *c == 0x7f || strchr(",=:?#%&\"", *c))
      return false;
  for (size_t i = 0; i < CPROF__ARRAY_LEN(taken); i++)
    if (strcmp(name, taken[i]) == 0) return false;
  return true;
}

static char *dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = cprof__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

int cprof_profile_new(const char *name, const char *description,
                      cprof_profile **out) {
  if (!out || !name) return CPROF_EINVAL;
  *out = NULL;
  if (!name_ok(name)) return CPROF_EINVAL;
  int err = 0;
  cprof__lock(&new_lock);
  size_t i = atomic_load(&nslots);
  cprof_profile *p = &slots[i < CPROF__CUSTOM_MAX ? i : 0];
  if (cprof__profile_find(name)) {
    err = CPROF_EEXIST;
  } else if (i == CPROF__CUSTOM_MAX) {
    err = CPROF_ENOMEM;
  } else if (!(p->name = dup(name)) ||
             !(p->description = dup(description ? description : ""))) {
    cprof__free(p->name);
    p->name = NULL;
    err = CPROF_ENOMEM;
  } else {
    pthread_mutex_init(&p->lock, NULL);
    p->def = (cprof__profile_def){
        .name = p->name,
        .description = p->description,
        .supports_delta = true,
        .max_debug = 2,
        .entries = fns[i].entries,
        .collect = fns[i].collect,
        .write = fns[i].write,
    };
    err = cprof__profile_register(&p->def);
    if (err) {
      cprof__free(p->name);
      cprof__free(p->description);
      p->name = p->description = NULL;
    } else {
      atomic_store(&nslots, i + 1);
      *out = p;
    }
  }
  cprof__unlock(&new_lock);
  return err;
}

size_t cprof__custom_count(void) { return atomic_load(&nslots); }

const char *cprof__custom_name(size_t i) {
  return i < atomic_load(&nslots) ? slots[i].name : NULL;
}
