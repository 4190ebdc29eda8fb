/*
 * The one way a sample's stack is taken: every source (the CPU timers'
 * handler, the lock and heap interposers, pthread_create, thread
 * sampling, custom profiles) says where the stack starts and what goes
 * with it, and gets the stack's id in the shared table. The walk, the
 * thread's labels, the truncation of a deep stack and the interning are
 * done here, the same way for all of them; what the source adds the id to
 * (its aggregate, its records) and with what weight stays its own.
 *
 * Async-signal-safe. A source in normal context brings the unwind tables
 * up to date first (cprof__stack_refresh_try), which a handler may not.
 */
#ifndef CPROF_SAMPLE_H
#define CPROF_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"
#include "capture/stacktab.h"

/* Where the stack starts. */
typedef enum cprof__sample_from {
  CPROF__SAMPLE_SIGNAL, /* a signal handler's ucontext (uc) */
  CPROF__SAMPLE_FRAME,  /* a frame: its pc, frame pointer and sp */
  CPROF__SAMPLE_HERE,   /* the caller's own stack, skip frames left out */
  /* Frames the source walked itself (another thread's stack from a copy,
   * or a walk it had to patch up): pcs, n, in a buffer of cap frames that
   * the labels' frame may be added to in place. */
  CPROF__SAMPLE_WALKED,
} cprof__sample_from;

typedef struct cprof__sample_at {
  cprof__sample_from from;
  const void *uc;       /* SIGNAL */
  uintptr_t pc, fp, sp; /* FRAME */
  size_t skip;          /* HERE: 0 starts at the caller of cprof__sample_stack */
  uintptr_t *pcs;       /* WALKED */
  size_t n, cap;        /* WALKED: n <= cap */
} cprof__sample_at;

/* What goes with the stack. */
enum {
  /* The calling thread's current labels (capture/labels.h). */
  CPROF__SAMPLE_LABELS = 1u << 0,
  /* The calling thread's last stack taken with this flag is looked for
   * first, by hash: a thread that keeps sampling from one place (as
   * allocations do) skips the shared table. Two stacks with one 64-bit
   * hash and depth would be merged. Not for handlers, which could
   * interrupt the thread's own update of it. */
  CPROF__SAMPLE_SAME_AS_LAST = 1u << 1,
};

/* Takes the stack at, with what flags say, and returns its id:
 * CPROF__STACK_OVERFLOW when the table has no room. */
CPROF__HIDDEN cprof__stack_id cprof__sample_stack(const cprof__sample_at *at,
                                                  unsigned flags);

#endif
