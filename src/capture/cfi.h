/*
 * Compact DWARF CFI unwind tables. Outside any signal handler, each loaded
 * object's .eh_frame_hdr/.eh_frame is interpreted once into a sorted table
 * of rows, one row per address where the unwind rule changes; the tables
 * are published together as an immutable index that a signal handler can
 * search without locks, allocation or unbounded work.
 *
 * A rule says how to find the caller's frame from the registers (pc, rsp,
 * rbp) of a frame at a given pc. On x86-64 the return address is always at
 * CFA - 8 and the caller's rsp is the CFA; the caller's rbp is either
 * unchanged or saved at CFA + fp_off. Other architectures build no tables:
 * cprof__cfi_refresh() returns CPROF_EUNSUPPORTED there, and lookups find
 * nothing.
 *
 * This header is the lookup, what the stack walker and the symbolizer use
 * (cfi_find.c; the readers' bracket, read_begin and read_end, is
 * cfi_index.c's). The refresh that builds and publishes the index is in
 * cfi_index.h, the builder of one table in cfi_build.h.
 */
#ifndef CPROF_CFI_H
#define CPROF_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/internal.h"

/* What a rule's kind means. */
enum {
  /* The pc is covered by no FDE: fall back to frame pointers. */
  CPROF__CFI_NONE = 0,
  /* CFA = rsp + cfa_off. */
  CPROF__CFI_RSP = 1,
  /* CFA = rbp + cfa_off. */
  CPROF__CFI_RBP = 2,
  /* The lazy PLT's expression: CFA = rsp + cfa_off, plus 8 more when
   * (pc & 15) >= plt_split (past the push of the 16-byte stub). ld emits
   * cfa_off 8 and plt_split 11 for the classic .plt. */
  CPROF__CFI_PLT = 3,
  /* A signal trampoline (__restore_rt; its CIE has the 'S' augmentation):
   * the interrupted context is the ucontext_t at rsp. */
  CPROF__CFI_SIGNAL = 4,
  /* The return address is undefined (_start, clone, a thread's start): the
   * walk ends here, normally. */
  CPROF__CFI_END = 5,
  /* A rule no row can express (another expression, CFA in another
   * register, the return address anywhere but CFA - 8, an offset beyond
   * 32 bits, ...): the walk cannot continue by CFI. */
  CPROF__CFI_UNSUPPORTED = 6,
};

/* One unwind rule, valid from its row's pc up to the next row's. Every
 * field a kind does not use is zero, so equal rules compare equal with
 * memcmp. */
typedef struct cprof__cfi_rule {
  uint8_t kind;      /* CPROF__CFI_* */
  uint8_t fp_saved;  /* 1: the caller's rbp is at CFA + fp_off; 0: unchanged */
  uint8_t plt_split; /* CPROF__CFI_PLT only, see above */
  uint8_t reserved;  /* zero */
  int32_t cfa_off;
  int32_t fp_off;
} cprof__cfi_rule;

/* The published set of objects and their tables (opaque, immutable). */
typedef struct cprof__cfi_index cprof__cfi_index;
/* One object's rows (opaque, immutable once built). */
typedef struct cprof__cfi_table cprof__cfi_table;

/*
 * Signal side: async-signal-safe, lock-free, no allocation, bounded time.
 * A walk brackets all its lookups with one read_begin/read_end pair and
 * must not keep the index or any rule pointer past read_end.
 */

/* The current index, or NULL when there is none yet. */
CPROF__HIDDEN const cprof__cfi_index *cprof__cfi_read_begin(void);
/* Ends what read_begin started; accepts its NULL too. */
CPROF__HIDDEN void cprof__cfi_read_end(const cprof__cfi_index *idx);

/* The rule for pc. False when pc is in no executable segment of an object
 * that has a table (the caller falls back to frame pointers); true
 * otherwise, with *out filled, its kind possibly CPROF__CFI_NONE (the
 * object has CFI, but not for this pc). A walker looks up a return address
 * minus one, so that a call at the very end of a function finds its rule. */
CPROF__HIDDEN bool cprof__cfi_find(const cprof__cfi_index *idx, uintptr_t pc,
                                   cprof__cfi_rule *out);

/* True when pc lies in the executable span of a loaded object the index
 * knows, with or without a table; *lo and *hi (either may be NULL) get
 * that span. A walker uses it to judge a recovered return address. */
CPROF__HIDDEN bool cprof__cfi_code_range(const cprof__cfi_index *idx,
                                         uintptr_t pc, uintptr_t *lo,
                                         uintptr_t *hi);

/* The first address of the function holding pc, from the .eh_frame_hdr of
 * the loaded object holding it (the index's; its search table lists every
 * FDE by its first address, one FDE a function, and stripping keeps it),
 * read with the fault-free reader: a table that cannot be read names no
 * start. False when there is none (no index yet, no object or no FDE
 * covers pc). Normal context; never waits for a lock (its cache's is only
 * tried) and opens no file. */
CPROF__HIDDEN bool cprof__cfi_fde_start(uintptr_t pc, uintptr_t *start);

/* The search table of the .eh_frame_hdr at hdr, read through rd: its
 * address and its number of entries (8 bytes each). False unless it is the
 * table every linker writes (version 1, udata4 count, datarel sdata4
 * entries) and has an entry. */
CPROF__HIDDEN bool cprof__eh_hdr_table(
    uint64_t hdr, bool (*rd)(uint64_t addr, void *out, size_t len),
    uint64_t *table, uint32_t *count);

/* The same search over the .eh_frame_hdr at hdr, reading its bytes through
 * rd (which returns false for bytes it cannot read): for the symbolizer,
 * whose reads may come from a file image instead of the process. With
 * end, also the first address past those that find the same FDE (its
 * range's end, or the next FDE's start below it), 0 when the FDE's range
 * cannot be read. */
CPROF__HIDDEN bool cprof__eh_hdr_fde_start(
    uint64_t hdr, uint64_t pc, uint64_t *start, uint64_t *end,
    bool (*rd)(uint64_t addr, void *out, size_t len));

/* The rule at offset off from the image's vaddr 0, in a table that
 * cfi_build.h's functions built. Fills *out always; returns false when
 * the rule is CPROF__CFI_NONE. Signal-safe. */
CPROF__HIDDEN bool cprof__cfi_table_find(const cprof__cfi_table *t,
                                         uintptr_t off, cprof__cfi_rule *out);

#endif
