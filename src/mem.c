/*
 * The profiler's own allocations and its re-entrancy guard. A thread-local
 * depth counter marks "inside cprof"; the heap sampler (when malloc is
 * interposed) neither samples nor counts allocations made while it is set.
 * Runs in normal context only, except cprof__guarded(), which signal
 * handlers may read.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap.h"
#include "mem.h"

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

/* The outermost enter parks the heap sampler's countdown and the matching
 * exit restores it (heap.h): the depth changes first on the way in and
 * last on the way out, so a signal handler that enters in between finds the
 * thread already guarded and leaves the countdown alone. */
void cprof__guard_enter(void) {
  if (cprof__guard_depth++ == 0) cprof__heap_park();
}

void cprof__guard_exit(void) {
  if (cprof__guard_depth == 1) cprof__heap_unpark();
  cprof__guard_depth--;
}

void *cprof__malloc(size_t n) {
  cprof__guard_enter();
  void *p = malloc(n);
  cprof__guard_exit();
  return p;
}

void *cprof__calloc(size_t n, size_t size) {
  cprof__guard_enter();
  void *p = calloc(n, size);
  cprof__guard_exit();
  return p;
}

void *cprof__realloc(void *p, size_t n) {
  cprof__guard_enter();
  void *q = realloc(p, n);
  cprof__guard_exit();
  return q;
}

void cprof__free(void *p) {
  cprof__guard_enter();
  free(p);
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
