/*
 * The named-profile registry (see registry.h) and the public functions that
 * look profiles up by name. Adding a profile is one line in the table.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profile/contention.h"
#include "source/lock_interpose.h"
#include "profile/goroutine.h"
#include "profile/heap.h"
#include "source/heap_sampler.h"
#include "base/hmap.h"
#include "base/lock.h"
#include "base/mem.h"
#include "profile/cpu.h"
#include "profile/registry.h"
#include "capture/taskread.h"
#include "capture/stack.h"
#include "profile/threadcreate.h"
#include "profile/wall.h"
#include "source/threads.h"

/* Every profile, in name order: adding one is a line here. */
static const cprof__profile_def *const profiles[] = {
    &cprof__allocs_profile,
    &cprof__block_profile,
    &cprof__cpu_profile,
    &cprof__goroutine_profile,
    &cprof__heap_profile,
    &cprof__mutex_profile,
    &cprof__threadcreate_profile,
    &cprof__wall_profile,
};

/* Registered profiles (the custom ones, heap_peak): each registration
 * publishes a new list of every profile in name order, which readers load
 * without a lock; lists are never freed (at most CPROF__PROFILES_EXTRA are
 * made), and each keeps the one before it reachable. */
typedef struct profile_list {
  const struct profile_list *prev;
  size_t n;
  const cprof__profile_def *v[];
} profile_list;

static _Atomic(const profile_list *) registered;
static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;

size_t cprof__profiles_count(void) {
  const profile_list *l = atomic_load(&registered);
  return l ? l->n : CPROF__ARRAY_LEN(profiles);
}

const cprof__profile_def *cprof__profile_at(size_t i) {
  const profile_list *l = atomic_load(&registered);
  if (l) return i < l->n ? l->v[i] : NULL;
  return i < CPROF__ARRAY_LEN(profiles) ? profiles[i] : NULL;
}

static bool named(const char *a, const char *b) {
  return a && strcmp(a, b) == 0;
}

static int by_def_name(const void *a, const void *b) {
  return strcmp((*(const cprof__profile_def *const *)a)->name,
                (*(const cprof__profile_def *const *)b)->name);
}

int cprof__profile_register(const cprof__profile_def *def) {
  if (!def || !def->name) return CPROF_EINVAL;
  cprof__lock(&register_lock);
  const profile_list *old = atomic_load(&registered);
  size_t n = cprof__profiles_count();
  int err = 0;
  profile_list *l = NULL;
  if (cprof__profile_find(def->name) || cprof__profile_find_route(def->name) ||
      (def->alias && cprof__profile_find(def->alias)))
    err = CPROF_EEXIST;
  else if (n >= CPROF__ARRAY_LEN(profiles) + CPROF__PROFILES_EXTRA ||
           !(l = cprof__malloc(sizeof *l + (n + 1) * sizeof l->v[0])))
    err = CPROF_ENOMEM;
  if (!err) {
    for (size_t i = 0; i < n; i++) l->v[i] = cprof__profile_at(i);
    l->v[n] = def;
    l->n = n + 1;
    l->prev = old;
    qsort(l->v, l->n, sizeof l->v[0], by_def_name);
    atomic_store(&registered, l);
  }
  cprof__unlock(&register_lock);
  return err;
}

void cprof__profile_serving(const cprof__profile_def *def) {
  if (def && def->serving) def->serving();
}

void cprof__profiles_serving(void) {
  for (size_t i = 0, n = cprof__profiles_count(); i < n; i++)
    cprof__profile_serving(cprof__profile_at(i));
}

const cprof__profile_def *cprof__profile_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0, n = cprof__profiles_count(); i < n; i++) {
    const cprof__profile_def *d = cprof__profile_at(i);
    if (d && (named(d->name, name) || named(d->alias, name) ||
              named(d->route, name)))
      return d;
  }
  return NULL;
}

const cprof__profile_def *cprof__profile_find_route(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0, n = cprof__profiles_count(); i < n; i++) {
    const cprof__profile_def *d = cprof__profile_at(i);
    if (d && (named(cprof__profile_route(d), name) ||
              (!d->window && named(d->alias, name))))
      return d;
  }
  return NULL;
}

/* The public listing is of the profiles cprof_profile_write can write at
 * any moment: the snapshot ones. */
static const cprof__profile_def *snapshot_at(size_t i) {
  for (size_t k = 0, n = cprof__profiles_count(); k < n; k++) {
    const cprof__profile_def *d = cprof__profile_at(k);
    if (d && !d->window && i-- == 0) return d;
  }
  return NULL;
}

size_t cprof_profile_count(void) {
  size_t n = 0;
  for (size_t k = 0, all = cprof__profiles_count(); k < all; k++) {
    const cprof__profile_def *d = cprof__profile_at(k);
    n += d && d->window == NULL;
  }
  return n;
}

const char *cprof_profile_name(size_t i) {
  const cprof__profile_def *d = snapshot_at(i);
  return d ? d->name : NULL;
}

const char *cprof_profile_description(size_t i) {
  const cprof__profile_def *d = snapshot_at(i);
  return d ? d->description : NULL;
}

int cprof_profile_info_at(size_t i, cprof_profile_info *out) {
  if (!out) return CPROF_EINVAL;
  const cprof__profile_def *d = cprof__profile_at(i);
  if (!d) return CPROF_ENOPROFILE;
  out->name = d->name;
  out->route = cprof__profile_route(d);
  out->description = d->description;
  out->windowed = d->window != NULL;
  return 0;
}

long cprof_profile_entries(const char *name) {
  const cprof__profile_def *def = cprof__profile_find(name);
  if (!def || def->window) return CPROF_ENOPROFILE;
  return def->entries();
}

int cprof_profile_write(const char *name, int debug, const cprof_sink *sink) {
  if (!sink || !sink->write || debug < 0) return CPROF_EINVAL;
  const cprof__profile_def *def = cprof__profile_find(name);
  if (!def || def->window) return CPROF_ENOPROFILE;
  /* Asked for, as profilez is: a profile that keeps something only while
   * it may be served starts keeping it. */
  cprof__profile_serving(def);
  cprof__records recs = {0};
  CPROF__TASK_ENTER(entry);
  int err = def->collect(&recs);
  CPROF__TASK_LEAVE(entry);
  if (!err) err = def->write(&recs, debug, 0, sink);
  cprof__records_free(&recs);
  return err;
}

int cprof_profile_write_file(const char *name, int debug, const char *path) {
  if (!path) return CPROF_EINVAL;
  const cprof__profile_def *def = cprof__profile_find(name);
  if (!def || def->window) return CPROF_ENOPROFILE;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return CPROF_EIO;
  cprof_sink sink = cprof_sink_fd(fd);
  CPROF__TASK_ENTER(entry);
  int err = cprof_profile_write(name, debug, &sink);
  CPROF__TASK_LEAVE(entry);
  if (close(fd) != 0 && !err) err = CPROF_EIO;
  return err;
}

bool cprof__sleep_wait(void *ctx, int64_t ns) {
  (void)ctx;
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return true;
}

int cprof__profile_write_delta(const cprof__profile_def *def, int64_t ns,
                               cprof__wait_fn wait, void *ctx,
                               const cprof_sink *sink) {
  cprof__records p0 = {0}, p1 = {0}, delta = {0};
  int err;
  if (def->collect(&p0) != 0)
    err = CPROF_EIO;
  else if (!wait(ctx, ns))
    err = CPROF_ECANCELED;
  else if (def->collect(&p1) != 0)
    err = CPROF_EIO;
  else if (cprof__records_delta(&delta, &p0, &p1) != 0)
    err = CPROF_ENOMEM;
  else
    err = def->write(&delta, 0, p1.time_ns - p0.time_ns, sink);
  cprof__records_free(&p0);
  cprof__records_free(&p1);
  cprof__records_free(&delta);
  return err;
}

int cprof__profile_write_window(const cprof__profile_def *def, long long rate,
                                int64_t ns, cprof__wait_fn wait, void *ctx,
                                const cprof_sink *sink) {
  void *h;
  int err = def->window->start(rate, &h);
  if (err) return err;
  bool complete = wait(ctx, ns);
  err = def->window->stop(h, complete ? sink : NULL);
  return complete ? err : CPROF_ECANCELED;
}
