/*
 * Tests for the pprof merger. Parts are written by the library's own
 * encoder (or built byte by byte, for the malformed ones), merged, and the
 * result is inflated and decoded by a small protobuf reader (pbread.h), so
 * the checks are on the wire format the merger wrote rather than on its
 * own idea of it: the ids, the references, the string table and the
 * labels every sample gained.
 */
#include <stdbool.h>
#include <zlib.h>

#include "base/mem.h"
#include "encode/pprof.h"
#include "encode/pprof_merge.h"
#include "pbread.h"
#include "testutil.h"

#define MAXN 64

typedef struct tlabel {
  uint64_t key, str, num, unit;
} tlabel;

typedef struct tsample {
  uint64_t locs[MAXN];
  size_t nlocs;
  uint64_t vals[MAXN];
  size_t nvals;
  tlabel labels[8];
  size_t nlabels;
} tsample;

typedef struct tloc {
  uint64_t id, mapping_id, address;
  uint64_t fns[8];
  size_t nlines;
} tloc;

typedef struct tprof {
  char *strs[1024];
  size_t nstrs;
  uint64_t st[8][2];
  size_t nst;
  tsample samples[MAXN];
  size_t nsamples;
  uint64_t maps[MAXN][7]; /* by field number, up to build_id */
  size_t nmaps;
  tloc locs[MAXN];
  size_t nlocs;
  uint64_t funcs[MAXN][6];
  size_t nfuncs;
  uint64_t comments[MAXN];
  size_t ncomments;
  uint64_t scalar[16];
  uint64_t period_type[3];
  uint64_t unknown; /* the value of field 100, when there */
  bool bad;
} tprof;

static void decode_sample(rd *r, tprof *d) {
  tsample scratch;
  tsample *s = d->nsamples < MAXN ? &d->samples[d->nsamples] : &scratch;
  memset(s, 0, sizeof *s);
  int f, w;
  uint64_t v = 0;
  rd sub = {0};
  while (rd_field(r, &f, &w, &v, &sub)) {
    if (f == 1) rd_repeated(w, v, &sub, s->locs, &s->nlocs, MAXN, NULL);
    if (f == 2) rd_repeated(w, v, &sub, s->vals, &s->nvals, MAXN, NULL);
    if (f == 3 && w == 2) {
      uint64_t l[5] = {0};
      decode_fields(&sub, l, 5);
      if (s->nlabels < 8)
        s->labels[s->nlabels] = (tlabel){l[1], l[2], l[3], l[4]};
      s->nlabels++;
    }
  }
  d->nsamples++;
}

static void decode_location(rd *r, tprof *d) {
  tloc scratch, *l = d->nlocs < MAXN ? &d->locs[d->nlocs] : &scratch;
  memset(l, 0, sizeof *l);
  int f, w;
  uint64_t v = 0;
  rd sub = {0};
  while (rd_field(r, &f, &w, &v, &sub)) {
    if (f == 1) l->id = v;
    if (f == 2) l->mapping_id = v;
    if (f == 3) l->address = v;
    if (f == 4 && w == 2) {
      uint64_t line[4] = {0};
      decode_fields(&sub, line, 4);
      if (l->nlines < 8) l->fns[l->nlines] = line[1];
      l->nlines++;
    }
  }
  d->nlocs++;
}

static tprof *decode(const unsigned char *data, size_t len) {
  tprof *d = calloc(1, sizeof *d);
  rd r = {data, data + len, false};
  int f, w;
  uint64_t v = 0;
  rd sub = {0};
  while (rd_field(&r, &f, &w, &v, &sub)) {
    switch (f) {
      case 1:
        if (d->nst < 8) {
          uint64_t vt[3] = {0};
          decode_fields(&sub, vt, 3);
          d->st[d->nst][0] = vt[1];
          d->st[d->nst][1] = vt[2];
        }
        d->nst++;
        break;
      case 2: decode_sample(&sub, d); break;
      case 3:
        if (d->nmaps < MAXN) decode_fields(&sub, d->maps[d->nmaps], 7);
        d->nmaps++;
        break;
      case 4: decode_location(&sub, d); break;
      case 5:
        if (d->nfuncs < MAXN) decode_fields(&sub, d->funcs[d->nfuncs], 6);
        d->nfuncs++;
        break;
      case 6:
        if (d->nstrs < 1024) {
          size_t n = (size_t)(sub.end - sub.p);
          char *s = malloc(n + 1);
          memcpy(s, sub.p, n);
          s[n] = 0;
          d->strs[d->nstrs] = s;
        }
        d->nstrs++;
        break;
      case 11: decode_fields(&sub, d->period_type, 3); break;
      case 13: rd_repeated(w, v, &sub, d->comments, &d->ncomments, MAXN, NULL); break;
      case 100: d->unknown = v; break;
      default:
        if (w == 0 && f < 16) d->scalar[f] = v;
        break;
    }
  }
  d->bad = r.bad || d->nsamples > MAXN || d->nmaps > MAXN ||
           d->nlocs > MAXN || d->nfuncs > MAXN || d->nstrs > 1024 ||
           d->ncomments > MAXN;
  return d;
}

static void tprof_free(tprof *d) {
  for (size_t i = 0; i < d->nstrs && i < 1024; i++) free(d->strs[i]);
  free(d);
}

static const char *S(const tprof *d, uint64_t i) {
  return i < d->nstrs && i < 1024 ? d->strs[i] : "<out of range>";
}

/* Merges and decodes; NULL (with a failed check) when the merge fails. */
static tprof *merge_decode(const cprof__merge_part *parts, size_t n,
                           const char *const *comments, size_t ncomments,
                           cprof_buf *keep) {
  cprof_buf out = {0};
  char err[256];
  int rc = cprof__pprof_merge(parts, n, comments, ncomments, &out, err,
                              sizeof err);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "merge: %s\n", err);
    return NULL;
  }
  CHECK(out.len > 2 && out.data[0] == 0x1f && out.data[1] == 0x8b);
  size_t plen = 0;
  unsigned char *plain = gunzip(out.data, out.len, &plen);
  CHECK(plain != NULL);
  tprof *d = plain ? decode(plain, plen) : NULL;
  free(plain);
  if (keep)
    *keep = out;
  else
    cprof_buf_free(&out);
  CHECK(d && !d->bad);
  return d;
}

/* The two profiles most tests merge: the same sample types, overlapping
 * ids (both use function 1 and 2, location 1 and 2, mapping 1) naming
 * different things, and strings both share. */
static void write_a(cprof__pprof *p) {
  cprof__pprof_sample_type(p, "samples", "count");
  cprof__pprof_sample_type(p, "cpu", "nanoseconds");
  cprof__pprof_period(p, "cpu", "nanoseconds", 10000000);
  cprof__pprof_time(p, 1000, 5);
  cprof__pprof_comment(p, "hello");
  cprof__pprof_drop_frames(p, "drop.*");
  cprof__pprof_mapping m = {.id = 1, .memory_start = 0x400000,
                            .memory_limit = 0x500000, .filename = "/bin/a",
                            .build_id = "aaaa", .has_functions = true};
  cprof__pprof_add_mapping(p, &m);
  cprof__pprof_function(p, 1, "main", "main", "a.c", 1);
  cprof__pprof_function(p, 2, "a_work", "a_work", "a.c", 10);
  cprof__pprof_line l1 = {2, 12, 0}, l2 = {1, 3, 0};
  cprof__pprof_location(p, 1, 1, 0x401000, &l1, 1, false);
  cprof__pprof_location(p, 2, 1, 0x402000, &l2, 1, false);
  uint64_t s1[] = {1, 2}, s2[] = {2};
  int64_t v1[] = {3, 30}, v2[] = {1, 10};
  cprof__pprof_label lab = {.key = "thread", .str = "t1"};
  cprof__pprof_sample(p, s1, 2, v1, 2, &lab, 1);
  cprof__pprof_sample(p, s2, 1, v2, 2, NULL, 0);
}

static void write_b(cprof__pprof *p, const char *unit) {
  cprof__pprof_sample_type(p, "samples", "count");
  cprof__pprof_sample_type(p, "cpu", unit);
  cprof__pprof_period(p, "wall", "seconds", 7);
  cprof__pprof_time(p, 500, 9);
  cprof__pprof_comment(p, "hello");
  cprof__pprof_comment(p, "world");
  cprof__pprof_default_sample_type(p, "cpu");
  cprof__pprof_drop_frames(p, "other");
  cprof__pprof_mapping m = {.id = 1, .memory_start = 0x10000,
                            .memory_limit = 0x20000, .filename = "/bin/b"};
  cprof__pprof_add_mapping(p, &m);
  cprof__pprof_function(p, 1, "main", "main", "b.c", 1);
  cprof__pprof_function(p, 2, "b_work", "b_work", "b.c", 20);
  cprof__pprof_function(p, 7, "b_inner", "b_inner", "b.c", 30);
  cprof__pprof_line inl[] = {{7, 31, 0}, {2, 22, 0}}, l1 = {2, 21, 0},
                    l2 = {1, 2, 0};
  cprof__pprof_location(p, 5, 1, 0x10100, inl, 2, false);
  cprof__pprof_location(p, 1, 1, 0x10200, &l1, 1, false);
  cprof__pprof_location(p, 2, 1, 0x10300, &l2, 1, false);
  uint64_t s1[] = {5, 2}, s2[] = {1, 2};
  int64_t v1[] = {2, 20}, v2[] = {4, 40};
  cprof__pprof_label lab = {.key = "bytes", .num = 4096, .num_unit = "bytes"};
  cprof__pprof_sample(p, s1, 2, v1, 2, &lab, 1);
  cprof__pprof_sample(p, s2, 2, v2, 2, NULL, 0);
}

typedef enum { PROF_A, PROF_B, PROF_B_BAD_UNIT } which_prof;

static void make(cprof_buf *out, which_prof which, bool gzip) {
  cprof_sink sink = cprof_sink_buf(out);
  cprof__pprof *p = cprof__pprof_new(&sink, gzip);
  if (which == PROF_A)
    write_a(p);
  else
    write_b(p, which == PROF_B ? "nanoseconds" : "microseconds");
  CHECK_EQ_INT(cprof__pprof_finish(p), 0);
}

static const tloc *find_loc(const tprof *d, uint64_t id) {
  for (size_t i = 0; i < d->nlocs; i++)
    if (d->locs[i].id == id) return &d->locs[i];
  return NULL;
}

static const uint64_t *find_func(const tprof *d, uint64_t id) {
  for (size_t i = 0; i < d->nfuncs; i++)
    if (d->funcs[i][1] == id) return d->funcs[i];
  return NULL;
}

static const uint64_t *find_map(const tprof *d, uint64_t id) {
  for (size_t i = 0; i < d->nmaps; i++)
    if (d->maps[i][1] == id) return d->maps[i];
  return NULL;
}

/* The function names of a sample's stack, leaf first and innermost line
 * first, joined by ';' (into buf). */
static const char *stack_names(const tprof *d, const tsample *s, char *buf,
                               size_t len) {
  size_t at = 0;
  buf[0] = 0;
  for (size_t i = 0; i < s->nlocs; i++) {
    const tloc *l = find_loc(d, s->locs[i]);
    for (size_t j = 0; l && j < l->nlines; j++) {
      const uint64_t *f = find_func(d, l->fns[j]);
      at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ";" : "",
                             f ? S(d, f[2]) : "?");
      if (at >= len) return buf;
    }
  }
  return buf;
}

/* The structural promises every merged profile keeps: "" first and no
 * string twice, every index in range, ids nonzero and unique, every
 * reference resolved. */
static void check_well_formed(const tprof *d) {
  CHECK(d->nstrs > 0);
  CHECK_STREQ(S(d, 0), "");
  for (size_t i = 0; i < d->nstrs; i++)
    for (size_t j = i + 1; j < d->nstrs; j++)
      if (strcmp(d->strs[i], d->strs[j]) == 0) {
        fprintf(stderr, "string \"%s\" at %zu and %zu\n", d->strs[i], i, j);
        CHECK(!"duplicate string");
      }
  for (size_t i = 0; i < d->nmaps; i++) {
    CHECK(d->maps[i][1] != 0);
    CHECK(d->maps[i][5] < d->nstrs && d->maps[i][6] < d->nstrs);
    for (size_t j = i + 1; j < d->nmaps; j++)
      CHECK(d->maps[i][1] != d->maps[j][1]);
  }
  for (size_t i = 0; i < d->nfuncs; i++) {
    CHECK(d->funcs[i][1] != 0);
    for (int k = 2; k <= 4; k++) CHECK(d->funcs[i][k] < d->nstrs);
    for (size_t j = i + 1; j < d->nfuncs; j++)
      CHECK(d->funcs[i][1] != d->funcs[j][1]);
  }
  for (size_t i = 0; i < d->nlocs; i++) {
    const tloc *l = &d->locs[i];
    CHECK(l->id != 0);
    for (size_t j = i + 1; j < d->nlocs; j++) CHECK(l->id != d->locs[j].id);
    CHECK(l->mapping_id == 0 || find_map(d, l->mapping_id) != NULL);
    for (size_t j = 0; j < l->nlines && j < 8; j++)
      CHECK(find_func(d, l->fns[j]) != NULL);
  }
  for (size_t i = 0; i < d->nsamples && i < MAXN; i++) {
    const tsample *s = &d->samples[i];
    CHECK_EQ_INT(s->nvals, d->nst);
    for (size_t j = 0; j < s->nlocs; j++)
      CHECK(find_loc(d, s->locs[j]) != NULL);
    for (size_t j = 0; j < s->nlabels && j < 8; j++) {
      CHECK(s->labels[j].key < d->nstrs);
      CHECK(s->labels[j].str < d->nstrs);
      CHECK(s->labels[j].unit < d->nstrs);
    }
  }
  for (size_t i = 0; i < d->ncomments; i++) CHECK(d->comments[i] < d->nstrs);
}

/* The labels with key key: how many, and the first's str (by name) or
 * num. */
static size_t label_count(const tprof *d, const tsample *s, const char *key,
                          const char **str, int64_t *num) {
  size_t n = 0;
  for (size_t i = 0; i < s->nlabels && i < 8; i++) {
    if (strcmp(S(d, s->labels[i].key), key) != 0) continue;
    if (n++ == 0) {
      if (str) *str = S(d, s->labels[i].str);
      if (num) *num = (int64_t)s->labels[i].num;
    }
  }
  return n;
}

static void test_merge_two(void) {
  cprof_buf a = {0}, b = {0};
  make(&a, PROF_A, true);
  make(&b, PROF_B, false); /* one raw, one gzipped */
  cprof__merge_part parts[] = {{a.data, a.len, 100, "alpha"},
                               {b.data, b.len, 200, ""}};
  const char *extra[] = {"merged", "hello"};
  tprof *d = merge_decode(parts, 2, extra, 2, NULL);
  if (!d) goto out;
  check_well_formed(d);

  CHECK_EQ_INT(d->nsamples, 4);
  CHECK_EQ_INT(d->nmaps, 2);
  CHECK_EQ_INT(d->nfuncs, 5);
  CHECK_EQ_INT(d->nlocs, 5);
  CHECK_EQ_INT(d->nst, 2);
  CHECK_STREQ(S(d, d->st[0][0]), "samples");
  CHECK_STREQ(S(d, d->st[0][1]), "count");
  CHECK_STREQ(S(d, d->st[1][0]), "cpu");
  CHECK_STREQ(S(d, d->st[1][1]), "nanoseconds");

  /* Each part's stacks still name its own functions and mappings. */
  char buf[256];
  CHECK_STREQ(stack_names(d, &d->samples[0], buf, sizeof buf), "a_work;main");
  CHECK_STREQ(stack_names(d, &d->samples[1], buf, sizeof buf), "main");
  CHECK_STREQ(stack_names(d, &d->samples[2], buf, sizeof buf),
              "b_inner;b_work;main");
  CHECK_STREQ(stack_names(d, &d->samples[3], buf, sizeof buf), "b_work;main");
  const tloc *l = find_loc(d, d->samples[2].locs[0]);
  CHECK(l != NULL);
  if (l) {
    CHECK_EQ_INT(l->address, 0x10100);
    const uint64_t *m = find_map(d, l->mapping_id);
    CHECK(m != NULL);
    if (m) CHECK_STREQ(S(d, m[5]), "/bin/b");
  }
  l = find_loc(d, d->samples[0].locs[0]);
  if (l) {
    const uint64_t *m = find_map(d, l->mapping_id);
    if (m) CHECK_STREQ(S(d, m[5]), "/bin/a");
    if (m) CHECK_STREQ(S(d, m[6]), "aaaa");
  }
  CHECK_EQ_INT(d->samples[2].vals[1], 20);
  CHECK_EQ_INT(d->samples[3].vals[0], 4);

  /* The labels: the sample's own first, then pid and, for a named part,
   * process. */
  const char *str = NULL;
  int64_t num = 0;
  for (size_t i = 0; i < 4; i++) {
    const tsample *s = &d->samples[i];
    CHECK_EQ_INT(label_count(d, s, "pid", NULL, &num), 1);
    CHECK_EQ_INT(num, i < 2 ? 100 : 200);
    size_t np = label_count(d, s, "process", &str, NULL);
    CHECK_EQ_INT(np, i < 2 ? 1 : 0);
    if (np) CHECK_STREQ(str, "alpha");
  }
  CHECK_EQ_INT(d->samples[0].nlabels, 3);
  CHECK_STREQ(S(d, d->samples[0].labels[0].key), "thread");
  CHECK_STREQ(S(d, d->samples[0].labels[0].str), "t1");
  CHECK_STREQ(S(d, d->samples[0].labels[1].key), "pid");
  CHECK_STREQ(S(d, d->samples[0].labels[2].key), "process");
  CHECK_EQ_INT(d->samples[2].nlabels, 2);
  CHECK_STREQ(S(d, d->samples[2].labels[0].key), "bytes");
  CHECK_EQ_INT(d->samples[2].labels[0].num, 4096);
  CHECK_STREQ(S(d, d->samples[2].labels[0].unit), "bytes");

  /* The profile-wide fields. */
  CHECK_STREQ(S(d, d->period_type[1]), "cpu");
  CHECK_STREQ(S(d, d->period_type[2]), "nanoseconds");
  CHECK_EQ_INT(d->scalar[12], 10000000);
  CHECK_EQ_INT(d->scalar[9], 500);
  CHECK_EQ_INT(d->scalar[10], 9);
  CHECK_STREQ(S(d, d->scalar[7]), "drop.*");
  CHECK_EQ_INT(d->scalar[8], 0);
  CHECK_STREQ(S(d, d->scalar[14]), "cpu");
  CHECK_EQ_INT(d->ncomments, 3);
  CHECK_STREQ(S(d, d->comments[0]), "hello");
  CHECK_STREQ(S(d, d->comments[1]), "world");
  CHECK_STREQ(S(d, d->comments[2]), "merged");
  tprof_free(d);
out:
  cprof_buf_free(&a);
  cprof_buf_free(&b);
}

/* A merged profile merged again keeps its samples' pid labels, and its
 * samples get no second pid nor the new process name. */
static void test_merge_again(void) {
  cprof_buf a = {0}, b = {0}, m1 = {0};
  make(&a, PROF_A, true);
  make(&b, PROF_B, true);
  cprof__merge_part parts[] = {{a.data, a.len, 100, "alpha"},
                               {b.data, b.len, 200, "beta"}};
  tprof *d = merge_decode(parts, 2, NULL, 0, &m1);
  if (d) tprof_free(d);
  cprof__merge_part again[] = {{m1.data, m1.len, 999, "outer"},
                               {a.data, a.len, -7, "gamma"}};
  d = merge_decode(again, 2, NULL, 0, NULL);
  if (!d) goto out;
  check_well_formed(d);
  CHECK_EQ_INT(d->nsamples, 6);
  static const int64_t want_pid[] = {100, 100, 200, 200, -7, -7};
  static const char *const want_name[] = {"alpha", "alpha", "beta",
                                          "beta",  "gamma", "gamma"};
  for (size_t i = 0; i < 6; i++) {
    const char *str = NULL;
    int64_t num = 0;
    CHECK_EQ_INT(label_count(d, &d->samples[i], "pid", NULL, &num), 1);
    CHECK_EQ_INT(num, want_pid[i]);
    CHECK_EQ_INT(label_count(d, &d->samples[i], "process", &str, NULL), 1);
    CHECK_STREQ(str, want_name[i]);
  }
  char buf[256];
  CHECK_STREQ(stack_names(d, &d->samples[2], buf, sizeof buf),
              "b_inner;b_work;main");
  CHECK_STREQ(stack_names(d, &d->samples[4], buf, sizeof buf), "a_work;main");
  tprof_free(d);
out:
  cprof_buf_free(&a);
  cprof_buf_free(&b);
  cprof_buf_free(&m1);
}

/* A failing merge returns the code and a message and leaves out as it
 * was. */
static void expect_fail(const cprof__merge_part *parts, size_t n, int code,
                        const char *msg_part) {
  cprof_buf out = {0};
  cprof__buf_append(&out, "keep", 4);
  char err[256];
  int rc = cprof__pprof_merge(parts, n, NULL, 0, &out, err, sizeof err);
  CHECK_EQ_INT(rc, code);
  CHECK_EQ_INT(out.len, 4);
  if (rc && msg_part && !strstr(err, msg_part)) {
    fprintf(stderr, "message \"%s\" lacks \"%s\"\n", err, msg_part);
    CHECK(!"message");
  }
  CHECK(!rc || (err[0] && strlen(err) < sizeof err));
  cprof_buf_free(&out);
}

static void test_sample_types_differ(void) {
  cprof_buf a = {0}, b = {0};
  make(&a, PROF_A, true);
  make(&b, PROF_B_BAD_UNIT, true);
  cprof__merge_part parts[] = {{a.data, a.len, 1, NULL},
                               {b.data, b.len, 2, NULL}};
  expect_fail(parts, 2, CPROF_EINVAL, "the parts' sample types differ");
  /* A missing sample type differs too. */
  cprof__merge_part one_empty[] = {{a.data, a.len, 1, NULL},
                                   {(const unsigned char *)"", 0, 2, NULL}};
  expect_fail(one_empty, 2, CPROF_EINVAL, "sample types differ");
  cprof_buf_free(&a);
  cprof_buf_free(&b);
}

/* Every truncation of a gzipped part is refused; every truncation of a
 * raw one is merged or refused, and cutting its last byte (inside its
 * last varint) is refused. Under ASan this also checks nothing is read
 * past the cut. */
static void test_truncated(void) {
  cprof_buf gz = {0}, raw = {0}, good = {0};
  make(&gz, PROF_A, true);
  make(&raw, PROF_A, false);
  make(&good, PROF_A, true);
  for (size_t cut = 0; cut < gz.len; cut++) {
    unsigned char *copy = malloc(cut ? cut : 1);
    memcpy(copy, gz.data, cut);
    cprof__merge_part parts[] = {{good.data, good.len, 1, NULL},
                                 {copy, cut, 2, NULL}};
    /* cut 0 and 1 are raw bytes: empty and one byte of a tag. */
    if (cut >= 2) expect_fail(parts, 2, CPROF_EINVAL, "part 2: ");
    free(copy);
  }
  for (size_t cut = 1; cut < raw.len; cut++) {
    unsigned char *copy = malloc(cut);
    memcpy(copy, raw.data, cut);
    cprof__merge_part part = {copy, cut, 1, "x"};
    cprof_buf out = {0};
    int rc = cprof__pprof_merge(&part, 1, NULL, 0, &out, NULL, 0);
    CHECK(rc == 0 || rc == CPROF_EINVAL);
    if (cut == raw.len - 1) CHECK_EQ_INT(rc, CPROF_EINVAL);
    cprof_buf_free(&out);
    free(copy);
  }
  cprof_buf_free(&gz);
  cprof_buf_free(&raw);
  cprof_buf_free(&good);
}

/* Building profiles byte by byte, for what the encoder never writes. */

static void pb_varint(cprof_buf *b, uint64_t v) {
  unsigned char c;
  while (v >= 0x80) {
    c = (unsigned char)(v | 0x80);
    cprof__buf_append(b, &c, 1);
    v >>= 7;
  }
  c = (unsigned char)v;
  cprof__buf_append(b, &c, 1);
}

static void pb_uint(cprof_buf *b, int field, uint64_t v) {
  pb_varint(b, (uint64_t)field << 3);
  pb_varint(b, v);
}

static void pb_bytes(cprof_buf *b, int field, const void *data, size_t n) {
  pb_varint(b, ((uint64_t)field << 3) | 2);
  pb_varint(b, n);
  cprof__buf_append(b, data, n);
}

static void pb_msg(cprof_buf *b, int field, cprof_buf *sub) {
  pb_bytes(b, field, sub->data, sub->len);
  sub->len = 0;
}

static void pb_str(cprof_buf *b, const char *s) {
  pb_bytes(b, 6, s, strlen(s));
}

/* A small valid profile with one sample type, string table
 * "", "samples", "count", "f"; flags break it in one way each. */
enum {
  BREAK_NONE,
  BREAK_GROUP,
  BREAK_STRING_INDEX,
  BREAK_MAPPING_ID0,
  BREAK_DUP_LOCATION,
  BREAK_MISSING_LOCATION,
  BREAK_FIRST_STRING,
  BREAK_VALUE_COUNT,
  BREAK_WIRE_TYPE,
  BREAK_LABEL_STRING,
  BREAK_PACKED_VARINT,
};

static void build(cprof_buf *b, int brk) {
  cprof_buf sub = {0}, line = {0};
  b->len = 0;
  pb_uint(&sub, 1, 1);
  pb_uint(&sub, 2, 2);
  pb_msg(b, 1, &sub);
  /* A sample with unpacked ids and values, and a label. */
  pb_uint(&sub, 1, 10);
  pb_uint(&sub, 1, brk == BREAK_MISSING_LOCATION ? 11 : 10);
  pb_uint(&sub, 2, 5);
  if (brk == BREAK_VALUE_COUNT) pb_uint(&sub, 2, 6);
  if (brk == BREAK_PACKED_VARINT) pb_bytes(&sub, 2, "\x80", 1);
  pb_uint(&line, 1, brk == BREAK_LABEL_STRING ? 9 : 3);
  pb_uint(&line, 2, 3);
  pb_msg(&sub, 3, &line);
  pb_msg(b, 2, &sub);
  pb_uint(&sub, 1, brk == BREAK_MAPPING_ID0 ? 0 : 4);
  pb_uint(&sub, 5, 3);
  pb_msg(b, 3, &sub);
  pb_uint(&sub, 1, 10);
  pb_uint(&sub, 2, 4);
  pb_uint(&line, 1, 20);
  pb_msg(&sub, 4, &line);
  pb_msg(b, 4, &sub);
  if (brk == BREAK_DUP_LOCATION) {
    pb_uint(&sub, 1, 10);
    pb_msg(b, 4, &sub);
  }
  pb_uint(&sub, 1, 20);
  pb_uint(&sub, 2, brk == BREAK_STRING_INDEX ? 4 : 3);
  /* A field profile.proto does not have, to be copied through. */
  pb_uint(&sub, 99, 12345);
  pb_msg(b, 5, &sub);
  pb_str(b, brk == BREAK_FIRST_STRING ? "x" : "");
  pb_str(b, "samples");
  pb_str(b, "count");
  pb_str(b, "f");
  pb_uint(b, 100, 777);
  if (brk == BREAK_GROUP) pb_varint(b, (5 << 3) | 3);
  if (brk == BREAK_WIRE_TYPE) pb_bytes(b, 9, "", 0);
  cprof_buf_free(&sub);
  cprof_buf_free(&line);
}

static void test_malformed(void) {
  cprof_buf b = {0};
  build(&b, BREAK_NONE);
  cprof__merge_part part = {b.data, b.len, 42, "p"};
  tprof *d = merge_decode(&part, 1, NULL, 0, NULL);
  if (d) {
    check_well_formed(d);
    CHECK_EQ_INT(d->nsamples, 1);
    CHECK_EQ_INT(d->samples[0].nlocs, 2);
    CHECK_EQ_INT(d->samples[0].locs[0], d->samples[0].locs[1]);
    CHECK_EQ_INT(d->unknown, 777);
    CHECK_EQ_INT(d->nfuncs, 1);
    CHECK_STREQ(S(d, d->funcs[0][2]), "f");
    CHECK_EQ_INT(label_count(d, &d->samples[0], "f", NULL, NULL), 1);
    tprof_free(d);
  }

  static const struct {
    int brk;
    const char *msg;
  } cases[] = {
      {BREAK_GROUP, "malformed profile"},
      {BREAK_STRING_INDEX, "string index 4"},
      {BREAK_MAPPING_ID0, "a mapping has id 0"},
      {BREAK_DUP_LOCATION, "two locations have id 10"},
      {BREAK_MISSING_LOCATION, "location 11"},
      {BREAK_FIRST_STRING, "string_table[0]"},
      {BREAK_VALUE_COUNT, "2 values for 1 sample types"},
      {BREAK_WIRE_TYPE, "malformed profile"},
      {BREAK_LABEL_STRING, "string index 9"},
      {BREAK_PACKED_VARINT, "malformed sample"},
  };
  for (size_t i = 0; i < CPROF__ARRAY_LEN(cases); i++) {
    build(&b, cases[i].brk);
    cprof__merge_part p1 = {b.data, b.len, 1, NULL};
    expect_fail(&p1, 1, CPROF_EINVAL, cases[i].msg);
  }
  cprof_buf_free(&b);
}

/* A gzip bomb: 65 MiB of zeros in about 65 KiB is refused at the limit. */
static void test_too_large(void) {
  size_t n = CPROF__MERGE_MAX_PART + (1 << 20);
  unsigned char *zeros = calloc(1, n);
  z_stream z;
  memset(&z, 0, sizeof z);
  CHECK_EQ_INT(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
               Z_OK);
  size_t cap = deflateBound(&z, (uLong)n);
  unsigned char *gz = malloc(cap);
  z.next_in = zeros;
  z.avail_in = (uInt)n;
  z.next_out = gz;
  z.avail_out = (uInt)cap;
  CHECK_EQ_INT(deflate(&z, Z_FINISH), Z_STREAM_END);
  size_t gzlen = cap - z.avail_out;
  deflateEnd(&z);
  cprof__merge_part part = {gz, gzlen, 1, NULL};
  expect_fail(&part, 1, CPROF_EINVAL, "limit");
  free(gz);
  free(zeros);
}

static void test_arguments(void) {
  cprof_buf a = {0}, out = {0};
  make(&a, PROF_A, true);
  cprof__merge_part part = {a.data, a.len, 1, NULL};
  CHECK_EQ_INT(cprof__pprof_merge(NULL, 1, NULL, 0, &out, NULL, 0),
               CPROF_EINVAL);
  CHECK_EQ_INT(cprof__pprof_merge(&part, 0, NULL, 0, &out, NULL, 0),
               CPROF_EINVAL);
  CHECK_EQ_INT(cprof__pprof_merge(&part, 1, NULL, 1, &out, NULL, 0),
               CPROF_EINVAL);
  CHECK_EQ_INT(cprof__pprof_merge(&part, 1, NULL, 0, NULL, NULL, 0),
               CPROF_EINVAL);
  const char *null_comment[] = {NULL};
  CHECK_EQ_INT(cprof__pprof_merge(&part, 1, null_comment, 1, &out, NULL, 0),
               CPROF_EINVAL);
  /* A one-byte error buffer gets an empty message, not an overflow. */
  char tiny[1] = {'x'};
  cprof__merge_part bad = {(const unsigned char *)"\x1f\x8b", 2, 1, NULL};
  CHECK_EQ_INT(cprof__pprof_merge(&bad, 1, NULL, 0, &out, tiny, 1),
               CPROF_EINVAL);
  CHECK_EQ_INT(tiny[0], 0);
  CHECK_EQ_INT(out.len, 0);
  /* An empty part, even without a pointer, is an empty profile. */
  cprof__merge_part empty = {NULL, 0, 1, "e"};
  tprof *d = merge_decode(&empty, 1, NULL, 0, NULL);
  if (d) {
    CHECK_EQ_INT(d->nsamples, 0);
    CHECK_EQ_INT(d->nstrs, 2); /* "" and "pid" */
    tprof_free(d);
  }
  /* Output is appended. */
  cprof__buf_append(&out, "xy", 2);
  CHECK_EQ_INT(cprof__pprof_merge(&part, 1, NULL, 0, &out, NULL, 0), 0);
  CHECK(out.len > 4 && memcmp(out.data, "xy\x1f\x8b", 4) == 0);
  cprof_buf_free(&out);
  cprof_buf_free(&a);
}

/* Many parts and many strings: the string index grows, ids stay unique
 * across parts, and every distinct string is in the table once. */
static void test_many_parts(void) {
  enum { NPARTS = 40 };
  cprof_buf bufs[NPARTS];
  cprof__merge_part parts[NPARTS];
  for (size_t i = 0; i < NPARTS; i++) {
    memset(&bufs[i], 0, sizeof bufs[i]);
    cprof_sink sink = cprof_sink_buf(&bufs[i]);
    cprof__pprof *p = cprof__pprof_new(&sink, i % 2);
    cprof__pprof_sample_type(p, "samples", "count");
    char name[32];
    for (int j = 0; j < 50; j++) {
      snprintf(name, sizeof name, "fn%d", (int)(i * 7 + (size_t)j) % 300);
      cprof__pprof_string(p, name);
    }
    snprintf(name, sizeof name, "fn%zu", i);
    cprof__pprof_function(p, 3, name, name, "x.c", 0);
    cprof__pprof_line line = {3, 1, 0};
    cprof__pprof_location(p, 9, 0, 0x100, &line, 1, false);
    uint64_t loc = 9;
    int64_t v = (int64_t)i + 1;
    cprof__pprof_sample(p, &loc, 1, &v, 1, NULL, 0);
    CHECK_EQ_INT(cprof__pprof_finish(p), 0);
    parts[i] = (cprof__merge_part){bufs[i].data, bufs[i].len,
                                   (int64_t)i + 1000, NULL};
  }
  cprof_buf out = {0};
  char err[256];
  CHECK_EQ_INT(cprof__pprof_merge(parts, NPARTS, NULL, 0, &out, err,
                                  sizeof err),
               0);
  size_t plen = 0;
  unsigned char *plain = gunzip(out.data, out.len, &plen);
  CHECK(plain != NULL);
  if (plain) {
    tprof *d = decode(plain, plen);
    check_well_formed(d);
    CHECK_EQ_INT(d->nsamples, NPARTS > MAXN ? MAXN : NPARTS);
    /* "", samples, count, pid, fn0..fn299, x.c */
    CHECK_EQ_INT(d->nstrs, 305);
    for (size_t i = 0; i < NPARTS && i < MAXN; i++) {
      char buf[64], want[32];
      snprintf(want, sizeof want, "fn%zu", i);
      CHECK_STREQ(stack_names(d, &d->samples[i], buf, sizeof buf), want);
      int64_t num = 0;
      CHECK_EQ_INT(label_count(d, &d->samples[i], "pid", NULL, &num), 1);
      CHECK_EQ_INT(num, (int64_t)i + 1000);
    }
    tprof_free(d);
    free(plain);
  }
  cprof_buf_free(&out);
  for (size_t i = 0; i < NPARTS; i++) cprof_buf_free(&bufs[i]);
}

/* time_nanos is the earliest nonzero one, duration_nanos the largest. */
static void test_times(void) {
  static const int64_t times[][2] = {{0, 4}, {300, 2}, {0, 0}, {900, 1}};
  cprof_buf bufs[4];
  cprof__merge_part parts[4];
  for (size_t i = 0; i < 4; i++) {
    memset(&bufs[i], 0, sizeof bufs[i]);
    cprof_sink sink = cprof_sink_buf(&bufs[i]);
    cprof__pprof *p = cprof__pprof_new(&sink, false);
    cprof__pprof_sample_type(p, "samples", "count");
    cprof__pprof_time(p, times[i][0], times[i][1]);
    CHECK_EQ_INT(cprof__pprof_finish(p), 0);
    parts[i] = (cprof__merge_part){bufs[i].data, bufs[i].len, 1, NULL};
  }
  tprof *d = merge_decode(parts, 4, NULL, 0, NULL);
  if (d) {
    CHECK_EQ_INT(d->scalar[9], 300);
    CHECK_EQ_INT(d->scalar[10], 4);
    tprof_free(d);
  }
  for (size_t i = 0; i < 4; i++) cprof_buf_free(&bufs[i]);
}

int main(void) {
  RUN(test_merge_two);
  RUN(test_merge_again);
  RUN(test_sample_types_differ);
  RUN(test_truncated);
  RUN(test_malformed);
  RUN(test_too_large);
  RUN(test_arguments);
  RUN(test_many_parts);
  RUN(test_times);
  return TEST_RESULT();
}
