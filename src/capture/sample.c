/*
 * The sample entry point (sample.h): walk, labels, intern. Calls the
 * walker, the labels and the stack table, nothing else; async-signal-safe
 * and bounded in stack use (one buffer of CPROF__STACK_BUF frames).
 */
#include "capture/labels.h"
#include "capture/sample.h"
#include "capture/stack.h"

/* The last stack a thread took with CPROF__SAMPLE_SAME_AS_LAST. */
static __thread struct {
  uint64_t hash;
  size_t depth;
  cprof__stack_id sid;
} tls_last_stack CPROF__TLS;

CPROF__SIGNAL_SAFE static cprof__stack_id intern(const uintptr_t *pcs,
                                                 size_t n, unsigned flags) {
  if (!(flags & CPROF__SAMPLE_SAME_AS_LAST))
    return cprof__stacktab_intern(pcs, n);
  uint64_t h = cprof__stacktab_hash(pcs, n);
  if (h == tls_last_stack.hash && n == tls_last_stack.depth)
    return tls_last_stack.sid;
  cprof__stack_id sid = cprof__stacktab_intern(pcs, n);
  if (sid > CPROF__STACK_OVERFLOW) {
    tls_last_stack.hash = h;
    tls_last_stack.depth = n;
    tls_last_stack.sid = sid;
  }
  return sid;
}

/* noinline: CPROF__SAMPLE_HERE counts its frames from this one. */
CPROF__SIGNAL_SAFE __attribute__((noinline)) cprof__stack_id
cprof__sample_stack(const cprof__sample_at *at, unsigned flags) {
  if (at->from == CPROF__SAMPLE_WALKED) {
    size_t n = at->n <= at->cap ? at->n : at->cap;
    if (flags & CPROF__SAMPLE_LABELS)
      n = cprof__labels_mark(at->pcs, n, at->cap);
    return intern(at->pcs, n, flags);
  }
  uintptr_t pcs[CPROF__STACK_BUF];
  const size_t cap = CPROF__ARRAY_LEN(pcs);
  size_t n = 0;
  switch (at->from) {
  case CPROF__SAMPLE_SIGNAL:
    n = cprof__stack_walk_ucontext(at->uc, pcs, cap);
    break;
  case CPROF__SAMPLE_FRAME:
    n = cprof__stack_walk_from(at->pc, at->fp, at->sp, pcs, cap);
    break;
  case CPROF__SAMPLE_HERE:
    n = cprof__stack_walk_here(pcs, cap, 1 + at->skip);
    break;
  case CPROF__SAMPLE_WALKED:
    break;
  }
  if (flags & CPROF__SAMPLE_LABELS) n = cprof__labels_mark(pcs, n, cap);
  return intern(pcs, n, flags);
}
