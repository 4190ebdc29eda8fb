/*
 * profilez: profiles for the application's own admin channel, behind an
 * explicit opt-in. Until profiling is enabled (cprof_enable(), or starting
 * the HTTP endpoint, dumps or the pusher), every request answers "Profiling
 * is not enabled".
 */
#ifndef CPROF_PROFILEZ_H
#define CPROF_PROFILEZ_H

#include <stdbool.h>

#include "base/internal.h"

/* Records that the application opted in to profiling, and with serve_all
 * runs every profile's serving hook (a sink that may serve any profile);
 * a sink that serves only some runs theirs itself
 * (cprof__profile_serving). Thread-safe. */
CPROF__HIDDEN void cprof__mark_enabled(bool serve_all);
CPROF__HIDDEN bool cprof__profiling_enabled(void);

#endif
