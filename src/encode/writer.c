/*
 * Profile assembly (see profile.h): the step between captured stacks and the
 * pprof encoder or the text writer. It symbolizes each distinct address once
 * per profile, emits Locations and Functions as they first appear, and
 * writes the Mappings last, when it knows whether every lookup in each of
 * them succeeded. It also decides, per frame of a stack, whether the call
 * there left a function by a tail call (cprof__tail_callee), which needs
 * the neighbouring frame and so cannot be a property of the address alone.
 * Normal context only.
 */
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hmap.h"
#include "base/mem.h"
#include "encode/writer.h"
#include "capture/interposers.h"
#include "capture/labels.h"
#include "capture/stacktab.h"
#include "encode/symbolize.h"

typedef struct mapping_state {
  bool used;
  bool all_functions;
  bool all_lines;
} mapping_state;

/* A Location whose pc's call left a function by a tail call. */
typedef struct tail_location {
  uint64_t pc, callee, id; /* callee: the function's first address */
} tail_location;

struct cprof__prof {
  cprof__pprof *enc;
  cprof__hmap locations; /* pc -> location id */
  cprof__hmap tail_index; /* hash of (pc, callee) -> index into tails */
  tail_location *tails;
  size_t ntails, tails_cap;
  bool first_is_call;
  cprof__hmap functions; /* hash of (name, system name, file) -> id */
  uint64_t next_location, next_function;
  size_t nvalues; /* one per sample type */
  size_t nmappings;
  mapping_state *mappings;
  uint64_t *loc_ids;
  size_t loc_cap;
  uintptr_t own_lo, own_hi; /* cprof's own text, when a library of its own */
  uintptr_t *folded;        /* a stack with cprof's runs folded */
  size_t folded_cap;
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

/* True when the dynamic linker's lazy-binding resolver holds pc: a call
 * through a PLT stub not yet bound jumps there, and on from there to the
 * function, which looks like a tail call but is not one. */
static bool in_lazy_resolver(const cprof__sym_frame *f) {
  return strncmp(f->name, "_dl_runtime_resolve", 19) == 0 ||
         strcmp(f->name, "_dl_fixup") == 0;
}

/* True when f (a frame's real function) is the function c called: the same
 * first address, or the same name and file, as the cold part of a
 * function split in two is named. */
static bool is_callee(const cprof__sym_frame *f, const cprof__sym_callee *c) {
  return f->start == c->target || (strcmp(f->name, c->frame.name) == 0 &&
                                    strcmp(f->file, c->frame.file) == 0);
}

static __thread bool tail_hide_interposers;

void cprof__tail_hide_interposers(bool hide) { tail_hide_interposers = hide; }

const cprof__sym_frame *cprof__tail_callee(const uintptr_t *pcs, size_t i,
                                           bool first_is_call) {
  if (i == 0 && !first_is_call) return NULL;
  /* A function's first address is no call site (a stack of one frame that
   * stands for something). */
  const cprof__sym_result *at = cprof__sym_lookup(pcs[i]);
  if (!at || at->nframes == 0 || at->frames[at->nframes - 1].start == pcs[i])
    return NULL;
  const cprof__sym_callee *c = cprof__sym_callee_of(pcs[i]);
  if (!c) return NULL;
  if (i == 0 || tail_hide_interposers)
    if (cprof__is_interposer(c->target)) return NULL;
  if (i == 0) return &c->frame;
  uintptr_t inner = pcs[i - 1];
  if (cprof__pc_is_synthetic(inner)) return NULL;
  /* A sample taken in the PLT stub itself. */
  if (c->stub && inner - c->stub < 16) return NULL;
  const cprof__sym_result *r = cprof__sym_lookup(inner);
  if (!r || r->nframes == 0) return NULL; /* nothing says where it is */
  const cprof__sym_frame *f = &r->frames[r->nframes - 1];
  if (is_callee(f, c) || (c->stub && in_lazy_resolver(f))) return NULL;
  return &c->frame;
}

static uint64_t tail_key(uint64_t pc, uint64_t callee) {
  const uint64_t v[2] = {pc, callee};
  return cprof__hash_bytes(CPROF__HASH_SEED, v, sizeof v);
}

/* The id of the Location for (pc, callee), or 0. The index holds the first
 * entry of each hash; a collision falls back to a scan of all of them. */
static uint64_t find_tail_location(const cprof__prof *p, uint64_t pc,
                                   uint64_t callee) {
  uint64_t idx;
  if (!cprof__hmap_get(&p->tail_index, tail_key(pc, callee), &idx)) return 0;
  const tail_location *t = &p->tails[idx];
  if (t->pc == pc && t->callee == callee) return t->id;
  for (size_t i = 0; i < p->ntails; i++)
    if (p->tails[i].pc == pc && p->tails[i].callee == callee)
      return p->tails[i].id;
  return 0;
}

static void add_tail_location(cprof__prof *p, uint64_t pc, uint64_t callee,
                              uint64_t id) {
  if (p->ntails == p->tails_cap) {
    size_t cap = p->tails_cap ? 2 * p->tails_cap : 16;
    tail_location *t = cprof__realloc(p->tails, cap * sizeof *t);
    if (!t) {
      p->err = CPROF_ENOMEM;
      return;
    }
    p->tails = t;
    p->tails_cap = cap;
  }
  uint64_t key = tail_key(pc, callee), old;
  if (!cprof__hmap_get(&p->tail_index, key, &old) &&
      cprof__hmap_put(&p->tail_index, key, p->ntails))
    p->err = CPROF_ENOMEM;
  p->tails[p->ntails++] = (tail_location){pc, callee, id};
}

/* The Location of frame pc, with tail (the function its call left by a
 * tail call, or NULL) as its innermost Line. */
static uint64_t location_id(cprof__prof *p, uintptr_t pc,
                            const cprof__sym_frame *tail) {
  uint64_t id;
  if (tail) {
    id = find_tail_location(p, pc, tail->start);
    if (id) return id;
    id = ++p->next_location;
    add_tail_location(p, pc, tail->start, id);
  } else {
    if (cprof__hmap_get(&p->locations, pc, &id)) return id;
    id = ++p->next_location;
    if (cprof__hmap_put(&p->locations, pc, id)) p->err = CPROF_ENOMEM;
  }

  const cprof__sym_result *r = cprof__sym_lookup(pc);
  cprof__pprof_line lines[CPROF__SYM_MAX_FRAMES + 1];
  size_t nlines = 0;
  uint64_t mapping_id = 0;
  if (tail) {
    lines[nlines].function_id = function_id(p, tail);
    lines[nlines].line = tail->line;
    lines[nlines].column = 0;
    nlines++;
  }
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
      if (r->nframes == 0 || !r->has_function) m->all_functions = false;
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
  p->first_is_call = d->first_is_call;
  cprof__sym_lock();
  int sym_err = cprof__sym_refresh();
  p->nmappings = cprof__sym_nmappings();
  /* cprof's own code can be told by address only when it is a library of
   * its own (preloaded, or linked as libcprof.so); linked into the
   * program, its frames are the program's mapping's and stay as they are. */
  for (size_t i = 1; i < p->nmappings; i++) {
    const cprof__sym_mapping *m = cprof__sym_mapping_at(i);
    const uintptr_t self = (uintptr_t)cprof__prof_sample;
    if (m->start <= self && self < m->limit) {
      p->own_lo = m->start;
      p->own_hi = m->limit;
    }
  }
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
  /* What went wrong before any sample was written is said in the profile
   * itself, not dropped. */
  char text[160];
  if (sym_err) {
    snprintf(text, sizeof text,
             "cprof: the process's mappings could not be read (%s): "
             "addresses are not symbolized",
             cprof_strerror(sym_err));
    cprof__pprof_comment(p->enc, text);
  }
  int tab_err = cprof__stacktab_init();
  if (tab_err) {
    snprintf(text, sizeof text,
             "cprof: the stack table could not be made (%s): no stack was "
             "recorded",
             cprof_strerror(tab_err));
    cprof__pprof_comment(p->enc, text);
  }
  return p;
}

void cprof__prof_comment(cprof__prof *p, const char *comment) {
  cprof__pprof_comment(p->enc, comment);
}

void cprof__prof_drop_comment(cprof__prof *p, const cprof__agg *agg) {
  const uint64_t overflows = cprof__stacktab_overflows();
  const uint64_t drops = agg ? cprof__agg_drops(agg) : 0;
  if (overflows == 0 && drops == 0) return; /* nothing to say */
  char text[200];
  snprintf(text, sizeof text,
           "cprof %s: %llu samples lost to a full stack table (or one out "
           "of address space), %llu to a full profile table",
           cprof_version(), (unsigned long long)overflows,
           (unsigned long long)drops);
  cprof__prof_comment(p, text);
}

/* Threads created while cprof is loaded start in its trampoline; a stack
 * ends below it, as Go's stacks end at the goroutine's function, so the
 * trampoline and libc's thread start are not shown. */
size_t cprof__visible_depth(const uintptr_t *pcs, size_t npcs) {
  uintptr_t tramp = cprof__thread_entry_start();
  for (size_t i = 1; i < npcs; i++) {
    const cprof__sym_result *r = cprof__sym_lookup(pcs[i]);
    if (r && r->nframes > 0 && r->frames[r->nframes - 1].start == tramp)
      return i;
  }
  return npcs;
}

/* A labelled stack's set (capture/labels.h), with the profile's own labels,
 * as the sample's labels; labels is returned when the stack has none. */
static const cprof__pprof_label *with_set_labels(
    const uintptr_t *pcs, size_t *npcs, const cprof__pprof_label *labels,
    size_t *nlabels, cprof__pprof_label *buf, size_t cap) {
  const cprof_labels *set = cprof__labels_strip(pcs, npcs);
  if (!set || *nlabels > cap) return labels;
  const char *const *kv;
  size_t n = cprof__labels_pairs(set, &kv), len = *nlabels;
  for (size_t i = 0; i < len; i++) buf[i] = labels[i];
  for (size_t i = 0; i < n && len < cap; i++)
    buf[len++] = (cprof__pprof_label){.key = kv[2 * i], .str = kv[2 * i + 1]};
  *nlabels = len;
  return buf;
}

/* What cprof's own code was doing: the source file of its innermost
 * frame (inlined ones first) that says, the frames at pcs[0 .. n) (a run
 * of cprof's, innermost first) in turn; a helper inlined from a header
 * (the system-call wrappers, the spin locks) says nothing by itself. */
static uintptr_t own_kind(const uintptr_t *pcs, size_t n) {
  static const struct {
    const char *file;
    uintptr_t kind;
  } kinds[] = {
      {"heap_interpose.c", CPROF__PC_OWN_HEAP},
      {"heap_sampler.c", CPROF__PC_OWN_HEAP},
      {"heap_live.c", CPROF__PC_OWN_HEAP},
      {"cxx_interpose.c", CPROF__PC_OWN_HEAP},
      {"own_heap.c", CPROF__PC_OWN_HEAP},
      {"real_alloc.c", CPROF__PC_OWN_HEAP},
      {"mem.c", CPROF__PC_OWN_HEAP},
      {"heap_peak.c", CPROF__PC_OWN_HEAP},
      {"cfi_build.c", CPROF__PC_OWN_UNWIND},
      {"cfi_index.c", CPROF__PC_OWN_UNWIND},
      {"cfi_find.c", CPROF__PC_OWN_UNWIND},
      {"stack.c", CPROF__PC_OWN_STACK},
      {"saferead.c", CPROF__PC_OWN_STACK},
      {"sample.c", CPROF__PC_OWN_STACK},
      {"stacktab.c", CPROF__PC_OWN_STACK},
      {"labels.c", CPROF__PC_OWN_STACK},
      {"agg.c", CPROF__PC_OWN_STACK},
      {"records.c", CPROF__PC_OWN_STACK},
      {"cpu_timer.c", CPROF__PC_OWN_SAMPLE},
      {"thread_scan.c", CPROF__PC_OWN_SAMPLE},
      {"thread_sample.c", CPROF__PC_OWN_SAMPLE},
      {"thread_interpose.c", CPROF__PC_OWN_SAMPLE},
      {"sig_interpose.c", CPROF__PC_OWN_SAMPLE},
      {"taskread.c", CPROF__PC_OWN_SAMPLE},
      {"tasksample.c", CPROF__PC_OWN_SAMPLE},
      {"lock_interpose.c", CPROF__PC_OWN_LOCKS},
      {"symbolize.c", CPROF__PC_OWN_SYMBOLS},
      {"maps.c", CPROF__PC_OWN_SYMBOLS},
      {"vdso.c", CPROF__PC_OWN_SYMBOLS},
  };
  for (size_t i = 0; i < n; i++) {
    const cprof__sym_result *r = cprof__sym_lookup(pcs[i]);
    for (int j = 0; r && j < r->nframes; j++) {
      const char *f = strrchr(r->frames[j].file, '/');
      f = f ? f + 1 : r->frames[j].file;
      for (size_t k = 0; k < CPROF__ARRAY_LEN(kinds); k++)
        if (strcmp(f, kinds[k].file) == 0) return kinds[k].kind;
    }
  }
  return CPROF__PC_OWN_OTHER;
}

/* True for a pc in cprof's own code that is folded: any of it but its
 * interposers (malloc, pthread_mutex_lock...), which stand for the
 * function the program called and keep their names. */
static bool folds(const cprof__prof *p, uintptr_t pc) {
  if (pc < p->own_lo || pc >= p->own_hi) return false;
  const cprof__sym_result *r = cprof__sym_lookup(pc);
  return !(r && r->nframes > 0 &&
           cprof__is_interposer(r->frames[r->nframes - 1].start));
}

/* The stack with each run of cprof's own frames (other than interposers)
 * folded into one frame that says what cprof was doing, named by the run's
 * innermost frame: cprof's cost stays in the profile, under a name no
 * program has. Returns the stack to write (pcs itself when nothing was
 * folded or cprof's code cannot be told by address). */
static const uintptr_t *fold_own(cprof__prof *p, const uintptr_t *pcs,
                                 size_t *npcs) {
  size_t n = *npcs, i = 0;
  if (p->own_lo == p->own_hi) return pcs;
  while (i < n && (pcs[i] < p->own_lo || pcs[i] >= p->own_hi)) i++;
  if (i == n) return pcs;
  if (n > p->folded_cap) {
    uintptr_t *f = cprof__realloc(p->folded, n * sizeof *f);
    if (!f) return pcs;
    p->folded = f;
    p->folded_cap = n;
  }
  size_t m = 0;
  for (i = 0; i < n;) {
    const size_t run = i;
    while (i < n && folds(p, pcs[i])) i++;
    if (i == run)
      p->folded[m++] = pcs[i++];
    else
      p->folded[m++] = own_kind(pcs + run, i - run);
  }
  *npcs = m;
  return p->folded;
}

void cprof__prof_sample(cprof__prof *p, const uintptr_t *pcs, size_t npcs,
                        const int64_t *values,
                        const cprof__pprof_label *labels, size_t nlabels) {
  cprof__pprof_label set_labels[CPROF_LABELS_MAX_PAIRS + 4];
  labels = with_set_labels(pcs, &npcs, labels, &nlabels, set_labels,
                           CPROF__ARRAY_LEN(set_labels));
  npcs = cprof__visible_depth(pcs, npcs);
  pcs = fold_own(p, pcs, &npcs);
  if (npcs > p->loc_cap) {
    uint64_t *ids = cprof__realloc(p->loc_ids, npcs * sizeof *ids);
    if (!ids) {
      p->err = CPROF_ENOMEM;
      return;
    }
    p->loc_ids = ids;
    p->loc_cap = npcs;
  }
  for (size_t i = 0; i < npcs; i++)
    p->loc_ids[i] = location_id(p, pcs[i],
                                cprof__tail_callee(pcs, i, p->first_is_call));
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
  cprof__sym_save();
  cprof__sym_unlock();
  int err = cprof__pprof_finish(p->enc);
  if (!err) err = p->err;
  cprof__hmap_free(&p->locations);
  cprof__hmap_free(&p->tail_index);
  cprof__free(p->tails);
  cprof__hmap_free(&p->functions);
  cprof__free(p->mappings);
  cprof__free(p->loc_ids);
  cprof__free(p->folded);
  cprof__free(p);
  return err;
}

/* Whether the stacks being written were taken by an interposer; under the
 * symbolizer lock, set by the text_begin functions. */
static bool text_first_is_call;

void cprof__text_begin(void) {
  cprof__sym_lock();
  cprof__sym_refresh();
  text_first_is_call = false;
}

void cprof__text_begin_calls(void) {
  cprof__text_begin();
  text_first_is_call = true;
}

void cprof__text_end(void) {
  cprof__sym_save();
  cprof__sym_unlock();
}

int cprof__text_stack(cprof_buf *out, const uintptr_t *pcs, size_t npcs) {
  cprof__labels_strip(pcs, &npcs); /* Go's text has no labels here */
  npcs = cprof__visible_depth(pcs, npcs);
  /* As Go: the @ line lists return addresses, the # lines the call
   * sites (pc - 1) the stacks hold. */
  int err = cprof__buf_printf(out, " @");
  for (size_t i = 0; !err && i < npcs; i++)
    err = cprof__buf_printf(out, " %#llx", (unsigned long long)pcs[i] + 1);
  if (!err) err = cprof__buf_printf(out, "\n");
  for (size_t i = 0; !err && i < npcs; i++) {
    const cprof__sym_result *r = cprof__sym_lookup(pcs[i]);
    if (!r || r->nframes == 0) {
      err = cprof__buf_printf(out, "#\t%#llx\n", (unsigned long long)pcs[i]);
      continue;
    }
    /* Go prints each inlined frame on its own line with the same pc; the
     * offset is from the start of the function the code belongs to. A
     * function left by a tail call is printed the same way, first. */
    const cprof__sym_frame *outer = &r->frames[r->nframes - 1];
    const cprof__sym_frame *tail =
        cprof__tail_callee(pcs, i, text_first_is_call);
    unsigned long long off = outer->start && pcs[i] >= outer->start
                                 ? (unsigned long long)(pcs[i] - outer->start)
                                 : 0;
    for (int f = tail ? -1 : 0; !err && f < r->nframes; f++) {
      const cprof__sym_frame *fr = f < 0 ? tail : &r->frames[f];
      err = cprof__buf_printf(out, "#\t%#llx\t%s+%#llx\t",
                              (unsigned long long)pcs[i], fr->name, off);
      /* Without line information, the object rather than ":0". */
      const cprof__sym_mapping *m =
          r->mapping >= 0 ? cprof__sym_mapping_at((size_t)r->mapping) : NULL;
      if (!err)
        err = fr->line > 0 && fr->file[0]
                  ? cprof__buf_printf(out, "%s:%d\n", fr->file, fr->line)
                  : cprof__buf_printf(out, "%s\n",
                                      m && m->path[0] ? m->path : "?");
    }
  }
  return err;
}

/* Go's text/tabwriter as runtime/pprof sets it up for debug=1 (minimum
 * width 1, tab width 8, padding 1, tabs as padding, no flags): a line's
 * tab-terminated cells are columns, and a run of consecutive lines with a
 * cell in one column is padded to that run's widest cell plus one,
 * rounded up to a tab stop, with tabs. Widths count UTF-8 characters. A
 * line's text after its last tab is no cell and is left as it is. */
#define TAB_COLUMNS 16 /* cells past this many on a line stay plain text */

typedef struct tabwriter {
  const char *text;
  size_t nlines;
  size_t *start, *len;     /* each line's bytes, without its '\n' */
  unsigned char *ncells;   /* its cells (tabs), at most TAB_COLUMNS */
  size_t *cellw;           /* its cells' widths, TAB_COLUMNS per line */
  size_t widths[TAB_COLUMNS];
  cprof_buf *out;
  int err;
} tabwriter;

static void tab_lines(tabwriter *t, size_t l0, size_t l1) {
  for (size_t l = l0; l < l1 && !t->err; l++) {
    const char *p = t->text + t->start[l], *end = p + t->len[l];
    for (size_t j = 0; j < t->ncells[l] && !t->err; j++) {
      const char *tab = memchr(p, '\t', (size_t)(end - p));
      t->err = cprof__buf_append(t->out, p, (size_t)(tab - p));
      size_t cell = (t->widths[j] + 7) / 8 * 8;
      for (size_t k = (cell - t->cellw[l * TAB_COLUMNS + j] + 7) / 8;
           k > 0 && !t->err; k--)
        t->err = cprof__buf_append(t->out, "\t", 1);
      p = tab + 1;
    }
    if (!t->err) t->err = cprof__buf_append(t->out, p, (size_t)(end - p));
    if (!t->err) t->err = cprof__buf_append(t->out, "\n", 1);
  }
}

/* Go's format: lines l0..l1 all have cells in the columns left of col,
 * whose widths are known. Depth at most TAB_COLUMNS. */
static void tab_format(tabwriter *t, size_t col, size_t l0, size_t l1) {
  for (size_t l = l0; l < l1;) {
    if (col >= t->ncells[l]) {
      l++;
      continue;
    }
    tab_lines(t, l0, l);
    l0 = l;
    size_t width = 1;
    for (; l < l1 && col < t->ncells[l]; l++)
      if (t->cellw[l * TAB_COLUMNS + col] + 1 > width)
        width = t->cellw[l * TAB_COLUMNS + col] + 1;
    t->widths[col] = width;
    tab_format(t, col + 1, l0, l);
    l0 = l;
  }
  tab_lines(t, l0, l1);
}

int cprof__tabwrite(cprof_buf *out, const char *text, size_t len) {
  tabwriter t = {.text = text, .out = out};
  for (size_t i = 0; i < len; i++) t.nlines += text[i] == '\n';
  if (len && text[len - 1] != '\n') t.nlines++;
  if (t.nlines == 0) return 0;
  t.start = cprof__calloc(t.nlines, sizeof *t.start);
  t.len = cprof__calloc(t.nlines, sizeof *t.len);
  t.ncells = cprof__calloc(t.nlines, 1);
  t.cellw = cprof__calloc(t.nlines, TAB_COLUMNS * sizeof *t.cellw);
  if (!t.start || !t.len || !t.ncells || !t.cellw) {
    t.err = CPROF_ENOMEM;
    goto out;
  }
  for (size_t l = 0, i = 0; l < t.nlines; l++) {
    t.start[l] = i;
    size_t w = 0;
    for (; i < len && text[i] != '\n'; i++) {
      if (text[i] == '\t' && t.ncells[l] < TAB_COLUMNS) {
        t.cellw[l * TAB_COLUMNS + t.ncells[l]++] = w;
        w = 0;
      } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
        w++;
      }
    }
    t.len[l] = i - t.start[l];
    i++; /* the '\n' */
  }
  tab_format(&t, 0, 0, t.nlines);
  /* A last line without its '\n' is written without one. */
  if (!t.err && text[len - 1] != '\n') out->len--;
out:
  cprof__free(t.start);
  cprof__free(t.len);
  cprof__free(t.ncells);
  cprof__free(t.cellw);
  return t.err;
}

int cprof__text_record(cprof_buf *out, cprof__stack_id sid) {
  const uintptr_t *pcs;
  size_t n = cprof__stacktab_get(sid, &pcs);
  /* Go's frame lines go through its tabwriter; so do these. */
  cprof_buf raw = {0};
  int err = cprof__text_stack(&raw, pcs, n);
  if (!err) err = cprof__tabwrite(out, (const char *)raw.data, raw.len);
  cprof_buf_free(&raw);
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
                            size_t len, bool first_is_call,
                            const cprof_sink *sink) {
  int64_t total = 0;
  for (size_t i = 0; i < len; i++) total += v[i].count;
  cprof_buf out = {0};
  int err = cprof__buf_printf(&out, "%s profile: total %lld\n", name,
                              (long long)total);
  if (first_is_call)
    cprof__text_begin_calls();
  else
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
                             bool first_is_call, const cprof_sink *sink) {
  const cprof__value_type st = {name, "count"};
  const cprof__prof_desc d = {
      .sample_types = &st,
      .nsample_types = 1,
      .period_type = st,
      .period = 1,
      .time_nanos = time_ns,
      .duration_nanos = duration_ns,
      .first_is_call = first_is_call,
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
                               bool first_is_call, const cprof_sink *sink) {
  count_entry *v = cprof__malloc((recs->len + 1) * sizeof *v);
  if (!v) return CPROF_ENOMEM;
  size_t len = 0;
  for (size_t i = 0; i < recs->len; i++)
    if (recs->v[i].v[0] != 0)
      v[len++] = (count_entry){recs->v[i].sid, recs->v[i].v[0]};
  len = merge_equal_stacks(v, len);
  qsort(v, len, sizeof *v, by_count_desc);
  int err = debug ? write_count_text(name, v, len, first_is_call, sink)
                  : write_count_pprof(name, v, len, recs->time_ns,
                                      duration_ns, first_is_call, sink);
  cprof__free(v);
  return err;
}
