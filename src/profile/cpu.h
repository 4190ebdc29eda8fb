/*
 * The CPU profile (profile/cpu.c): sessions of the CPU sampler written as
 * pprof, and the registry's windowed `cpu` entry.
 */
#ifndef CPROF_PROFILE_CPU_H
#define CPROF_PROFILE_CPU_H

#include "profile/registry.h"
#include "source/cpu_timer.h"

/* Ends a session and writes its profile (pprof, gzipped) to sink, or only
 * discards it when sink is NULL. Returns 0 or a negative cprof_err. */
CPROF__HIDDEN int cprof__cpu_session_stop(cprof__cpu_session *s,
                                          const cprof_sink *sink);

/* A CPU profile over one window: starts a session at hz, waits ns with
 * wait, and writes the profile to sink. Returns 0; CPROF_ECANCELED when the
 * wait was cut short (nothing written); or the session's errors. */
CPROF__HIDDEN int cprof__cpu_profile_for(int hz, int64_t ns,
                                         cprof__wait_fn wait, void *ctx,
                                         const cprof_sink *sink);

/* The rate for CPU profiles nobody gave a rate to: CPROF_CPU_HZ, else
 * 100. */
CPROF__HIDDEN int cprof__cpu_default_hz(void);

/* The registry's `cpu` entry (Go's /debug/pprof/profile): windowed. */
CPROF__HIDDEN extern const cprof__profile_def cprof__cpu_profile;

#endif
