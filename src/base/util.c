/*
 * Small shared facilities: clocks, UTC dates and the names of synthetic
 * frames. All of it is async-signal-safe.
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

/* The civil date of a day count from 1970-01-01 (H. Hinnant's
 * days_from_civil, inverted): no gmtime_r, whose first call reads the
 * time zone file (/etc/localtime) although UTC needs none. */
void cprof__utc_text(int64_t secs, char out[CPROF__UTC_TEXT]) {
  int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
  int64_t rem = secs - days * 86400;
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t d = doy - (153 * mp + 2) / 5 + 1;
  int64_t m = mp < 10 ? mp + 3 : mp - 9;
  int64_t y = yoe + era * 400 + (m <= 2);
  if (y < 0 || y > 9999) {
    out[0] = '-';
    out[1] = '\0';
    return;
  }
  const int v[6] = {(int)y, (int)m, (int)d, (int)(rem / 3600),
                    (int)(rem / 60 % 60), (int)(rem % 60)};
  static const char sep[6] = {'-', '-', 'T', ':', ':', 'Z'};
  char *o = out;
  for (int i = 0; i < 6; i++) {
    int digits = i == 0 ? 4 : 2;
    for (int k = digits - 1, x = v[i]; k >= 0; k--, x /= 10)
      o[k] = (char)('0' + x % 10);
    o += digits;
    *o++ = sep[i];
  }
  *o = '\0';
}
