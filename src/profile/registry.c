/*
 * The named-profile registry (see registry.h) and the public functions that
 * look profiles up by name. Adding a profile is one line in the table.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "source/contention.h"
#include "profile/goroutine.h"
#include "source/heap.h"
#include "base/hmap.h"
#include "base/mem.h"
#include "profile/registry.h"
#include "capture/stack.h"
#include "source/threads.h"

static const cprof__profile_def *const profiles[] = {
    &cprof__allocs_profile,    &cprof__block_profile,
    &cprof__goroutine_profile, &cprof__heap_profile,
    &cprof__mutex_profile,     &cprof__threadcreate_profile,
};

const cprof__profile_def *cprof__profile_find(const char *name) {
  if (!name) return NULL;
  /* "threads" is cprof's name for what Go calls the goroutine profile. */
  if (strcmp(name, "threads") == 0) name = "goroutine";
  for (size_t i = 0; i < CPROF__ARRAY_LEN(profiles); i++)
    if (strcmp(profiles[i]->name, name) == 0) return profiles[i];
  return NULL;
}

size_t cprof_profile_count(void) { return CPROF__ARRAY_LEN(profiles); }

const char *cprof_profile_name(size_t i) {
  return i < CPROF__ARRAY_LEN(profiles) ? profiles[i]->name : NULL;
}

const char *cprof_profile_description(size_t i) {
  return i < CPROF__ARRAY_LEN(profiles) ? profiles[i]->description : NULL;
}

long cprof_profile_entries(const char *name) {
  const cprof__profile_def *def = cprof__profile_find(name);
  return def ? def->entries() : CPROF_ENOPROFILE;
}

int cprof_profile_write(const char *name, int debug, const cprof_sink *sink) {
  if (!sink || !sink->write || debug < 0) return CPROF_EINVAL;
  const cprof__profile_def *def = cprof__profile_find(name);
  if (!def) return CPROF_ENOPROFILE;
  /* Objects loaded since the last profile get their unwind tables now,
   * before the stacks are collected and walked. */
  cprof__stack_refresh();
  cprof__records recs = {0};
  int err = def->collect(&recs);
  if (!err) err = def->write(&recs, debug, 0, sink);
  cprof__records_free(&recs);
  return err;
}

int cprof_profile_write_file(const char *name, int debug, const char *path) {
  if (!path) return CPROF_EINVAL;
  if (!cprof__profile_find(name)) return CPROF_ENOPROFILE;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return CPROF_EIO;
  cprof_sink sink = cprof_sink_fd(fd);
  int err = cprof_profile_write(name, debug, &sink);
  if (close(fd) != 0 && !err) err = CPROF_EIO;
  return err;
}

int cprof__records_add(cprof__records *r, cprof__stack_id sid, uint32_t tag,
                       const int64_t *v, size_t nvalues) {
  if (r->len == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 64;
    cprof__record *nv = cprof__realloc(r->v, cap * sizeof *nv);
    if (!nv) return CPROF_ENOMEM;
    r->v = nv;
    r->cap = cap;
  }
  cprof__record *rec = &r->v[r->len++];
  memset(rec, 0, sizeof *rec);
  rec->sid = sid;
  rec->tag = tag;
  memcpy(rec->v, v, nvalues * sizeof *v);
  return 0;
}

typedef struct from_agg_ctx {
  cprof__records *r;
  size_t nvalues;
  int err;
} from_agg_ctx;

static void add_from_agg(cprof__stack_id sid, uint32_t tag,
                         const int64_t *vals, void *ctx) {
  from_agg_ctx *c = ctx;
  bool any = false;
  for (size_t i = 0; i < c->nvalues; i++) any |= vals[i] != 0;
  if (any && !c->err) c->err = cprof__records_add(c->r, sid, tag, vals, c->nvalues);
}

int cprof__records_from_agg(cprof__records *r, cprof__agg *agg) {
  from_agg_ctx c = {r, cprof__agg_nvalues(agg), 0};
  r->time_ns = cprof__now_ns();
  cprof__agg_foreach(agg, add_from_agg, &c);
  return c.err;
}

static uint64_t record_key(const cprof__record *rec) {
  return ((uint64_t)rec->sid << 32 | rec->tag) + 1;
}

int cprof__records_delta(cprof__records *out, const cprof__records *p0,
                         const cprof__records *p1) {
  cprof__hmap index = {0}; /* key -> position in out + 1 */
  int err = 0;
  out->time_ns = p1->time_ns;
  for (size_t i = 0; !err && i < p1->len; i++) {
    err = cprof__records_add(out, p1->v[i].sid, p1->v[i].tag, p1->v[i].v,
                             CPROF__AGG_MAX_VALUES);
    if (!err) err = cprof__hmap_put(&index, record_key(&p1->v[i]), out->len);
  }
  static const int64_t zero[CPROF__AGG_MAX_VALUES];
  for (size_t i = 0; !err && i < p0->len; i++) {
    uint64_t pos;
    if (!cprof__hmap_get(&index, record_key(&p0->v[i]), &pos)) {
      /* Gone since p0 (heap objects freed): a negative record. */
      err = cprof__records_add(out, p0->v[i].sid, p0->v[i].tag, zero,
                               CPROF__AGG_MAX_VALUES);
      pos = out->len;
      if (!err) err = cprof__hmap_put(&index, record_key(&p0->v[i]), pos);
    }
    if (err) break;
    for (int k = 0; k < CPROF__AGG_MAX_VALUES; k++)
      out->v[pos - 1].v[k] -= p0->v[i].v[k];
  }
  cprof__hmap_free(&index);
  /* Drop records that did not change. */
  size_t kept = 0;
  for (size_t i = 0; i < out->len; i++) {
    bool any = false;
    for (int k = 0; k < CPROF__AGG_MAX_VALUES; k++) any |= out->v[i].v[k] != 0;
    if (any) out->v[kept++] = out->v[i];
  }
  out->len = kept;
  return err;
}

void cprof__records_free(cprof__records *r) {
  cprof__free(r->v);
  memset(r, 0, sizeof *r);
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
