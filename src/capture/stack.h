/*
 * Stack capture: a walker that is async-signal-safe and can never fault,
 * whatever the stack holds. It steps each frame by the CFI row of the
 * loaded object's unwind table (capture/cfi.h) where one exists, and by the
 * frame-pointer record where none does (CPROF_UNWIND chooses: auto, fp or
 * cfi). Every step is validated: the frame it leads to must lie inside the
 * thread's stack and strictly above the last, by a bounded step. When a
 * thread's stack bounds are not known (a thread that existed before cprof,
 * or one on an alternate signal stack), each new page is probed with a
 * system call that reports EFAULT instead of faulting.
 *
 * Captured stacks hold call-site addresses: the first frame of a walk from a
 * signal context is the interrupted pc itself; every other frame is a return
 * address minus one, so symbolization lands on the call instruction.
 */
#ifndef CPROF_STACK_H
#define CPROF_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "base/internal.h"

/* Room a caller needs for the deepest stack plus the truncation mark. */
#define CPROF__STACK_BUF (CPROF__MAX_DEPTH + 1)

/* Caches the calling thread's stack bounds for later walks. Not
 * signal-safe (pthread_getattr_np allocates); call when a thread starts. */
CPROF__HIDDEN void cprof__stack_register_thread(void);

/* Forgets the calling thread's bounds (before it exits). Signal-safe. */
CPROF__HIDDEN void cprof__stack_unregister_thread(void);

/* Walks from a frame: pc is recorded as is, then the chain starting at fp.
 * sp is the lowest address the frames may be at. Writes at most max pcs
 * (max <= CPROF__STACK_BUF); when the stack is deeper than max - 1 frames,
 * the last entry is CPROF__PC_TRUNCATED. Returns the number written.
 * Async-signal-safe; preserves errno. */
CPROF__HIDDEN size_t cprof__stack_walk_from(uintptr_t pc, uintptr_t fp,
                                            uintptr_t sp, uintptr_t *pcs,
                                            size_t max);

/* What call instruction precedes a return address, remembered across the
 * walks of one collector (stacks repeat, from one collection to the
 * next): direct-mapped by address. An answer read from a loaded object's
 * code holds as long as the unwind tables' generation it was read in
 * (cprof__cfi_generation: a new one means objects were loaded or
 * unloaded, and all answers go); one about code the tables do not know
 * (a JIT's, which may rewrite it) holds for the current round only, and
 * a target read from a pointer slot (a PLT stub's, or -fno-plt's GOT
 * entry, which the program may rebind) is read again, one word, once a
 * round. The owner zeroes it once and calls cprof__call_cache_round at
 * the start of each round of walks (a collection); it is not shared
 * between threads. */
#define CPROF__CALL_CACHE 512
typedef struct cprof__call_cache {
  uintptr_t ret[CPROF__CALL_CACHE], target[CPROF__CALL_CACHE];
  uintptr_t slot[CPROF__CALL_CACHE]; /* where target was read, or 0 */
  uint32_t round_of[CPROF__CALL_CACHE]; /* the round it was last checked */
  uint8_t kind[CPROF__CALL_CACHE]; /* 0 empty, 1 no call, 2 a call */
  uint8_t lasting[CPROF__CALL_CACHE]; /* read from a loaded object's code */
  uint64_t gen;   /* the unwind tables' generation of the answers */
  uint32_t round; /* the current round, counted from 1 */
} cprof__call_cache;

/* Starts a round of walks with cache (see above). */
static inline void cprof__call_cache_round(cprof__call_cache *cache) {
  if (++cache->round == 0) { /* wrapped: no old round may match */
    memset(cache->kind, 0, sizeof cache->kind);
    cache->round = 1;
  }
}

/* Another thread's stack as the walk reads it: [lo, lo + len) of it is
 * copied into data, which has room for cap bytes; the walk copies more,
 * a page or two at a time with process_vm_readv, when it reads a word
 * below lo + cap that is not copied yet (cap = 0: no copy, every word
 * through cprof__safe_read). calls, when set, caches what precedes
 * return addresses. A frame record found on the stack is best checked
 * against the very function a call called: the walk sets want_pc to the
 * pc whose function it wanted to know, and a caller that can tell (the
 * symbolizer, outside the walk) walks again with fs_pc = want_pc and fs
 * that function's first address. */
typedef struct cprof__stack_copy {
  void *data;
  uintptr_t lo;
  size_t len, cap;
  cprof__call_cache *calls;
  uintptr_t want_pc, fs_pc, fs;
  /* A first pass that only finds want_pc: the walk stops at the frame
   * whose frame record it would search for without knowing fs (the caller
   * walks again, with fs, or with fs 0 and first_pass 0 to search
   * without it). */
  int first_pass;
  /* The process's id, when the caller has it (0: asked of the kernel at
   * each read): a collector under a lock fork also takes. */
  pid_t pid;
  /* The walk's own: the page where copying stopped at an unreadable one
   * (0: none), so that words there are not asked for again one by one. */
  uintptr_t bad_page;
} cprof__stack_copy;

/* Walks a stack that is not the caller's: a thread stopped in the kernel,
 * from the pc and sp /proc/self/task/TID/syscall reports. fp is its frame
 * pointer, or 0 when unknown: a frame that needs it then finds its frame
 * record on the stack (the first record above sp whose return address
 * follows a call to that frame's function). With after_syscall, pc is
 * where the thread resumes after a system call and is recorded as pc - 1,
 * like a return address; otherwise it is an interrupted instruction,
 * recorded as is. Words inside copy (which may be NULL) are read from it,
 * every other word through cprof__safe_read: the walk never faults, even
 * when the thread exits and its stack is unmapped meanwhile. Every frame
 * after the first is a return address into a loaded object's code (in the
 * auto and cfi modes). Async-signal-safe; preserves errno. */
CPROF__HIDDEN size_t cprof__stack_walk_remote(uintptr_t pc, uintptr_t sp,
                                              uintptr_t fp, int after_syscall,
                                              cprof__stack_copy *copy,
                                              uintptr_t *pcs, size_t max);

/* Whether a walk met code outside every object the unwind tables know
 * since the caller last asked: a library loaded since the last refresh
 * (whose tables a refresh then builds: CPROF__FOREIGN_TABLES), or code no
 * file backs, a JIT's (whose mapping the symbolizer then notes before it
 * goes away: CPROF__FOREIGN_NAMES; the heap sampler, which then
 * refreshes and walks again: CPROF__FOREIGN_HEAP). Each asker has its own
 * bit, cleared by asking. Async-signal-safe. */
enum {
  CPROF__FOREIGN_TABLES = 1,
  CPROF__FOREIGN_NAMES = 2,
  CPROF__FOREIGN_HEAP = 4
};
CPROF__HIDDEN bool cprof__stack_foreign_take(unsigned who);

/* A futex word a walk increments and wakes when it sets
 * CPROF__FOREIGN_NAMES (so at most once between two takes): the dump
 * thread's, so that it notes JIT code at once. NULL for none. */
CPROF__HIDDEN void cprof__stack_foreign_wake(_Atomic int *word);

/* Walks from a signal handler's ucontext_t. Async-signal-safe. */
CPROF__HIDDEN size_t cprof__stack_walk_ucontext(const void *ucontext,
                                                uintptr_t *pcs, size_t max);

/* Walks the caller's own stack, leaving out the innermost skip frames
 * (skip = 0 starts at the function that called cprof__stack_walk_here).
 * Async-signal-safe. */
CPROF__HIDDEN size_t cprof__stack_walk_here(uintptr_t *pcs, size_t max,
                                            size_t skip)
    __attribute__((noinline));

/* How walks step between frames (CPROF_UNWIND): by CFI rows where the
 * loaded object has them and frame pointers elsewhere (auto, the default),
 * by frame pointers only (fp), or by CFI rows only, frame pointers only in
 * code without rows (cfi). */
enum { CPROF__UNWIND_AUTO, CPROF__UNWIND_FP, CPROF__UNWIND_CFI };
CPROF__HIDDEN void cprof__stack_set_mode(int mode);
CPROF__HIDDEN int cprof__stack_mode(void);

/* Reads CPROF_UNWIND. Normal context; called from the constructor. The
 * unwind tables are built by the first refresh. */
CPROF__HIDDEN void cprof__stack_init(void);

/* Brings the unwind tables up to date with the loaded objects (cheap when
 * nothing was loaded or unloaded). Normal context, never in a handler. */
CPROF__HIDDEN void cprof__stack_refresh(void);

/* The same without ever waiting: skipped while another refresh is under
 * way. For the heap and thread interposers, which may run inside the
 * dynamic loader while it holds its lock. Returns whether the tables
 * changed (objects were loaded or unloaded since the last refresh). */
CPROF__HIDDEN bool cprof__stack_refresh_try(void);

/* Whether walks read each thread's last walk before the rule cache (on
 * unless a test or a benchmark turns it off, to compare). */
CPROF__HIDDEN void cprof__stack_memo_set_for_tests(bool on);

/* The bytes of stack below the caller's frame that a signal handler may
 * still use: on the thread's own stack (bounds cached) or on the
 * alternate signal stack it runs on; on any other stack (a coroutine's, a
 * raw clone's), what is proved mapped below, probed page by page up to
 * CPROF__HANDLER_STACK (a guard page ends it). Async-signal-safe. */
CPROF__HIDDEN size_t cprof__stack_room(void);

/* The stack room a handler requires before it walks: its deepest use
 * (measured by test_handler_stack, under 3 KiB) with a margin for the
 * calls the sanitizers add. A signal with less room left is not sampled. */
#define CPROF__HANDLER_STACK ((size_t)4096)

#endif
