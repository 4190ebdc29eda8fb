/*
 * Profile labels (cprof_labels_* in cprof.h): immutable label sets
 * interned to small ids, the calling thread's current set, and how a
 * sample carries it. A labelled sample's stack gets one more, outermost,
 * synthetic frame that names the set (CPROF__PC_LABELS | id), so the stack
 * table interns (stack, label set) pairs and every profile keyed by stack
 * id (the aggregation tables, the heap's live set, deltas, dumps) keeps
 * labelled samples apart without knowing about labels; the encoder strips
 * the frame and writes the set's pairs as pprof string labels.
 *
 * Reading the current set and marking a stack are async-signal-safe (a
 * thread-local load; sets are published before their pointer and never
 * change or go away); making a set is normal context.
 */
#ifndef CPROF_LABELS_H
#define CPROF_LABELS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/internal.h"
#include "capture/stacktab.h"

/* The frame that names a label set: above any user-space address. */
#define CPROF__PC_LABELS ((uintptr_t)0xfffffffe00000000ull)
#define CPROF__PC_LABELS_MASK ((uintptr_t)0xffffffff00000000ull)

/* How many distinct label sets a process may make. */
#define CPROF__LABELSETS_MAX 4096

/* Appends the calling thread's label frame to a stack of n pcs held in a
 * buffer of cap (when the thread has labels); returns the new depth. A
 * full buffer gives up its innermost-but-one outer frame to a truncation
 * frame. Async-signal-safe. */
CPROF__HIDDEN size_t cprof__labels_mark(uintptr_t *pcs, size_t n, size_t cap);

/* sid's stack with the calling thread's labels in place of any it had
 * (none when the thread has none): sid itself when that is the same.
 * Async-signal-safe. */
CPROF__HIDDEN cprof__stack_id cprof__labels_restack(cprof__stack_id sid);

/* sid's stack with set's label frame (none when set is NULL) in place of
 * any it had. Normal context. */
CPROF__HIDDEN cprof__stack_id cprof__labels_restack_with(
    cprof__stack_id sid, const cprof_labels *set);

/* The current set of thread tid of this process, read from where that
 * thread keeps it, without touching the thread: NULL when it has none, or
 * never took one (a thread publishes where its set lives the first time
 * it pushes one), or exited. Reads through cprof__safe_read, so a thread
 * that exits meanwhile costs nothing but a NULL; a set being pushed at
 * that moment may read as the one before. For samplers that look at other
 * threads (the wall profile). Normal context. */
CPROF__HIDDEN const cprof_labels *cprof__labels_of(pid_t tid);

/* When the outermost of a stack's n pcs is a label frame: removes it from
 * *n and returns the set; otherwise NULL. */
CPROF__HIDDEN const cprof_labels *cprof__labels_strip(const uintptr_t *pcs,
                                                      size_t *n);

/* A set's pairs: returns their number and points *kv at key, value, key,
 * value, ... in key order. */
CPROF__HIDDEN size_t cprof__labels_pairs(const cprof_labels *set,
                                         const char *const **kv);

#endif
