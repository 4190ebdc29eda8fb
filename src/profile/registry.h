/*
 * The profile registry: every profile cprof has, CPU included, each
 * described by one definition that says everything a sink needs to serve
 * it. Sinks (HTTP, profilez, dumps, push, the index page, the viewer)
 * iterate over the registry and read these fields; none of them names a
 * profile. Adding a profile is a source, a profile file and one line in
 * registry.c's table.
 *
 * Two kinds of profile:
 *  - snapshot profiles (heap, mutex, goroutine...) are collected as
 *    records at any moment (capture/records.h); a delta over a window is
 *    p1 - p0 of two snapshots;
 *  - windowed profiles (cpu) are only measured between a start and a stop:
 *    `window` is set and collect/write/entries are NULL.
 *
 * Normal context only.
 */
#ifndef CPROF_REGISTRY_H
#define CPROF_REGISTRY_H

#include <stdbool.h>

#include "base/internal.h"
#include "capture/records.h"

/* How the pusher sends a profile at each interval. */
typedef enum cprof__push_kind {
  CPROF__PUSH_NONE,     /* not pushed */
  CPROF__PUSH_WINDOW,   /* the window that just ended (windowed profiles) */
  CPROF__PUSH_SNAPSHOT, /* the profile as it stands */
  CPROF__PUSH_DELTA,    /* what changed since the previous interval */
} cprof__push_kind;

typedef struct cprof__window_ops {
  /* Starts a window at rate (0: the default). Returns 0 or a cprof_err. */
  int (*start)(long long rate, void **handle);
  /* The window carries on in fork children (from zero there). */
  void (*follow_forks)(void *handle);
  /* Ends the window and writes it (pprof) to sink, or discards it when
   * sink is NULL. */
  int (*stop)(void *handle, const cprof_sink *sink);
  /* The rate a start with rate 0 uses (CPROF_CPU_HZ, say). */
  long long (*default_rate)(void);
} cprof__window_ops;

typedef struct cprof__profile_def {
  const char *name;
  /* Another name it answers to everywhere ("threads"), or NULL. */
  const char *alias;
  /* Its name under /debug/pprof/ when Go's differs ("profile"), or NULL. */
  const char *route;
  const char *description; /* Go's description, as the viewer lists it */
  /* The index page's, when Go's says more there, or NULL. */
  const char *index_description;
  bool supports_delta;     /* Go allows ?seconds=N on a snapshot */
  int max_debug;           /* the highest debug= it writes (0: pprof only) */
  /* runtime/pprof writes it as text for any debug != 0, negative too
   * (heap, allocs); others write pprof for debug <= 0. */
  bool text_for_negative_debug;
  /* The profile's rate as a spec sets it (dumps, cprof run): the key
   * ("rate", "hz"), what it counts, its bounds; NULL key: it has none.
   * set_rate sets it process-wide; NULL for a windowed profile, whose rate
   * is its window's. */
  const char *rate_key;
  const char *rate_unit;
  long long rate_min, rate_max;
  int (*set_rate)(long long rate);
  /* NULL: always on. Otherwise profilez and the pusher serve the profile
   * only while it is on, and profilez answers off_error when it is not. */
  bool (*enabled)(void);
  int off_error;
  cprof__push_kind push;
  /* Pushed only when the pusher's profiles list names it (it costs a
   * sampler thread for as long as the pusher runs). */
  bool push_when_named;
  const cprof__window_ops *window; /* windowed profiles only */
  long (*entries)(void); /* the index page's Count column */
  /* Snapshot of the profile's records. */
  int (*collect)(cprof__records *out);
  /* Writes records (a snapshot, or a delta over duration_ns when that is
   * nonzero) as pprof (debug 0) or Go's text (debug >= 1). */
  int (*write)(const cprof__records *recs, int debug, int64_t duration_ns,
               const cprof_sink *sink);
  /* Forgets what the profile holds, for ?reset=1 (NULL: not supported). */
  void (*reset)(void);
  /* Called each time a sink starts that may serve this profile
   * (cprof_enable, the HTTP endpoint and the pusher serve any; dumps the
   * profiles they name) and before profilez or cprof_profile_write
   * writes it, for a profile that keeps something only from then on
   * (heap_peak's tracker, heap samples once idle); NULL: nothing to
   * start. */
  void (*serving)(void);
} cprof__profile_def;

/* Every profile, in name order. */
CPROF__HIDDEN size_t cprof__profiles_count(void);
CPROF__HIDDEN const cprof__profile_def *cprof__profile_at(size_t i);

/* The name a profile goes by under /debug/pprof/. */
static inline const char *cprof__profile_route(const cprof__profile_def *d) {
  return d->route ? d->route : d->name;
}

/* How a caller waits out a profile window: returns false when the wait was
 * cut short (the client went away, the server is stopping). */
typedef bool (*cprof__wait_fn)(void *ctx, int64_t ns);

/* A wait that sleeps the whole time (ctx unused). */
CPROF__HIDDEN bool cprof__sleep_wait(void *ctx, int64_t ns);

/* Go's ?seconds=N: collects def, waits ns, collects again and writes
 * p1 - p0 as pprof with duration_nanos set. Returns 0; CPROF_ECANCELED when
 * the wait was cut short (nothing written); CPROF_EIO when collecting
 * failed; CPROF_ENOMEM when the delta could not be computed; or the
 * writer's error. */
CPROF__HIDDEN int cprof__profile_write_delta(const cprof__profile_def *def,
                                             int64_t ns, cprof__wait_fn wait,
                                             void *ctx,
                                             const cprof_sink *sink);

/* Adds def (which must live as long as the process) to the profiles the
 * registry lists and finds: the custom profiles and heap_peak. Returns 0,
 * CPROF_EEXIST when the name is taken, CPROF_ENOMEM when
 * CPROF__PROFILES_EXTRA are registered. Thread-safe. */
#define CPROF__PROFILES_EXTRA 72
CPROF__HIDDEN int cprof__profile_register(const cprof__profile_def *def);

/* A sink starts serving profiles: runs every profile's serving hook. */
CPROF__HIDDEN void cprof__profiles_serving(void);

/* A sink starts serving def: runs its serving hook, if any. */
CPROF__HIDDEN void cprof__profile_serving(const cprof__profile_def *def);

/* The definition for name (its name, alias or route), or NULL. */
CPROF__HIDDEN const cprof__profile_def *cprof__profile_find(const char *name);

/* The definition a /debug/pprof/ name stands for: its route (a windowed
 * profile answers only to that, as Go's profile does), name or alias. */
CPROF__HIDDEN const cprof__profile_def *cprof__profile_find_route(
    const char *name);

/* One window of a windowed profile: starts it at rate, waits ns, writes
 * it to sink. Returns 0; CPROF_ECANCELED when the wait was cut short
 * (nothing written); or the window's errors. */
CPROF__HIDDEN int cprof__profile_write_window(const cprof__profile_def *def,
                                              long long rate, int64_t ns,
                                              cprof__wait_fn wait, void *ctx,
                                              const cprof_sink *sink);

#endif
