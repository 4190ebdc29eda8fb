/*
 * The stack table: every captured stack is interned to a small id shared by
 * all profiles. Insertion is lock-free and allocation-free, so a signal
 * handler can intern: the table is mapped once (pages are only touched as
 * they fill), its frame pool chunk by chunk as stacks need it (a raw mmap
 * system call), and stacks are published with compare-and-swap. The table
 * is bounded; when it or the frame pool is full, or the pool's next chunk
 * cannot be mapped, intern returns CPROF__STACK_OVERFLOW, whose stack is
 * the single synthetic frame CPROF__PC_OVERFLOW, and counts the event.
 * Stacks are never removed.
 */
#ifndef CPROF_STACKTAB_H
#define CPROF_STACKTAB_H

#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

typedef uint32_t cprof__stack_id;
#define CPROF__STACK_NONE ((cprof__stack_id)0)
#define CPROF__STACK_OVERFLOW ((cprof__stack_id)1)

/* Reserves the table on first use; later calls return 0 at once. Not
 * signal-safe; cprof calls it from its constructor, before any source can
 * sample. Returns 0 or CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__stacktab_init(void);

/* cprof__stacktab_init() with an index of slots entries (rounded up to a
 * power of two), room for 75% as many stacks, and frames pcs in all; a
 * test seam for filling the table. Like init, it does nothing once a table
 * exists. Returns 0, CPROF_EINVAL or CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__stacktab_init_sized(size_t slots, size_t frames);

/* A test seam: drops the table, so a test (in a forked, single-threaded
 * child) can make one of another size or see the uninitialised state. Never
 * called by the library; unsafe while anything may intern. */
CPROF__HIDDEN void cprof__stacktab_reset_for_tests(void);

/* Interns a stack of n pcs (n <= CPROF__STACK_BUF). Returns its id, or
 * CPROF__STACK_OVERFLOW when the table is full or not initialised.
 * Async-signal-safe and lock-free; preserves errno. Two racing inserts of
 * the same new stack get one id (the loser's copy stays unused); readers
 * still merge by content. */
CPROF__HIDDEN cprof__stack_id cprof__stacktab_intern(const uintptr_t *pcs,
                                                     size_t n);

/* The 64-bit hash the table keys a stack of n pcs by (never 0). A caller
 * that meets the same stack again and again may remember the id of the
 * last one it interned under this hash and skip the table, which would
 * otherwise cost a sample two cache misses (its slot and its frames). */
CPROF__HIDDEN uint64_t cprof__stacktab_hash(const uintptr_t *pcs, size_t n);

/* The frames of an interned id; returns the depth (0 for an unknown id). */
CPROF__HIDDEN size_t cprof__stacktab_get(cprof__stack_id id,
                                         const uintptr_t **pcs);

/* How many interns found the table full, and how many stacks it holds. */
CPROF__HIDDEN uint64_t cprof__stacktab_overflows(void);
CPROF__HIDDEN size_t cprof__stacktab_size(void);

#endif
