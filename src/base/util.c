/*
 * Small shared facilities: clocks and the names of synthetic frames. All of
 * it is async-signal-safe.
 */
#include <time.h>

#include "base/internal.h"

const char *cprof__synthetic_name(uintptr_t pc) {
  switch (pc) {
    case CPROF__PC_TRUNCATED: return "[cprof: stack truncated]";
    case CPROF__PC_OVERFLOW: return "[cprof: stack table full]";
    case CPROF__PC_LOST: return "[cprof: samples lost]";
    case CPROF__PC_UNSEEN_THREAD:
      return "[cprof: thread started outside pthread_create]";
    case CPROF__PC_UNSEEN_UNLOCKER: return "[cprof: unlocker not seen]";
    case CPROF__PC_OWN_HEAP: return "[cprof: heap sampling]";
    case CPROF__PC_OWN_UNWIND: return "[cprof: unwind tables]";
    case CPROF__PC_OWN_STACK: return "[cprof: taking a stack]";
    case CPROF__PC_OWN_SAMPLE: return "[cprof: CPU and thread sampling]";
    case CPROF__PC_OWN_LOCKS: return "[cprof: lock profiling]";
    case CPROF__PC_OWN_SYMBOLS: return "[cprof: symbolization]";
    case CPROF__PC_OWN_OTHER: return "[cprof]";
    default: return cprof__pc_is_synthetic(pc) ? "[cprof: unknown]" : NULL;
  }
}

CPROF__SIGNAL_SAFE static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t cprof__now_ns(void) { return clock_ns(CLOCK_REALTIME); }
CPROF__SIGNAL_SAFE int64_t cprof__mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
