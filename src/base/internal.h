/*
 * Definitions every module of the library shares: the internal symbol prefix,
 * branch hints and the synthetic program counters that stand for frames
 * cprof invents (a truncated stack, a full table, lost samples). Everything
 * declared with CPROF__HIDDEN stays inside the shared object.
 */
#ifndef CPROF_INTERNAL_H
#define CPROF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cprof.h"

#define CPROF__HIDDEN __attribute__((visibility("hidden")))

/* A lock that a fork handler takes before fork and gives back after it,
 * in the parent and in the child. Every such lock of cprof's lies in one
 * section, a cache line each: a fork write-protects the pages they lie on
 * and the first write to each after it copies it (in the child) or takes
 * a fault (in the parent), so once for all of them rather than once a
 * lock on pages of their own. */
#define CPROF__FORK_LOCK \
  __attribute__((section(".cprof_fork_locks"), aligned(64)))
/* A flag a fork handler writes in the parent (or in the child before any
 * other write there): on the same page as the locks. */
#define CPROF__FORK_DATA __attribute__((section(".cprof_fork_locks")))
/* What signal handlers may run lives in its own section; the signal-calls
 * test checks, from the machine code, that everything a handler reaches
 * is there and that nothing there calls outside it but an allowlist of
 * async-signal-safe libc functions. */
#define CPROF__SIGNAL_SAFE __attribute__((section("cprof_signal_text")))
#define CPROF__LIKELY(x) __builtin_expect(!!(x), 1)
#define CPROF__UNLIKELY(x) __builtin_expect(!!(x), 0)
/* Thread-locals read by signal handlers use the initial-exec model: the
 * general-dynamic model may allocate on a thread's first access. */
#define CPROF__TLS __attribute__((tls_model("initial-exec")))
/* A function that must stay a distinct function with its own address
 * (never merged, cloned or inlined), for functions that stand for a
 * synthetic frame. clang has no noipa and does not merge functions by
 * default. */
#if defined(__clang__)
#define CPROF__DISTINCT __attribute__((noinline, used))
#else
#define CPROF__DISTINCT __attribute__((noipa, used))
#endif
#define CPROF__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The deepest stack cprof records. A deeper stack keeps its innermost
 * CPROF__MAX_DEPTH frames and gains one CPROF__PC_TRUNCATED frame. */
#define CPROF__MAX_DEPTH 128

/*
 * Synthetic frames. No code lives at these addresses, so they can sit in a
 * stack next to real ones; the symbolizer names them and the encoders give
 * them a location without a mapping.
 */
#define CPROF__PC_TRUNCATED ((uintptr_t)1) /* deeper frames were cut off */
#define CPROF__PC_OVERFLOW ((uintptr_t)2)  /* stack table was full */
#define CPROF__PC_LOST ((uintptr_t)3)      /* sample buffer was full */
#define CPROF__PC_UNSEEN_THREAD ((uintptr_t)4) /* a thread cprof did not
                                                 * see start (thread_scan.h) */
#define CPROF__PC_UNSEEN_UNLOCKER ((uintptr_t)5) /* a mutex wait whose
                                                   * unlock cprof did not see
                                                   * (lock_interpose.c) */
/* cprof's own code in a stack, folded by what it was doing
 * (encode/writer.c): */
#define CPROF__PC_OWN_HEAP ((uintptr_t)6)    /* heap sampling */
#define CPROF__PC_OWN_UNWIND ((uintptr_t)7)  /* unwind tables */
#define CPROF__PC_OWN_STACK ((uintptr_t)8)   /* taking a stack */
#define CPROF__PC_OWN_SAMPLE ((uintptr_t)9)  /* CPU and thread sampling */
#define CPROF__PC_OWN_LOCKS ((uintptr_t)10)  /* lock profiling */
#define CPROF__PC_OWN_SYMBOLS ((uintptr_t)11) /* symbolization */
#define CPROF__PC_OWN_OTHER ((uintptr_t)12)  /* anything else */
#define CPROF__PC_SYNTHETIC_MAX ((uintptr_t)15)

static inline int cprof__pc_is_synthetic(uintptr_t pc) {
  return pc <= CPROF__PC_SYNTHETIC_MAX;
}

/* The name a synthetic frame is shown under, or NULL for a real pc. */
CPROF__HIDDEN const char *cprof__synthetic_name(uintptr_t pc);

/* Wall-clock time in nanoseconds since the epoch, and a monotonic clock. */
CPROF__HIDDEN int64_t cprof__now_ns(void);
CPROF__HIDDEN int64_t cprof__mono_ns(void);

/* secs since the epoch as UTC text, 2006-01-02T15:04:05Z ("-" for a year
 * outside 0..9999), without reading the time zone file. */
#define CPROF__UTC_TEXT 21
CPROF__HIDDEN void cprof__utc_text(int64_t secs, char out[CPROF__UTC_TEXT]);

#endif
