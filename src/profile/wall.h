/*
 * The wall-clock profile ("wall", profile/wall.c): every thread of the
 * process sampled at a fixed rate over a window, on-CPU and off-CPU alike,
 * as async-profiler's wall mode and Go's fgprof do. A windowed registry
 * profile, so /debug/pprof/wall?seconds=N, dumps, profilez and the pusher
 * serve it as they serve cpu.
 */
#ifndef CPROF_PROFILE_WALL_H
#define CPROF_PROFILE_WALL_H

#include "profile/registry.h"

#define CPROF__WALL_DEFAULT_HZ 20
#define CPROF__WALL_MAX_HZ 1000
/* The bound on the total cost: at most this many thread samples a second
 * across all threads; with more threads than that allows at the rate
 * asked, ticks come less often (each sample still weighs the real time
 * since the tick before). */
#define CPROF__WALL_MAX_SAMPLES_PER_SECOND 2000

/* The rate a window nobody gave a rate to uses: CPROF_WALL_HZ, else 20. */
CPROF__HIDDEN int cprof__wall_default_hz(void);

/* The registry's `wall` entry: windowed. */
CPROF__HIDDEN extern const cprof__profile_def cprof__wall_profile;

#endif
