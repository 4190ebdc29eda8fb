/*
 * In-process symbolization. A snapshot of the process's executable mappings
 * (from /proc/self/maps, with GNU build IDs) and an elfutils Dwfl session
 * that turns addresses into function, file, line and every inlined frame, as
 * addr2line -i does. A function no symbol or debug information names is
 * named by its object and offset ("libfoo.so+0x1234"). Results are cached
 * per address (and, for objects with a build ID, kept for later processes
 * and runs in the symbol cache: symcache.h, cprof__sym_save); the whole
 * state is rebuilt when the mappings change (dlopen/dlclose), so a
 * reloaded library never shows stale names, and when the cache has
 * outgrown its bound (32,768 addresses). Debug information is
 * looked for on this machine only (docs/symbols.md).
 *
 * There is one symbolizer per process, used under cprof__sym_lock(). Not
 * signal-safe: it reads files and allocates.
 */
#ifndef CPROF_SYMBOLIZE_H
#define CPROF_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/internal.h"

typedef struct cprof__sym_mapping {
  uint64_t start, limit, offset;
  const char *path;     /* as in /proc/self/maps */
  const char *build_id; /* lower-case hex, "" when the object has none */
  bool is_main;         /* the main executable */
  bool anon;            /* anonymous code (a JIT's): path is "//anon" */
  uint64_t inode;       /* the file's, 0 for anonymous code */
} cprof__sym_mapping;

typedef struct cprof__sym_frame {
  const char *name;        /* demangled where it was mangled; never NULL */
  const char *system_name; /* the symbol as in the object file */
  const char *file;        /* "" when unknown */
  int line;                /* 0 when unknown */
  uint64_t start;          /* the function's first address, 0 if unknown */
} cprof__sym_frame;

/* The most frames one address gets: its inlined levels and the function
 * they are inlined into (deeper inlining keeps the innermost levels). */
#define CPROF__SYM_MAX_FRAMES 64

typedef struct cprof__sym_result {
  int mapping; /* index into the mappings, -1 when pc is in none */
  int nframes; /* 0 when pc is in no object the session knows */
  bool has_line, has_inline;
  /* False when no symbol or debug information names the function, which
   * is then named by object and offset. */
  bool has_function;
  int decl_line; /* the real function's declaration line, 0 if unknown */
  /* Facts of the object's bytes at the address, once read (by
   * cprof__sym_callee_of) or found in the symbol cache, which keeps them
   * with the names: each CPROF__CODE_UNREAD, _NO or _YES. */
  uint8_t call;      /* the instruction ending there is call rel32 (E8) */
  uint8_t stub;      /* a PLT stub starts there */
  int32_t call_disp; /* a call's displacement: it calls address + 1 + it */
  /* Addresses [range_lo, range_hi) whose names are all these (an object
   * without debug information, named by one symbol or FDE), for the
   * symbol cache; 0 and 0 when only this address is known to be. */
  uint64_t range_lo, range_hi;
  /* Innermost (inlined callee) first, the real function last. */
  const cprof__sym_frame *frames;
} cprof__sym_result;

enum { CPROF__CODE_UNREAD = 0, CPROF__CODE_NO = 1, CPROF__CODE_YES = 2 };

/* What a call instruction calls, for cprof__sym_callee_of(). */
typedef struct cprof__sym_callee {
  uint64_t target; /* the called function's first address */
  uint64_t stub;   /* the PLT stub the call went through, 0 for none */
  /* The called function as a frame: its name, its file and, as line, its
   * declaration line (0 when unknown). */
  cprof__sym_frame frame;
} cprof__sym_callee;

/* Serialises every use of the symbolizer. */
CPROF__HIDDEN void cprof__sym_lock(void);
CPROF__HIDDEN void cprof__sym_unlock(void);

/* Rereads /proc/self/maps; rebuilds the session and drops caches when the
 * executable mappings changed or the cache outgrew its bound. Call with the
 * lock held before a batch of lookups. Returns 0 or a negative cprof_err. */
CPROF__HIDDEN int cprof__sym_refresh(void);

/* Keeps a note of the code outside the loader's objects that is mapped
 * now (a JIT's, or a second mapping of a file's code), so that snapshots
 * taken after it is gone, such as the exit dump's after a runtime shut
 * down, still give its frames a mapping and a name. Reads
 * /proc/self/maps; the first call loads libdw (under the lock), so that
 * it is not mapped later where noted code was. At most 64 notes, the
 * oldest dropped first. */
CPROF__HIDDEN void cprof__sym_note_code(void);

/* From now on, never calls into the dynamic loader (a final dump whose
 * signal interrupted a thread inside it): no libdw that is not loaded yet,
 * no dlsym, no dl_iterate_phdr. Async-signal-safe. */
CPROF__HIDDEN void cprof__sym_avoid_loader(void);

/* The current executable mappings; the main executable is index 0. */
CPROF__HIDDEN size_t cprof__sym_nmappings(void);
CPROF__HIDDEN const cprof__sym_mapping *cprof__sym_mapping_at(size_t i);

/* Symbolizes pc (a call-site address, i.e. return address - 1, or the exact
 * pc of an interrupted instruction). The result and its strings stay valid
 * until the next refresh. Synthetic pcs get their own names and mapping -1. */
CPROF__HIDDEN const cprof__sym_result *cprof__sym_lookup(uintptr_t pc);

/* Writes what lookups found since the last save to the symbol cache
 * (docs/symbols.md), for the objects with a build ID: later processes and
 * runs name those addresses without reading debug information. Call with
 * the lock held, after a batch of lookups (a profile written). */
CPROF__HIDDEN void cprof__sym_save(void);

/* How many addresses the symbol cache has named by the range of another
 * address's entry, in this process (for tests). Under the lock. */
CPROF__HIDDEN uint64_t cprof__sym_range_hits(void);

/* Saves are put off from hold to release (they nest), where the last
 * release makes the one save: a dump writing a CPU and a heap profile
 * rewrites each entry once, not once a profile. Take neither with the
 * lock held. */
CPROF__HIDDEN void cprof__sym_hold_saves(void);
CPROF__HIDDEN void cprof__sym_release_saves(void);

/* The function the instruction ending at pc (a call site, return address
 * - 1) calls, when that instruction is a direct call: call rel32, to the
 * function or to its PLT stub (followed to what the stub's GOT slot holds
 * now). NULL when it is not such a call or the target is not the first
 * address of a function. The code is read with cprof__safe_read, so an
 * unloaded library gives NULL, never a fault. Cached like lookups, with
 * the same lifetime. */
CPROF__HIDDEN const cprof__sym_callee *cprof__sym_callee_of(uintptr_t pc);

/* Resolves addresses across an ELF image given as bytes (a file's
 * contents), as the symbolizer resolves a loaded object's: spread over the
 * object, and at and around each function symbol; no separate debug file
 * is looked for, and nothing is read from the process's memory. For the
 * fuzzer (fuzz/fuzz_elfsym.c): it drops the symbolizer's state, before
 * and after. 0, or CPROF_ESYS when libdw cannot take the image at all;
 * *resolved gets how many addresses had a frame. Normal context. */
CPROF__HIDDEN int cprof__sym_scan_image(const unsigned char *data, size_t len,
                                        size_t *resolved);

#endif
