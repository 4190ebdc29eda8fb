/*
 * The index of loaded objects (cfi_index.c): which objects are loaded,
 * each one's unwind table (cfi_build.h builds it), and the refresh that
 * brings them up to date and publishes them as one immutable index for
 * the lookup (cfi.h). Its functions run in normal context
 * (cprof__cfi_generation in any); the index's layout at the end is for
 * cfi_find.c, which reads it.
 */
#ifndef CPROF_CFI_INDEX_H
#define CPROF_CFI_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture/cfi.h"

struct dl_phdr_info;

/* The GNU build ID of the loaded object info describes (from a
 * dl_iterate_phdr callback), read from its notes in memory with the
 * fault-free reader, as lower-case hex into out (cap bytes): false
 * without one. Normal context. */
CPROF__HIDDEN bool cprof__object_build_id(const struct dl_phdr_info *info,
                                          char *out, size_t cap);

/* Figures for documentation and benchmarks, over the current index. */
typedef struct cprof__cfi_stats_t {
  size_t objects;         /* objects with a table */
  size_t skipped_no_eh;   /* no PT_GNU_EH_FRAME segment (or no code) */
  size_t skipped_bad;     /* unusable .eh_frame_hdr/.eh_frame */
  size_t skipped_large;   /* an address beyond 4 GiB of the load base */
  size_t skipped_empty;   /* CFI without a single usable FDE */
  size_t fdes;            /* FDEs turned into rows */
  size_t fdes_bad;        /* FDEs dropped: malformed or overlapping */
  size_t rows;            /* rows of every table */
  size_t table_bytes;     /* bytes of every table, headers included */
  size_t index_bytes;     /* bytes of the index itself */
  size_t eh_frame_bytes;  /* bytes of .eh_frame the tables were built from */
  int64_t tables_build_ns; /* time spent building the current tables */
  int64_t last_build_ns;  /* wall time of the last refresh that rebuilt */
  uint64_t refreshes;     /* calls of cprof__cfi_refresh */
  uint64_t rebuilds;      /* ... that found the set of objects changed */
  size_t retired;         /* old indexes still waiting for readers */
} cprof__cfi_stats_t;

/* Why an object has no table, for cprof__cfi_objects(). */
enum {
  CPROF__CFI_OBJ_OK = 0,
  CPROF__CFI_OBJ_NO_EH,  /* no PT_GNU_EH_FRAME segment */
  CPROF__CFI_OBJ_BAD,    /* .eh_frame_hdr unusable */
  CPROF__CFI_OBJ_LARGE,  /* a segment ends beyond 4 GiB of the base */
  CPROF__CFI_OBJ_EMPTY,  /* not one usable FDE */
};

/* One object of the current index, for cprof__cfi_objects(). */
typedef struct cprof__cfi_object_info {
  const char *name;     /* dlpi_name: "" for the main program */
  uintptr_t base;       /* load bias: row pcs are offsets from here */
  uintptr_t exec_lo;    /* executable segments' span [exec_lo, exec_hi) */
  uintptr_t exec_hi;
  int status;           /* CPROF__CFI_OBJ_* */
  size_t fdes;
  size_t fdes_bad;
  size_t rows;
  size_t table_bytes;
  size_t eh_frame_bytes;
  int64_t build_ns;
  const cprof__cfi_table *table; /* NULL when it has none; valid only
                                  * during the callback */
} cprof__cfi_object_info;

/*
 * Build side. None of these is signal-safe; all are safe to call from
 * several threads at once (a writer spinlock serialises them, and is held
 * across fork so that a child never inherits it taken). None may be called
 * from a dl_iterate_phdr callback, or between read_begin and read_end.
 */

/* Brings the index up to date with the loaded objects: cheap when
 * dl_iterate_phdr's adds/subs counters have not moved; otherwise builds a
 * table for each object not seen before (an object is its load base, name,
 * program header address and a fingerprint of its headers), reuses the
 * others', publishes the new index and frees what the old one alone held
 * once no reader can see it (waiting about a second at most; what is still
 * in use then is freed by a later refresh). Tables are built while
 * dl_iterate_phdr holds the loader's lock, so objects cannot be unloaded
 * under the builder; dlopen and dlclose wait meanwhile (a few ms for libc
 * and libstdc++). Returns 0, CPROF_ENOMEM (the old index stays published)
 * or CPROF_EUNSUPPORTED (not x86-64). */
CPROF__HIDDEN int cprof__cfi_refresh(void);

/* How many times a refresh has published a new index. Lock-free and
 * async-signal-safe: for callers that must not wait for the writer lock,
 * as cprof__cfi_stats does. */
CPROF__HIDDEN uint64_t cprof__cfi_generation(void);

/* Registers the fork handlers that keep the writer lock consistent across
 * fork; refresh calls it too. Call it early (the constructor does), so
 * that cprof__cfi_refresh_try can work: it never registers them itself. */
CPROF__HIDDEN void cprof__cfi_init(void);

/* The same as cprof__cfi_refresh, for callers that must never wait (the
 * heap sampler, which may run inside the dynamic loader or a fork
 * handler): returns CPROF_EBUSY at once when another refresh is under way
 * or cprof__cfi_init has not run, and never waits for readers of the index
 * it replaces (it leaves it for a later refresh to free). */
CPROF__HIDDEN int cprof__cfi_refresh_try(void);

/* Unpublishes and frees everything, after waiting (at most about a second)
 * for readers; what a stuck reader may still hold is kept. A later refresh
 * starts from scratch. */
CPROF__HIDDEN void cprof__cfi_shutdown(void);

/* Copies the figures of the current index. */
CPROF__HIDDEN void cprof__cfi_stats(cprof__cfi_stats_t *out);

/* Calls fn for each object of the current index, in address order, until
 * fn returns nonzero (which is then returned). Holds the writer lock: fn
 * must not refresh. */
CPROF__HIDDEN int cprof__cfi_objects(
    int (*fn)(const cprof__cfi_object_info *info, void *ctx), void *ctx);

/*
 * The published layout: private to cfi_index.c, which writes it, and
 * cfi_find.c, which reads it between a reader's read_begin and read_end.
 */

/* What a reader needs of one object. */
typedef struct cprof__cfi_entry {
  uintptr_t lo, hi; /* the executable span */
  uintptr_t base;   /* the load bias, which row pcs are relative to */
  const cprof__cfi_table *table; /* NULL: no usable CFI */
} cprof__cfi_entry;

/* The writer's record of one loaded object, shared by the indexes that
 * list it. */
typedef struct cprof__cfi_object {
  uintptr_t base;
  const void *phdr;
  uint64_t fingerprint;
  uint64_t hdr; /* .eh_frame_hdr's vaddr, 0 without one */
  char *name;
  uintptr_t exec_lo, exec_hi;
  cprof__cfi_table *table;
  int status;
  size_t fdes_bad; /* also counted for objects without a table */
  int64_t build_ns;
  unsigned refs; /* indexes, published or retired, that list it */
} cprof__cfi_object;

struct cprof__cfi_index {
  size_t n;
  size_t bytes;
  cprof__cfi_object **objs; /* parallel to e, for the writer */
  struct cprof__cfi_index *next_retired;
  cprof__cfi_entry e[];
};

/* The entry whose executable span holds pc, or NULL (idx may be NULL):
 * the lookup's search (cfi_find.c), which the refresh also uses to find an
 * object in the index it replaces. Inline, so that the walk's search for
 * every frame makes no call. Signal-safe. */
CPROF__SIGNAL_SAFE static inline const cprof__cfi_entry *
cprof__cfi_index_lookup(const cprof__cfi_index *idx, uintptr_t pc) {
  if (!idx || idx->n == 0 || pc < idx->e[0].lo) return NULL;
  size_t lo = 0, n = idx->n;
  while (n > 1) {
    size_t half = n / 2;
    if (idx->e[lo + half].lo <= pc) lo += half;
    n -= half;
  }
  return pc < idx->e[lo].hi ? &idx->e[lo] : NULL;
}

#endif
