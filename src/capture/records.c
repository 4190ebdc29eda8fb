/*
 * Records (records.h): building them from an aggregation table, deltas.
 * Calls base/ and capture/agg only; normal context.
 */
#include <stdbool.h>
#include <string.h>

#include "base/hmap.h"
#include "base/mem.h"
#include "capture/records.h"

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

void cprof__records_sum_add(cprof__records_sum *s, cprof__stack_id sid,
                            uint32_t tag, const int64_t *v) {
  if (s->err) return;
  uint64_t key = ((uint64_t)sid << 32 | tag) + 1, pos;
  if (!cprof__hmap_get(&s->index, key, &pos)) {
    static const int64_t zero[CPROF__AGG_MAX_VALUES];
    s->err = cprof__records_add(s->recs, sid, tag, zero, CPROF__AGG_MAX_VALUES);
    pos = s->recs->len;
    if (!s->err) s->err = cprof__hmap_put(&s->index, key, pos);
    if (s->err) return;
  }
  for (int k = 0; k < CPROF__AGG_MAX_VALUES; k++)
    s->recs->v[pos - 1].v[k] += v[k];
}

int cprof__records_sum_end(cprof__records_sum *s) {
  cprof__hmap_free(&s->index);
  return s->err;
}
