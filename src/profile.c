/*
 * Profile assembly (see profile.h): the step between captured stacks and the
 * pprof encoder or the text writer. It symbolizes each distinct address once
 * per profile, emits Locations and Functions as they first appear, and
 * writes the Mappings last, when it knows whether every lookup in each of
 * them succeeded. Normal context only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "mem.h"
#include "profile.h"
#include "stacktab.h"
#include "symbolize.h"
#include "threads.h"

typedef struct mapping_state {
  bool used;
  bool all_functions;
  bool all_lines;
} mapping_state;

struct cprof__prof {
  cprof__pprof *enc;
  cprof__hmap locations; /* pc -> location id */
  cprof__hmap functions; /* hash of (name, system name, file) -> id */
  uint64_t next_location, next_function;
  size_t nvalues; /* one per sample type */
  size_t nmappings;
  mapping_state *mappings;
  uint64_t *loc_ids;
  size_t loc_cap;
  int err;
};

static uint64_t function_key(const cprof__sym_frame *f) {
  uint64_t h = CPROF__HASH_SEED;
  h = cprof__hash_bytes(h, f->name, strlen(f->name) + 1);
  h = cprof__hash_bytes(h, f->system_name, strlen(f->system_name) + 1);
  return cprof__hash_bytes(h, f->file, strlen(f->file) + 1);
}

static uint64_t function_id(cprof__prof *p, const cprof__sym_frame *f) {
  uint64_t key = function_key(f), id;
  if (cprof__hmap_get(&p->functions, key, &id)) return id;
  id = ++p->next_function;
  if (cprof__hmap_put(&p->functions, key, id)) p->err = CPROF_ENOMEM;
  cprof__pprof_function(p->enc, id, f->name, f->system_name, f->file, 0);
  return id;
}

static uint64_t location_id(cprof__prof *p, uintptr_t pc) {
  uint64_t id;
  if (cprof__hmap_get(&p->locations, pc, &id)) return id;
  id = ++p->next_location;
  if (cprof__hmap_put(&p->locations, pc, id)) p->err = CPROF_ENOMEM;

  const cprof__sym_result *r = cprof__sym_lookup(pc);
  cprof__pprof_line lines[CPROF__ARRAY_LEN(r->frames)];
  size_t nlines = 0;
  uint64_t mapping_id = 0;
  if (r) {
    for (int i = 0; i < r->nframes; i++) {
      lines[nlines].function_id = function_id(p, &r->frames[i]);
      lines[nlines].line = r->frames[i].line;
      lines[nlines].column = 0;
      nlines++;
    }
    if (r->mapping >= 0 && (size_t)r->mapping < p->nmappings) {
      mapping_state *m = &p->mappings[r->mapping];
      mapping_id = (uint64_t)r->mapping + 1;
      m->used = true;
      if (r->nframes == 0) m->all_functions = false;
      if (!r->has_line) m->all_lines = false;
    }
  }
  cprof__pprof_location(p->enc, id, mapping_id, pc, lines, nlines, false);
  return id;
}

cprof__prof *cprof__prof_begin(const cprof__prof_desc *d,
                               const cprof_sink *sink) {
  cprof__prof *p = cprof__calloc(1, sizeof *p);
  if (!p) return NULL;
  p->enc = cprof__pprof_new(sink, true);
  if (!p->enc) {
    cprof__free(p);
    return NULL;
  }
  p->nvalues = d->nsample_types;
  cprof__sym_lock();
  cprof__sym_refresh();
  p->nmappings = cprof__sym_nmappings();
  p->mappings = cprof__calloc(p->nmappings + 1, sizeof *p->mappings);
  if (!p->mappings) p->err = CPROF_ENOMEM;
  for (size_t i = 0; p->mappings && i < p->nmappings; i++)
    p->mappings[i] = (mapping_state){false, true, true};

  for (size_t i = 0; i < d->nsample_types; i++)
    cprof__pprof_sample_type(p->enc, d->sample_types[i].type,
                             d->sample_types[i].unit);
  cprof__pprof_period(p->enc, d->period_type.type, d->period_type.unit,
                      d->period);
  cprof__pprof_time(p->enc, d->time_nanos ? d->time_nanos : cprof__now_ns(),
                    d->duration_nanos);
  if (d->default_sample_type)
    cprof__pprof_default_sample_type(p->enc, d->default_sample_type);
  return p;
}

void cprof__prof_comment(cprof__prof *p, const char *comment) {
  cprof__pprof_comment(p->enc, comment);
}

void cprof__prof_drop_comment(cprof__prof *p, const cprof__agg *agg) {
  char text[160];
  snprintf(text, sizeof text,
           "cprof %s: %llu samples lost to a full stack table, %llu to a "
           "full profile table",
           cprof_version(), (unsigned long long)cprof__stacktab_overflows(),
           (unsigned long long)(agg ? cprof__agg_drops(agg) : 0));
  cprof__prof_comment(p, text);
}

/* Threads created while cprof is loaded start in its trampoline; a stack
 * ends below it, as Go's stacks end at the goroutine's function, so the
 * trampoline and libc's thread start are not shown. */
size_t cprof__visible_depth(const uintptr_t *pcs, size_t npcs) {
  uintptr_t tramp = cprof__threads_start_function();
  for (size_t i = 1; i < npcs; i++) {
    const cprof__sym_result *r = cprof__sym_lookup(pcs[i]);
    if (r && r->nframes > 0 && r->frames[r->nframes - 1].start == tramp)
      return i;
  }
  return npcs;
}

void cprof__prof_sample(cprof__prof *p, const uintptr_t *pcs, size_t npcs,
                        const int64_t *values,
                        const cprof__pprof_label *labels, size_t nlabels) {
  npcs = cprof__visible_depth(pcs, npcs);
  if (npcs > p->loc_cap) {
    uint64_t *ids = cprof__realloc(p->loc_ids, npcs * sizeof *ids);
    if (!ids) {
      p->err = CPROF_ENOMEM;
      return;
    }
    p->loc_ids = ids;
    p->loc_cap = npcs;
  }
  for (size_t i = 0; i < npcs; i++) p->loc_ids[i] = location_id(p, pcs[i]);
  cprof__pprof_sample(p->enc, p->loc_ids, npcs, values, p->nvalues, labels,
                      nlabels);
}

int cprof__prof_end(cprof__prof *p) {
  for (size_t i = 0; p->mappings && i < p->nmappings; i++) {
    const cprof__sym_mapping *sm = cprof__sym_mapping_at(i);
    const mapping_state *st = &p->mappings[i];
    cprof__pprof_mapping m = {
        .id = i + 1,
        .memory_start = sm->start,
        .memory_limit = sm->limit,
        .file_offset = sm->offset,
        .filename = sm->path,
        .build_id = sm->build_id,
        .has_functions = st->all_functions,
        .has_filenames = st->all_lines,
        .has_line_numbers = st->all_lines,
        .has_inline_frames = st->all_lines,
    };
    cprof__pprof_add_mapping(p->enc, &m);
  }
  cprof__sym_unlock();
  int err = cprof__pprof_finish(p->enc);
  if (!err) err = p->err;
  cprof__hmap_free(&p->locations);
  cprof__hmap_free(&p->functions);
  cprof__free(p->mappings);
  cprof__free(p->loc_ids);
  cprof__free(p);
  return err;
}

void cprof__text_begin(void) {
  cprof__sym_lock();
  cprof__sym_refresh();
}

void cprof__text_end(void) { cprof__sym_unlock(); }

int cprof__text_stack(cprof_buf *out, const uintptr_t *pcs, size_t npcs) {
  npcs = cprof__visible_depth(pcs, npcs);
  int err = cprof__buf_printf(out, " @");
  for (size_t i = 0; !err && i < npcs; i++)
    err = cprof__buf_printf(out, " %#llx", (unsigned long long)pcs[i]);
  if (!err) err = cprof__buf_printf(out, "\n");
  for (size_t i = 0; !err && i < npcs; i++) {
    const cprof__sym_result *r = cprof__sym_lookup(pcs[i]);
    if (!r || r->nframes == 0) {
      err = cprof__buf_printf(out, "#\t%#llx\n", (unsigned long long)pcs[i]);
      continue;
    }
    /* Go prints each inlined frame on its own line with the same pc; the
     * offset is from the start of the function the code belongs to. */
    const cprof__sym_frame *outer = &r->frames[r->nframes - 1];
    for (int f = 0; !err && f < r->nframes; f++) {
      const cprof__sym_frame *fr = &r->frames[f];
      unsigned long long off = outer->start && pcs[i] >= outer->start
                                   ? (unsigned long long)(pcs[i] - outer->start)
                                   : 0;
      err = cprof__buf_printf(out, "#\t%#llx\t%s+%#llx\t%s:%d\n",
                              (unsigned long long)pcs[i], fr->name, off,
                              fr->file, fr->line);
    }
  }
  return err;
}

int cprof__text_record(cprof_buf *out, cprof__stack_id sid) {
  const uintptr_t *pcs;
  size_t n = cprof__stacktab_get(sid, &pcs);
  int err = cprof__text_stack(out, pcs, n);
  return err ? err : cprof__buf_printf(out, "\n");
}

int cprof__text_flush(cprof_buf *out, int err, const cprof_sink *sink) {
  if (!err) err = sink->write(sink->ctx, out->data, out->len);
  cprof_buf_free(out);
  return err;
}

typedef struct count_entry {
  cprof__stack_id sid;
  int64_t count;
} count_entry;

static int by_count_desc(const void *a, const void *b) {
  const count_entry *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return x->sid < y->sid ? -1 : x->sid > y->sid;
}

/* Two ids can hold the same frames (see stacktab.h); merge them so each
 * stack is listed once. Lists are small (one entry per distinct stack), so
 * every pair is compared. */
static size_t merge_equal_stacks(count_entry *v, size_t len) {
  for (size_t i = 0; i < len; i++) {
    const uintptr_t *a;
    size_t na = cprof__stacktab_get(v[i].sid, &a);
    for (size_t j = i + 1; j < len;) {
      const uintptr_t *b;
      size_t nb = cprof__stacktab_get(v[j].sid, &b);
      if (na == nb && memcmp(a, b, na * sizeof *a) == 0) {
        v[i].count += v[j].count;
        v[j] = v[--len];
      } else {
        j++;
      }
    }
  }
  return len;
}

static int write_count_text(const char *name, const count_entry *v,
                            size_t len, const cprof_sink *sink) {
  int64_t total = 0;
  for (size_t i = 0; i < len; i++) total += v[i].count;
  cprof_buf out = {0};
  int err = cprof__buf_printf(&out, "%s profile: total %lld\n", name,
                              (long long)total);
  cprof__text_begin();
  for (size_t i = 0; !err && i < len; i++) {
    err = cprof__buf_printf(&out, "%lld", (long long)v[i].count);
    if (!err) err = cprof__text_record(&out, v[i].sid);
  }
  cprof__text_end();
  return cprof__text_flush(&out, err, sink);
}

static int write_count_pprof(const char *name, const count_entry *v,
                             size_t len, int64_t time_ns, int64_t duration_ns,
                             const cprof_sink *sink) {
  const cprof__value_type st = {name, "count"};
  const cprof__prof_desc d = {
      .sample_types = &st,
      .nsample_types = 1,
      .period_type = st,
      .period = 1,
      .time_nanos = time_ns,
      .duration_nanos = duration_ns,
  };
  cprof__prof *p = cprof__prof_begin(&d, sink);
  if (!p) return CPROF_ENOMEM;
  cprof__prof_drop_comment(p, NULL);
  for (size_t i = 0; i < len; i++) {
    const uintptr_t *pcs;
    size_t n = cprof__stacktab_get(v[i].sid, &pcs);
    cprof__prof_sample(p, pcs, n, &v[i].count, NULL, 0);
  }
  return cprof__prof_end(p);
}

int cprof__write_count_profile(const char *name, const cprof__records *recs,
                               int debug, int64_t duration_ns,
                               const cprof_sink *sink) {
  count_entry *v = cprof__malloc((recs->len + 1) * sizeof *v);
  if (!v) return CPROF_ENOMEM;
  size_t len = 0;
  for (size_t i = 0; i < recs->len; i++)
    if (recs->v[i].v[0] != 0)
      v[len++] = (count_entry){recs->v[i].sid, recs->v[i].v[0]};
  len = merge_equal_stacks(v, len);
  qsort(v, len, sizeof *v, by_count_desc);
  int err = debug ? write_count_text(name, v, len, sink)
                  : write_count_pprof(name, v, len, recs->time_ns,
                                      duration_ns, sink);
  cprof__free(v);
  return err;
}
