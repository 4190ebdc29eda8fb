/*
 * profilez (profilez.h): the bytes of any profile, for an application to
 * serve over its own admin protocol, as the seed's server does on its
 * system account. It answers "Profiling is not enabled" until the
 * application opts in, refuses mutex and block unless those profiles were
 * switched on (they cost something on every contended lock, so serving
 * them must not be how they get enabled), and otherwise behaves like the
 * HTTP endpoint: debug selects the format, seconds a CPU window or a delta.
 * The caller's thread does the waiting; nothing else is held meanwhile.
 */
#include <stdatomic.h>
#include <string.h>

#include "capture/taskread.h"
#include "base/mem.h"
#include "sink/profilez.h"
#include "profile/registry.h"

/* Longest window profilez waits for, as the endpoint's default cap. */
#define PROFILEZ_MAX_SECONDS 300

static atomic_bool enabled;

void cprof__mark_enabled(bool serve_all) {
  atomic_store(&enabled, true);
  if (serve_all) cprof__profiles_serving();
}
bool cprof__profiling_enabled(void) { return atomic_load(&enabled); }

int cprof_enable(void) {
  cprof__mark_enabled(true);
  return 0;
}

int cprof_profilez(const char *name, int debug, int seconds, cprof_buf *out) {
  if (!name || !out || debug < 0 || seconds < 0 ||
      seconds > PROFILEZ_MAX_SECONDS)
    return CPROF_EINVAL;
  if (!cprof__profiling_enabled()) return CPROF_ENOTENABLED;
  cprof_sink sink = cprof_sink_buf(out);
  const cprof__profile_def *def = cprof__profile_find(name);
  if (!def) return CPROF_ENOPROFILE;
  /* Dumps enable profilez but start only their own profiles' hooks. */
  cprof__profile_serving(def);
  if (def->window) {
    /* Go's /debug/pprof/profile: 30 seconds unless told otherwise; the
     * CPU profile has no text form. */
    if (debug > def->max_debug) return CPROF_EINVAL;
    int64_t ns = (int64_t)(seconds ? seconds : 30) * 1000000000;
    return cprof__profile_write_window(def, 0, ns, cprof__sleep_wait, NULL,
                                       &sink);
  }
  if (def->enabled && !def->enabled()) return def->off_error;
  /* The goroutine profile shows this thread from our caller on. */
  CPROF__TASK_ENTER(entry);
  int err;
  if (seconds == 0)
    err = cprof_profile_write(name, debug, &sink);
  else if (debug != 0 || !def->supports_delta)
    err = CPROF_EINVAL;
  else
    err = cprof__profile_write_delta(def, (int64_t)seconds * 1000000000,
                                     cprof__sleep_wait, NULL, &sink);
  CPROF__TASK_LEAVE(entry);
  return err;
}
