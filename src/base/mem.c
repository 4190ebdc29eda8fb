/*
 * The profiler's own allocations and its re-entrancy guard (mem.h).
 * cprof's memory comes from its own heap (base/own_heap.h), or, under a
 * sanitizer and when that heap is full, from the allocator underneath
 * (base/real_alloc.h); never through cprof's own malloc interposers.
 * Blocks a library hands
 * over (realpath, __cxa_demangle) are freed through the process's free
 * (cprof__free_foreign). Calls only base/. Normal context only, except
 * cprof__guarded(), which signal handlers may read.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <stdatomic.h>

#include "base/mem.h"
#include "base/own_heap.h"
#include "base/real_alloc.h"

/* volatile: the compiler knows malloc and friends cannot read a static
 * whose address never escapes, and would otherwise drop the increments
 * around them as dead stores. */
__thread volatile int cprof__guard_depth CPROF__TLS;

/* Pulls init.c (the constructor) into every static link; see init.c. The
 * fuzzers' library leaves it out: the constructor would pull in the malloc
 * interposers, which must not stand in front of the sanitizer's allocator
 * there. */
#ifndef CPROF_NO_INIT_ANCHOR
extern const int cprof__init_anchor;
__attribute__((used)) static const int *const pull_in_init = &cprof__init_anchor;
#endif

/* What the guard does to the heap sampler's countdown (set by the
 * sampler when it installs): the outermost enter parks it and the
 * matching exit restores it. The depth changes first on the way in and
 * last on the way out, so a signal handler that enters in between finds
 * the thread already guarded and leaves the countdown alone. */
static void (*_Atomic park_hook)(void);
static void (*_Atomic unpark_hook)(void);

void cprof__guard_hooks(void (*park)(void), void (*unpark)(void)) {
  atomic_store(&unpark_hook, unpark);
  atomic_store(&park_hook, park);
}

void cprof__guard_enter(void) {
  if (cprof__guard_depth++ == 0) {
    void (*f)(void) = atomic_load_explicit(&park_hook, memory_order_relaxed);
    if (f) f();
  }
}

void cprof__guard_exit(void) {
  if (cprof__guard_depth == 1) {
    void (*f)(void) = atomic_load_explicit(&unpark_hook, memory_order_relaxed);
    if (f) f();
  }
  cprof__guard_depth--;
}

#ifdef __SANITIZE_ADDRESS__
/* AddressSanitizer's allocator stands before cprof's interposers in the
 * lookup order: cprof's own memory goes to it too, so that it checks
 * cprof's code as well. */
#define OWN(slot, type) ((type)process_fn(#slot, &own_##slot))
static _Atomic(void *) own_malloc, own_calloc, own_realloc, own_free;
#else
#define OWN(slot, type) CPROF__ALLOC_GET(slot)
#endif

/* name as the process sees it (the first definition in lookup order),
 * found once. */
__attribute__((unused)) static void *process_fn(const char *name,
                                                _Atomic(void *) *slot) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (!f) {
    f = dlsym(RTLD_DEFAULT, name);
    atomic_store_explicit(slot, f, memory_order_release);
  }
  return f;
}

void *cprof__malloc(size_t n) {
  if (CPROF__OWN_ENABLED) return cprof__own_malloc(n);
  cprof__guard_enter();
  void *p = OWN(malloc, cprof__malloc_fn)(n);
  cprof__guard_exit();
  return p;
}

void *cprof__calloc(size_t n, size_t size) {
  if (CPROF__OWN_ENABLED) return cprof__own_calloc(n, size);
  cprof__guard_enter();
  cprof__calloc_fn f = OWN(calloc, cprof__calloc_fn);
  void *p;
  if (f) {
    p = f(n, size);
  } else if (size && n > SIZE_MAX / size) {
    p = NULL;
  } else {
    /* Only while the allocator is being found: the arena is zeroed. */
    p = cprof__arena_alloc(16, n * size);
  }
  cprof__guard_exit();
  return p;
}

/* A block from the bootstrap arena (handed out only while the allocator
 * underneath was being found) is never given to the real allocator:
 * realloc copies it out, free leaves it. */
void *cprof__realloc(void *p, size_t n) {
  if (p && cprof__in_arena(p)) {
    void *q = cprof__malloc(n);
    size_t old = cprof__arena_size(p);
    if (q) memcpy(q, p, old < n ? old : n);
    return q;
  }
  if (CPROF__OWN_ENABLED && (!p || cprof__own_block(p)))
    return cprof__own_realloc(p, n);
  cprof__guard_enter();
  void *q = OWN(realloc, cprof__realloc_fn)(p, n);
  cprof__guard_exit();
  return q;
}

void cprof__free(void *p) {
  if (!p || cprof__in_arena(p)) return;
  if (CPROF__OWN_ENABLED && cprof__own_block(p)) {
    cprof__own_free(p);
    return;
  }
  cprof__guard_enter();
  OWN(free, cprof__free_fn)(p);
  cprof__guard_exit();
}

static _Atomic(void *) process_free;

void cprof__free_foreign(void *p) {
  if (!p) return;
  cprof__guard_enter();
  ((cprof__free_fn)process_fn("free", &process_free))(p);
  cprof__guard_exit();
}

char *cprof__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = cprof__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static int buf_reserve(cprof_buf *b, size_t extra) {
  if (extra <= b->cap - b->len) return 0;
  size_t want = b->len + extra;
  if (want < b->len) return CPROF_ENOMEM;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < want) {
    if (cap > SIZE_MAX / 2) return CPROF_ENOMEM;
    cap *= 2;
  }
  unsigned char *p = cprof__realloc(b->data, cap);
  if (!p) return CPROF_ENOMEM;
  b->data = p;
  b->cap = cap;
  return 0;
}

int cprof__buf_append(cprof_buf *b, const void *data, size_t n) {
  if (n == 0) return 0;
  int err = buf_reserve(b, n);
  if (err) return err;
  memcpy(b->data + b->len, data, n);
  b->len += n;
  return 0;
}

int cprof__buf_printf(cprof_buf *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return CPROF_EINVAL;
  if ((size_t)n < sizeof small) return cprof__buf_append(b, small, (size_t)n);
  int err = buf_reserve(b, (size_t)n + 1);
  if (err) return err;
  va_start(ap, fmt);
  vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

void cprof_buf_free(cprof_buf *b) {
  if (!b) return;
  cprof__free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
