/*
 * Tests for the pprof encoder. Profiles are written uncompressed into a
 * memory buffer and read back with a small protobuf decoder of the tests'
 * own (pbread.h and the decoder below), so
 * the tests check the wire format itself rather than trusting the encoder's
 * own idea of it. The gzip path is checked by inflating its output and
 * comparing it with the uncompressed encoding of the same profile.
 */
#include <stdbool.h>
#include <zlib.h>

#include "base/mem.h"
#include "encode/gzout.h"
#include "encode/pprof.h"
#include "encode/writer.h"
#include "pbread.h"
#include "testutil.h"

#define MAXN 16

typedef struct dlabel {
  int64_t key, str, num, unit;
} dlabel;

typedef struct dsample {
  uint64_t ids[MAXN];
  size_t nids;
  uint64_t vals[MAXN];
  size_t nvals;
  dlabel labels[MAXN];
  size_t nlabels;
  bool ids_packed, vals_packed;
} dsample;

typedef struct dlocation {
  uint64_t f[6]; /* by field number; f[4] unused */
  uint64_t lines[MAXN][4];
  size_t nlines;
} dlocation;

/* A decoded profile: the first MAXN of each message, and counts of all. */
typedef struct dprof {
  char **strs;
  size_t nstrs;
  int64_t st[MAXN][3];
  size_t nst;
  dsample samples[MAXN];
  size_t nsamples;
  int64_t value_sum; /* of every sample's first value */
  uint64_t mappings[MAXN][11];
  size_t nmappings;
  dlocation locations[MAXN];
  size_t nlocations;
  uint64_t functions[MAXN][6];
  size_t nfunctions;
  uint64_t comments[MAXN];
  size_t ncomments;
  bool comments_packed;
  int64_t scalar[16]; /* the varint fields of Profile by number */
  int64_t period_type[3];
  bool has_period_type;
} dprof;

static void dprof_free(dprof *d) {
  for (size_t i = 0; i < d->nstrs; i++) free(d->strs[i]);
  free(d->strs);
  free(d);
}

static void decode_sample(rd *r, dprof *d) {
  dsample scratch, *s = d->nsamples < MAXN ? &d->samples[d->nsamples] : &scratch;
  memset(s, 0, sizeof *s);
  int f, w;
  uint64_t v = 0;
  rd sub = {0};
  while (rd_field(r, &f, &w, &v, &sub)) {
    if (f == 1) rd_repeated(w, v, &sub, s->ids, &s->nids, MAXN, &s->ids_packed);
    if (f == 2) rd_repeated(w, v, &sub, s->vals, &s->nvals, MAXN, &s->vals_packed);
    if (f == 3 && w == 2) {
      uint64_t l[5] = {0};
      decode_fields(&sub, l, 5);
      if (s->nlabels < MAXN)
        s->labels[s->nlabels] = (dlabel){(int64_t)l[1], (int64_t)l[2],
                                         (int64_t)l[3], (int64_t)l[4]};
      s->nlabels++;
    }
  }
  if (s->nvals > 0) d->value_sum += (int64_t)s->vals[0];
  d->nsamples++;
}

static void decode_location(rd *r, dprof *d) {
  dlocation scratch;
  dlocation *l = d->nlocations < MAXN ? &d->locations[d->nlocations] : &scratch;
  memset(l, 0, sizeof *l);
  int f, w;
  uint64_t v = 0;
  rd sub = {0};
  while (rd_field(r, &f, &w, &v, &sub)) {
    if (f == 4 && w == 2) {
      if (l->nlines < MAXN) decode_fields(&sub, l->lines[l->nlines], 4);
      l->nlines++;
    } else if (w == 0 && f > 0 && f < 6) {
      l->f[f] = v;
    }
  }
  d->nlocations++;
}

static dprof *decode(const unsigned char *data, size_t len) {
  dprof *d = calloc(1, sizeof *d);
  rd r = {data, data + len, false};
  int f, w;
  uint64_t v = 0;
  rd sub = {0};
  while (rd_field(&r, &f, &w, &v, &sub)) {
    switch (f) {
      case 1:
        if (d->nst < MAXN) {
          uint64_t vt[3] = {0};
          decode_fields(&sub, vt, 3);
          d->st[d->nst][1] = (int64_t)vt[1];
          d->st[d->nst][2] = (int64_t)vt[2];
        }
        d->nst++;
        break;
      case 2: decode_sample(&sub, d); break;
      case 3:
        if (d->nmappings < MAXN) decode_fields(&sub, d->mappings[d->nmappings], 11);
        d->nmappings++;
        break;
      case 4: decode_location(&sub, d); break;
      case 5:
        if (d->nfunctions < MAXN)
          decode_fields(&sub, d->functions[d->nfunctions], 6);
        d->nfunctions++;
        break;
      case 6: {
        size_t n = (size_t)(sub.end - sub.p);
        d->strs = realloc(d->strs, (d->nstrs + 1) * sizeof *d->strs);
        d->strs[d->nstrs] = malloc(n + 1);
        memcpy(d->strs[d->nstrs], sub.p, n);
        d->strs[d->nstrs][n] = '\0';
        d->nstrs++;
        break;
      }
      case 11: {
        uint64_t vt[3] = {0};
        decode_fields(&sub, vt, 3);
        d->period_type[1] = (int64_t)vt[1];
        d->period_type[2] = (int64_t)vt[2];
        d->has_period_type = true;
        break;
      }
      case 13:
        rd_repeated(w, v, &sub, d->comments, &d->ncomments, MAXN, &d->comments_packed);
        break;
      default:
        if (w == 0 && f < 16) d->scalar[f] = (int64_t)v;
        break;
    }
  }
  CHECK(!r.bad);
  CHECK(r.p == r.end);
  return d;
}

/* The string at index i, or a marker that fails comparisons. */
static const char *S(const dprof *d, int64_t i) {
  if (i < 0 || (uint64_t)i >= d->nstrs) return "<out of range>";
  return d->strs[i];
}

/* Sinks. */

typedef struct test_sink {
  cprof_buf buf;
  size_t calls;
  size_t max_write;
  size_t fail_at_call; /* 1-based; 0 never fails */
  int fail_code;
} test_sink;

static int test_sink_write(void *ctx, const void *data, size_t len) {
  test_sink *t = ctx;
  t->calls++;
  if (t->fail_at_call && t->calls >= t->fail_at_call) return t->fail_code;
  if (len > t->max_write) t->max_write = len;
  return cprof__buf_append(&t->buf, data, len);
}

/* The profile most tests write. */
static void write_small(cprof__pprof *p) {
  cprof__pprof_sample_type(p, "samples", "count");
  cprof__pprof_sample_type(p, "cpu", "nanoseconds");
  cprof__pprof_period(p, "cpu", "nanoseconds", 10000000);
  cprof__pprof_time(p, 1700000000123456789, -5);
  cprof__pprof_comment(p, "first comment");
  cprof__pprof_comment(p, "main");
  cprof__pprof_default_sample_type(p, "cpu");
  cprof__pprof_drop_frames(p, "^drop");
  cprof__pprof_keep_frames(p, "^keep");
  cprof__pprof_doc_url(p, "https://example.com/doc");

  struct cprof__pprof_mapping m = {
      .id = 1, .memory_start = 0x400000, .memory_limit = 0x500000,
      .file_offset = 0x1000, .filename = "/bin/prog", .build_id = "abcdef",
      .has_functions = true, .has_filenames = false,
      .has_line_numbers = true, .has_inline_frames = true};
  cprof__pprof_add_mapping(p, &m);

  cprof__pprof_function(p, 1, "main", "main", "prog.c", 10);
  cprof__pprof_function(p, 2, "foo::bar()", "_ZN3foo3barEv", "prog.c", -3);

  cprof__pprof_line two[2] = {{2, 42, 7}, {1, -7, 0}};
  cprof__pprof_location(p, 1, 1, 0x401234, two, 2, false);
  cprof__pprof_line one = {1, 12, 0};
  cprof__pprof_location(p, 2, 0, 0, &one, 1, true);

  uint64_t ids[2] = {1, 2};
  int64_t vals[2] = {3, -30000000};
  cprof__pprof_label labels[4] = {
      {.key = "thread", .str = "worker"},
      {.key = "bytes", .num = 4096, .num_unit = "bytes"},
      {.key = "plain", .num = -42},
      {.key = "thread", .str = "main"},
  };
  cprof__pprof_sample(p, ids, 2, vals, 2, labels, 4);
  int64_t vals2[2] = {1, 10000000};
  cprof__pprof_sample(p, ids + 1, 1, vals2, 2, NULL, 0);
}

static void test_fields(void) {
  cprof_buf out = {0};
  cprof_sink sink = cprof_sink_buf(&out);
  cprof__pprof *p = cprof__pprof_new(&sink, false);
  CHECK(p != NULL);
  if (!p) return;

  CHECK_EQ_INT(cprof__pprof_string(p, NULL), 0);
  CHECK_EQ_INT(cprof__pprof_string(p, ""), 0);
  int64_t a = cprof__pprof_string(p, "interned");
  CHECK(a > 0);
  CHECK_EQ_INT(cprof__pprof_string(p, "interned"), a);
  char copy[] = "interned";
  CHECK_EQ_INT(cprof__pprof_string(p, copy), a);

  write_small(p);
  CHECK_EQ_INT(cprof__pprof_finish(p), 0);

  dprof *d = decode(out.data, out.len);

  /* The string table: "" first, then each string once. */
  CHECK(d->nstrs > 1);
  CHECK_STREQ(S(d, 0), "");
  for (size_t i = 0; i < d->nstrs; i++)
    for (size_t j = i + 1; j < d->nstrs; j++)
      CHECK(strcmp(d->strs[i], d->strs[j]) != 0);
  CHECK_STREQ(S(d, a), "interned");

  CHECK_EQ_INT(d->nst, 2);
  CHECK_STREQ(S(d, d->st[0][1]), "samples");
  CHECK_STREQ(S(d, d->st[0][2]), "count");
  CHECK_STREQ(S(d, d->st[1][1]), "cpu");
  CHECK_STREQ(S(d, d->st[1][2]), "nanoseconds");

  CHECK(d->has_period_type);
  CHECK_STREQ(S(d, d->period_type[1]), "cpu");
  CHECK_STREQ(S(d, d->period_type[2]), "nanoseconds");
  CHECK_EQ_INT(d->scalar[12], 10000000);
  CHECK_EQ_INT(d->scalar[9], 1700000000123456789);
  CHECK_EQ_INT(d->scalar[10], -5);
  CHECK_STREQ(S(d, d->scalar[7]), "^drop");
  CHECK_STREQ(S(d, d->scalar[8]), "^keep");
  CHECK_STREQ(S(d, d->scalar[14]), "cpu");
  CHECK_STREQ(S(d, d->scalar[15]), "https://example.com/doc");

  CHECK_EQ_INT(d->ncomments, 2);
  CHECK(d->comments_packed);
  CHECK_STREQ(S(d, (int64_t)d->comments[0]), "first comment");
  CHECK_STREQ(S(d, (int64_t)d->comments[1]), "main");

  CHECK_EQ_INT(d->nmappings, 1);
  uint64_t *m = d->mappings[0];
  CHECK_EQ_INT(m[1], 1);
  CHECK_EQ_INT(m[2], 0x400000);
  CHECK_EQ_INT(m[3], 0x500000);
  CHECK_EQ_INT(m[4], 0x1000);
  CHECK_STREQ(S(d, (int64_t)m[5]), "/bin/prog");
  CHECK_STREQ(S(d, (int64_t)m[6]), "abcdef");
  CHECK_EQ_INT(m[7], 1);
  CHECK_EQ_INT(m[8], 0);
  CHECK_EQ_INT(m[9], 1);
  CHECK_EQ_INT(m[10], 1);

  CHECK_EQ_INT(d->nfunctions, 2);
  CHECK_EQ_INT(d->functions[0][1], 1);
  CHECK_STREQ(S(d, (int64_t)d->functions[0][2]), "main");
  CHECK_EQ_INT(d->functions[0][2], d->functions[0][3]);
  CHECK_EQ_INT(d->functions[0][2], d->comments[1]);
  CHECK_STREQ(S(d, (int64_t)d->functions[0][4]), "prog.c");
  CHECK_EQ_INT(d->functions[0][5], 10);
  CHECK_STREQ(S(d, (int64_t)d->functions[1][2]), "foo::bar()");
  CHECK_STREQ(S(d, (int64_t)d->functions[1][3]), "_ZN3foo3barEv");
  CHECK_EQ_INT(d->functions[1][4], d->functions[0][4]);
  CHECK_EQ_INT((int64_t)d->functions[1][5], -3);

  CHECK_EQ_INT(d->nlocations, 2);
  dlocation *l = &d->locations[0];
  CHECK_EQ_INT(l->f[1], 1);
  CHECK_EQ_INT(l->f[2], 1);
  CHECK_EQ_INT(l->f[3], 0x401234);
  CHECK_EQ_INT(l->f[5], 0);
  CHECK_EQ_INT(l->nlines, 2);
  CHECK_EQ_INT(l->lines[0][1], 2);
  CHECK_EQ_INT(l->lines[0][2], 42);
  CHECK_EQ_INT(l->lines[0][3], 7);
  CHECK_EQ_INT(l->lines[1][1], 1);
  CHECK_EQ_INT((int64_t)l->lines[1][2], -7);
  CHECK_EQ_INT(l->lines[1][3], 0);
  l = &d->locations[1];
  CHECK_EQ_INT(l->f[1], 2);
  CHECK_EQ_INT(l->f[2], 0);
  CHECK_EQ_INT(l->f[3], 0);
  CHECK_EQ_INT(l->f[5], 1);
  CHECK_EQ_INT(l->nlines, 1);

  CHECK_EQ_INT(d->nsamples, 2);
  dsample *s = &d->samples[0];
  CHECK(s->ids_packed);
  CHECK(s->vals_packed);
  CHECK_EQ_INT(s->nids, 2);
  CHECK_EQ_INT(s->ids[0], 1);
  CHECK_EQ_INT(s->ids[1], 2);
  CHECK_EQ_INT(s->nvals, 2);
  CHECK_EQ_INT(s->vals[0], 3);
  CHECK_EQ_INT((int64_t)s->vals[1], -30000000);
  CHECK_EQ_INT(s->nlabels, 4);
  CHECK_STREQ(S(d, s->labels[0].key), "thread");
  CHECK_STREQ(S(d, s->labels[0].str), "worker");
  CHECK_EQ_INT(s->labels[0].num, 0);
  CHECK_EQ_INT(s->labels[0].unit, 0);
  CHECK_STREQ(S(d, s->labels[1].key), "bytes");
  CHECK_EQ_INT(s->labels[1].str, 0);
  CHECK_EQ_INT(s->labels[1].num, 4096);
  CHECK_EQ_INT(s->labels[1].unit, s->labels[1].key);
  CHECK_STREQ(S(d, s->labels[2].key), "plain");
  CHECK_EQ_INT(s->labels[2].str, 0);
  CHECK_EQ_INT(s->labels[2].num, -42);
  CHECK_EQ_INT(s->labels[2].unit, 0);
  CHECK_EQ_INT(s->labels[3].key, s->labels[0].key);
  CHECK_STREQ(S(d, s->labels[3].str), "main");
  s = &d->samples[1];
  CHECK_EQ_INT(s->nids, 1);
  CHECK_EQ_INT(s->ids[0], 2);
  CHECK_EQ_INT(s->vals[1], 10000000);
  CHECK_EQ_INT(s->nlabels, 0);

  dprof_free(d);
  cprof_buf_free(&out);
}

/* The exact bytes of tiny profiles: zero fields vanish, and a negative
 * int64 is a ten-byte varint, not zigzag. */
static void test_exact_bytes(void) {
  cprof_buf out = {0};
  cprof_sink sink = cprof_sink_buf(&out);
  CHECK_EQ_INT(cprof__pprof_finish(cprof__pprof_new(&sink, false)), 0);
  static const unsigned char empty[] = {0x32, 0x00};
  CHECK_EQ_INT(out.len, sizeof empty);
  CHECK(out.len == sizeof empty && memcmp(out.data, empty, out.len) == 0);

  out.len = 0;
  cprof__pprof *p = cprof__pprof_new(&sink, false);
  cprof__pprof_time(p, -1, 0);
  int64_t v = -2;
  cprof__pprof_sample(p, NULL, 0, &v, 1, NULL, 0);
  CHECK_EQ_INT(cprof__pprof_finish(p), 0);
  static const unsigned char neg[] = {
      0x12, 0x0c, 0x12, 0x0a, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0x01,                                     /* sample */
      0x32, 0x00,                                           /* "" */
      0x48, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* time */
      0xff, 0x01};
  CHECK_EQ_INT(out.len, sizeof neg);
  CHECK(out.len == sizeof neg && memcmp(out.data, neg, out.len) == 0);
  cprof_buf_free(&out);
}

static void test_gzip_roundtrip(void) {
  cprof_buf raw = {0}, gz = {0};
  cprof_sink raw_sink = cprof_sink_buf(&raw), gz_sink = cprof_sink_buf(&gz);
  cprof__pprof *p = cprof__pprof_new(&raw_sink, false);
  write_small(p);
  CHECK_EQ_INT(cprof__pprof_finish(p), 0);
  p = cprof__pprof_new(&gz_sink, true);
  write_small(p);
  CHECK_EQ_INT(cprof__pprof_finish(p), 0);

  CHECK(gz.len > 2 && gz.data[0] == 0x1f && gz.data[1] == 0x8b);
  size_t n = 0;
  unsigned char *plain = gunzip(gz.data, gz.len, &n);
  CHECK(plain != NULL);
  CHECK_EQ_INT(n, raw.len);
  CHECK(n == raw.len && memcmp(plain, raw.data, n) == 0);
  free(plain);
  cprof_buf_free(&raw);
  cprof_buf_free(&gz);
}

static int gz_collect(void *ctx, const void *data, size_t n) {
  return cprof__buf_append(ctx, data, n) ? CPROF_ENOMEM : 0;
}

/* n bytes, written in pieces of up to 100, through a gzip stream: the
 * memLevel it took, after it gunzips to them. */
static int gz_stream(size_t n) {
  unsigned char *in = malloc(n + 1);
  if (!in) abort();
  uint32_t x = 7;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    in[i] = (unsigned char)("abcdefgh"[(x >> 16) % 8]);
  }
  cprof_buf gz = {0};
  cprof__gzout g;
  CHECK_EQ_INT(cprof__gzout_init(&g, 5, gz_collect, &gz), 0);
  for (size_t at = 0; at < n; at += 100)
    CHECK_EQ_INT(cprof__gzout_write(&g, in + at, n - at < 100 ? n - at : 100),
                 0);
  CHECK_EQ_INT(cprof__gzout_finish(&g), 0);
  int level = g.mem_level;
  cprof__gzout_free(&g);
  size_t got = 0;
  unsigned char *plain = gunzip(gz.data, gz.len, &got);
  CHECK(plain != NULL && got == n && memcmp(plain, in, n) == 0);
  free(plain);
  free(in);
  cprof_buf_free(&gz);
  return level;
}

/* A stream that fits the gathered input takes the memLevel asked for,
 * a longer one zlib's 8 (gzout.h). */
static void test_gzout_levels(void) {
  CHECK_EQ_INT(gz_stream(0), 5);
  CHECK_EQ_INT(gz_stream(1000), 5);
  CHECK_EQ_INT(gz_stream(CPROF__GZOUT_CAP), 5);
  CHECK_EQ_INT(gz_stream(CPROF__GZOUT_CAP + 1), 8);
  CHECK_EQ_INT(gz_stream(300000), 8);
}

/* Many samples with distinct values, so even compressed the output
 * outgrows one output buffer and reaches the sink before finish(). */
static void write_large(cprof__pprof *p, size_t nsamples) {
  cprof__pprof_sample_type(p, "samples", "count");
  cprof__pprof_sample_type(p, "cpu", "nanoseconds");
  cprof__pprof_function(p, 1, "f", "f", "f.c", 1);
  for (uint64_t id = 1; id <= 64; id++) {
    cprof__pprof_line line = {1, (int64_t)id, 0};
    cprof__pprof_location(p, id, 0, 0x1000 + id, &line, 1, false);
  }
  uint32_t x = 12345;
  for (size_t i = 0; i < nsamples; i++) {
    uint64_t ids[8];
    for (size_t j = 0; j < 8; j++) {
      x = x * 1103515245u + 12345u;
      ids[j] = 1 + (x >> 16) % 64;
    }
    int64_t vals[2] = {(int64_t)(i % 7), (int64_t)x};
    cprof__pprof_label label = {.key = "n", .num = (int64_t)i};
    cprof__pprof_sample(p, ids, 8, vals, 2, &label, 1);
  }
}

static void test_large(void) {
  const size_t nsamples = 100000;
  int64_t want_sum = 0;
  for (size_t i = 0; i < nsamples; i++) want_sum += (int64_t)(i % 7);

  for (int gzip = 0; gzip <= 1; gzip++) {
    test_sink t = {0};
    cprof_sink sink = {test_sink_write, &t};
    cprof__pprof *p = cprof__pprof_new(&sink, gzip);
    write_large(p, nsamples);
    size_t before_finish = t.buf.len;
    CHECK(t.calls > 1);
    CHECK(before_finish > 0);
    CHECK(t.max_write <= 32 * 1024);
    CHECK_EQ_INT(cprof__pprof_finish(p), 0);
    CHECK(t.buf.len > before_finish);

    size_t n = t.buf.len;
    unsigned char *plain = t.buf.data;
    if (gzip) plain = gunzip(t.buf.data, t.buf.len, &n);
    CHECK(plain != NULL);
    dprof *d = decode(plain, n);
    CHECK_EQ_INT(d->nsamples, nsamples);
    CHECK_EQ_INT(d->value_sum, want_sum);
    CHECK_EQ_INT(d->nlocations, 64);
    CHECK_EQ_INT(d->nstrs, 8);
    dprof_free(d);
    if (gzip) free(plain);
    cprof_buf_free(&t.buf);
  }
}

/* Enough strings to grow the index several times and fill arena blocks,
 * plus one long enough for a block of its own. */
static void test_many_strings(void) {
  enum { N = 20000 };
  cprof_buf out = {0};
  cprof_sink sink = cprof_sink_buf(&out);
  cprof__pprof *p = cprof__pprof_new(&sink, false);
  static int64_t idx[N];
  char s[32];
  for (int i = 0; i < N; i++) {
    snprintf(s, sizeof s, "string-%d", i);
    idx[i] = cprof__pprof_string(p, s);
    CHECK_EQ_INT(idx[i], i + 1);
  }
  size_t long_len = 100000;
  char *big = malloc(long_len + 1);
  memset(big, 'x', long_len);
  big[long_len] = '\0';
  int64_t big_idx = cprof__pprof_string(p, big);
  CHECK_EQ_INT(big_idx, N + 1);
  CHECK_EQ_INT(cprof__pprof_string(p, "after-big"), N + 2);
  for (int i = 0; i < N; i += 997) {
    snprintf(s, sizeof s, "string-%d", i);
    CHECK_EQ_INT(cprof__pprof_string(p, s), idx[i]);
  }
  CHECK_EQ_INT(cprof__pprof_string(p, big), big_idx);
  CHECK_EQ_INT(cprof__pprof_finish(p), 0);

  dprof *d = decode(out.data, out.len);
  CHECK_EQ_INT(d->nstrs, N + 3);
  CHECK_STREQ(S(d, 0), "");
  CHECK_STREQ(S(d, 1), "string-0");
  CHECK_STREQ(S(d, N), "string-19999");
  CHECK_STREQ(S(d, N + 1), big);
  CHECK_STREQ(S(d, N + 2), "after-big");
  dprof_free(d);
  free(big);
  cprof_buf_free(&out);
}

static void test_sink_error(void) {
  /* A sink that always fails: the error comes back from finish(). */
  for (int gzip = 0; gzip <= 1; gzip++) {
    test_sink t = {.fail_at_call = 1, .fail_code = CPROF_EIO};
    cprof_sink sink = {test_sink_write, &t};
    cprof__pprof *p = cprof__pprof_new(&sink, gzip);
    write_small(p);
    CHECK_EQ_INT(cprof__pprof_finish(p), CPROF_EIO);
    CHECK_EQ_INT(t.calls, 1);
  }

  /* A sink that fails mid-stream: its own code is latched, the encoder
   * stops writing and later calls are harmless. */
  test_sink t = {.fail_at_call = 2, .fail_code = CPROF_ENOMEM};
  cprof_sink sink = {test_sink_write, &t};
  cprof__pprof *p = cprof__pprof_new(&sink, true);
  write_large(p, 20000);
  CHECK_EQ_INT(t.calls, 2);
  write_small(p);
  CHECK_EQ_INT(cprof__pprof_string(p, "late"), 0);
  CHECK_EQ_INT(cprof__pprof_finish(p), CPROF_ENOMEM);
  CHECK_EQ_INT(t.calls, 2);
  cprof_buf_free(&t.buf);

  /* A NULL encoder (cprof__pprof_new() out of memory) is tolerated. */
  cprof__pprof_sample_type(NULL, "a", "b");
  CHECK_EQ_INT(cprof__pprof_string(NULL, "a"), 0);
  CHECK_EQ_INT(cprof__pprof_finish(NULL), CPROF_ENOMEM);
}

/* cprof__tabwrite against what Go's text/tabwriter (1, 8, 1, '\t', 0)
 * wrote for the same input (test/progs/gopprof -tabwrite): column runs
 * broken by lines without the column, widths in characters (the 8 é of 16
 * bytes), a last line without its newline. More than 16 cells on a line:
 * the ones past 16 stay as they are. */
static void test_tabwrite(void) {
  static const char in[] =
      "a\tbb\tccc\nxxxxxxxxxx\ty\tz\nno tabs\n#\t0x1\n#\t0x12345\tfoo+0x1\tf.c:1\n"
      "#\t0x1\tlong_function_name_here+0x123\tg.c:2\n"
      "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\tx\na\ty\n1234567\tx";
  static const char go[] =
      "a\t\tbb\tccc\nxxxxxxxxxx\ty\tz\nno tabs\n#\t\t0x1\n#\t\t0x12345\tfoo+0x1"
      "\t\t\t\tf.c:1\n#\t\t0x1\tlong_function_name_here+0x123\tg.c:2\n"
      "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\tx\na\t\ty\n1234567\t\tx";
  cprof_buf out = {0};
  CHECK_EQ_INT(cprof__tabwrite(&out, in, sizeof in - 1), 0);
  CHECK(out.len == sizeof go - 1 && memcmp(out.data, go, out.len) == 0);
  cprof_buf_free(&out);
  char many[64];
  size_t n = 0;
  for (int i = 0; i < 20; i++) {
    many[n++] = 'c';
    many[n++] = '\t';
  }
  many[n++] = '\n';
  CHECK_EQ_INT(cprof__tabwrite(&out, many, n), 0);
  /* Each of the first 16 one-letter cells padded to a tab stop (one tab),
   * the rest as written: the same bytes. */
  CHECK(out.len == n && memcmp(out.data, many, n) == 0);
  cprof_buf_free(&out);
  CHECK_EQ_INT(cprof__tabwrite(&out, "", 0), 0);
  CHECK(out.len == 0);
  cprof_buf_free(&out);
}

int main(void) {
  RUN(test_gzout_levels);
  RUN(test_tabwrite);
  RUN(test_fields);
  RUN(test_exact_bytes);
  RUN(test_gzip_roundtrip);
  RUN(test_large);
  RUN(test_many_strings);
  RUN(test_sink_error);
  return TEST_RESULT();
}
