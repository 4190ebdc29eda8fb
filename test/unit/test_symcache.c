/*
 * The symbol cache's entry writer (encode/symcache.c): adding results to
 * an entry that has room copies its records and appends (the path every
 * exit dump takes); a full entry is written again whole. Both must hold
 * exactly what writing every result at once holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "encode/symcache.h"
#include "testutil.h"

#define STAMP "\x01\x0f\x00cprof symbols 1"
#define STAMP_LEN (sizeof STAMP - 1)

/* A result for offset off, made from off alone: depth 1-3, names and
 * files shared between offsets (so that strings are reused), lines from
 * off. salt changes every name, to tell a replaced result. */
typedef struct made {
  cprof__sym_result r;
  cprof__sym_frame f[3];
  char names[3][40], files[3][40];
} made;

static void make(made *m, uint64_t off, int salt) {
  memset(m, 0, sizeof *m);
  int depth = (int)(off % 3) + 1;
  for (int i = 0; i < depth; i++) {
    snprintf(m->names[i], sizeof m->names[i], "fn_%d_%d",
             (int)((off / 7 + (uint64_t)i) % 50), salt);
    snprintf(m->files[i], sizeof m->files[i], "/src/file%d.c",
             (int)((off + (uint64_t)i) % 9));
    m->f[i] = (cprof__sym_frame){.name = m->names[i],
                                 .system_name = m->names[i],
                                 .file = i == 2 ? "" : m->files[i],
                                 .line = (int)(off % 1000) + i,
                                 .start = i == 1 ? 0 : 0x400000 + off - i};
  }
  m->r = (cprof__sym_result){.nframes = depth,
                             .has_line = off % 2,
                             .has_inline = depth > 1,
                             .has_function = off % 5 != 0,
                             .decl_line = (int)(off % 77),
                             .frames = m->f};
  /* Facts of the code there, each unread, no or yes, in every pairing;
   * a call's displacement (negative for some) comes from off and salt. */
  m->r.call = (uint8_t)(off % 3);
  m->r.stub = (uint8_t)(off / 3 % 3);
  if (m->r.call == CPROF__CODE_YES)
    m->r.call_disp = (int32_t)(off * 2654435761u) + salt;
}

/* Writes offs[0..n) (results of salt) to out: an entry onto old (NULL: a
 * new entry), or, as_part, a part to append. */
static int write_made(const cprof__symcache_view *old, const uint64_t *offs,
                      size_t n, int salt, bool as_part, cprof_buf *out) {
  made *m = calloc(n ? n : 1, sizeof *m);
  cprof__symcache_add *a = calloc(n ? n : 1, sizeof *a);
  if (!m || !a) abort();
  for (size_t i = 0; i < n; i++) {
    make(&m[i], offs[i], salt);
    a[i] = (cprof__symcache_add){offs[i], 0x400000 + offs[i], &m[i].r};
  }
  int err = as_part ? cprof__symcache_append(a, n, out)
                    : cprof__symcache_write(old, a, n, STAMP, STAMP_LEN, out);
  free(a);
  free(m);
  return err;
}

/* Writes offs[0..n) (results of salt) onto old (NULL: a new entry). */
static bool write_offs(const cprof__symcache_view *old, const uint64_t *offs,
                       size_t n, int salt, cprof_buf *out,
                       cprof__symcache_view *v) {
  return write_made(old, offs, n, salt, false, out) == 0 &&
         cprof__symcache_parse(out->data, out->len, v);
}

/* Whether v holds off with the result of salt. */
static bool holds(const cprof__symcache_view *v, uint64_t off, int salt) {
  cprof__sym_result r = {0};
  cprof__sym_frame f[CPROF__SYM_MAX_FRAMES];
  made m;
  make(&m, off, salt);
  if (!cprof__symcache_find(v, off, 0x400000 + off, &r, f)) return false;
  if (r.nframes != m.r.nframes || r.has_line != m.r.has_line ||
      r.has_inline != m.r.has_inline ||
      r.has_function != m.r.has_function || r.decl_line != m.r.decl_line ||
      r.call != m.r.call || r.stub != m.r.stub ||
      r.call_disp != m.r.call_disp)
    return false;
  for (int i = 0; i < r.nframes; i++)
    if (strcmp(f[i].name, m.f[i].name) || strcmp(f[i].file, m.f[i].file) ||
        strcmp(f[i].system_name, m.f[i].system_name) ||
        f[i].line != m.f[i].line || f[i].start != m.f[i].start)
      return false;
  return true;
}

/* Entries are added to, in several rounds, as exit dumps do: every
 * address of every round is found, the entry grows by appending (its
 * first bytes, the old records, are unchanged), shared strings are not
 * copied again, and an added result replaces an old one. */
static void test_append_rounds(void) {
  cprof_buf cur = {0}, next = {0};
  cprof__symcache_view v;
  uint64_t first[300];
  for (size_t i = 0; i < 300; i++) first[i] = 16 * i + 16;
  CHECK(write_offs(NULL, first, 300, 0, &cur, &v));
  uint32_t strings_before = v.part[0].strings_len;
  cprof__symcache_view before = v; /* in cur, kept */
  /* Round two: offsets between and after the old ones, unsorted, one
   * given twice. */
  uint64_t second[200];
  for (size_t i = 0; i < 200; i++) second[i] = 16 * (199 - i) + 24;
  second[7] = second[8];
  CHECK(write_offs(&v, second, 200, 0, &next, &v));
  CHECK_EQ_INT((int)v.nentries, 300 + 199);
  /* Names and files repeat: nothing new for the strings. */
  CHECK_EQ_INT((int)v.part[0].strings_len, (int)strings_before);
  /* Appended: the old frames and strings are the new ones' first part
   * (a whole rewrite would put the added results' first). */
  const cprof__symcache_part *now = &v.part[0], *was = &before.part[0];
  CHECK(now->nframes > was->nframes &&
        memcmp(now->frames, was->frames, (size_t)was->nframes * 24) == 0);
  CHECK(memcmp(now->strings, was->strings, was->strings_len) == 0);
  for (size_t i = 0; i < 300; i++) CHECK(holds(&v, first[i], 0));
  for (size_t i = 0; i < 200; i++) CHECK(holds(&v, second[i], 0));
  CHECK(!holds(&v, 8, 0)); /* never added */
  /* Round three: an added result replaces the old one for its offset. */
  cprof_buf third = {0};
  uint64_t again[2] = {first[10], 100000};
  CHECK(write_offs(&v, again, 2, 1, &third, &v));
  CHECK_EQ_INT((int)v.nentries, 300 + 199 + 1);
  CHECK(holds(&v, first[10], 1));
  CHECK(!holds(&v, first[10], 0));
  CHECK(holds(&v, 100000, 1));
  CHECK(holds(&v, first[11], 0));
  /* What was written equals the full rewrite's content: the same
   * addresses, each with the same result. */
  cprof_buf whole = {0};
  cprof__symcache_view w;
  CHECK(cprof__symcache_write(&v, NULL, 0, STAMP, STAMP_LEN, &whole) == 0);
  CHECK(cprof__symcache_parse(whole.data, whole.len, &w));
  CHECK_EQ_INT((int)w.nentries, (int)v.nentries);
  CHECK(holds(&w, first[10], 1) && holds(&w, second[3], 0));
  cprof_buf_free(&cur);
  cprof_buf_free(&next);
  cprof_buf_free(&third);
  cprof_buf_free(&whole);
}

/* An entry that would pass CPROF__SYMCACHE_MAX is written again whole,
 * keeping the added results first. */
static void test_full_entry(void) {
  size_t n = CPROF__SYMCACHE_MAX;
  uint64_t *offs = malloc(n * sizeof *offs);
  if (!offs) abort();
  for (size_t i = 0; i < n; i++) offs[i] = 4 * i + 4;
  cprof_buf a = {0}, b = {0};
  cprof__symcache_view v;
  CHECK(write_offs(NULL, offs, n, 0, &a, &v));
  CHECK_EQ_INT((int)v.nentries, (int)n);
  uint64_t more[3] = {2, 4 * n + 8, 4 * n + 12};
  CHECK(write_offs(&v, more, 3, 2, &b, &v));
  CHECK_EQ_INT((int)v.nentries, (int)n);
  for (size_t i = 0; i < 3; i++) CHECK(holds(&v, more[i], 2));
  cprof_buf_free(&a);
  cprof_buf_free(&b);
  free(offs);
}

/* What an entry says of the code is checked like the rest: a fact
 * without its read flag, or a displacement without a call, is no entry of
 * this format. */
static void test_code_checked(void) {
  cprof_buf a = {0};
  cprof__symcache_view v;
  uint64_t off[1] = {8}; /* 8 % 3: a call; 8 / 3 % 3: a stub */
  CHECK(write_offs(NULL, off, 1, 0, &a, &v));
  CHECK(holds(&v, 8, 0));
  unsigned char *e = (unsigned char *)v.part[0].entries;
  unsigned char flags = e[14];
  CHECK_EQ_INT(flags & 120, 120);
  e[14] = (unsigned char)(flags & ~8); /* a call never read */
  CHECK(!cprof__symcache_parse(a.data, a.len, &v));
  e[14] = (unsigned char)(flags & ~32); /* a stub never read */
  CHECK(!cprof__symcache_parse(a.data, a.len, &v));
  e[14] = (unsigned char)(flags & ~16); /* read, no call, a displacement */
  CHECK(!cprof__symcache_parse(a.data, a.len, &v));
  memset(e + 20, 0, 4);
  e[14] = (unsigned char)(flags & ~(16 | 64));
  CHECK(cprof__symcache_parse(a.data, a.len, &v));
  cprof__sym_result r = {0};
  cprof__sym_frame f[CPROF__SYM_MAX_FRAMES];
  CHECK(cprof__symcache_find(&v, 8, 0x400008, &r, f));
  CHECK_EQ_INT(r.call, CPROF__CODE_NO);
  CHECK_EQ_INT(r.stub, CPROF__CODE_NO);
  cprof_buf_free(&a);
}

/* A part of offs[0..n) (results of salt), to append. */
static void append_offs(const uint64_t *offs, size_t n, int salt,
                        cprof_buf *out) {
  CHECK(write_made(NULL, offs, n, salt, true, out) == 0);
}

/* file (an entry) with data[0..len) appended. */
static void put(cprof_buf *file, const void *data, size_t len) {
  CHECK(cprof__buf_append(file, data, len) == 0);
}

/* Parts appended to an entry, as exit dumps append them: each part's
 * results are found; an offset held by two parts (which carry one result
 * for it in practice; here each part's is told apart) is found in the
 * part written whole first, else in the newest appended part; a part cut
 * short or changed, and parts past the limit, are not used and mark the
 * entry damaged; all parts written into one keep the results lookups
 * find. */
static void test_parts(void) {
  cprof_buf file = {0}, part = {0}, other = {0};
  cprof__symcache_view v, w;
  uint64_t first[300], second[100], third[2];
  for (size_t i = 0; i < 300; i++) first[i] = 16 * i + 16;
  for (size_t i = 0; i < 100; i++) second[i] = 32 * i + 8; /* some new */
  second[50] = first[40];                                  /* one old */
  third[0] = first[41];
  third[1] = second[0];
  CHECK(write_offs(NULL, first, 300, 0, &file, &v));
  /* The head of an entry says whether a part of this stamp may go on. */
  size_t head = cprof__symcache_head_len(STAMP_LEN);
  CHECK(cprof__symcache_appendable(file.data, head, STAMP, STAMP_LEN));
  CHECK(!cprof__symcache_appendable(file.data, head - 1, STAMP, STAMP_LEN));
  CHECK(!cprof__symcache_appendable(file.data, head, "\x01\x0f\x00cprof "
                                    "symbols 2", STAMP_LEN));
  append_offs(second, 100, 1, &part);
  append_offs(third, 2, 2, &other);
  size_t base_len = file.len;
  put(&file, part.data, part.len);
  put(&file, other.data, other.len);
  CHECK(cprof__symcache_parse(file.data, file.len, &v));
  CHECK_EQ_INT((int)v.nparts, 3);
  CHECK(!v.damaged);
  CHECK_EQ_INT((int)v.nentries, 300 + 100 + 2);
  for (size_t i = 0; i < 300; i++)
    if (i != 40 && i != 41) CHECK(holds(&v, first[i], 0));
  CHECK(holds(&v, first[40], 0) && holds(&v, first[41], 0));
  CHECK(holds(&v, second[0], 2) && holds(&v, second[99], 1));
  /* A view grows by a part as a process appends one. */
  cprof__symcache_view grown;
  CHECK(cprof__symcache_parse(file.data, base_len, &grown));
  CHECK(cprof__symcache_add_part(&grown, part.data, part.len));
  CHECK(!cprof__symcache_add_part(&grown, part.data, part.len - 1));
  CHECK(grown.nparts == 2 && holds(&grown, second[99], 1));
  /* Written into one part: every offset once, with the result a lookup
   * found. */
  cprof_buf one = {0};
  CHECK(cprof__symcache_write(&v, NULL, 0, STAMP, STAMP_LEN, &one) == 0);
  CHECK(cprof__symcache_parse(one.data, one.len, &w));
  CHECK_EQ_INT((int)w.nparts, 1);
  CHECK_EQ_INT((int)w.nentries, 300 + 99);
  CHECK(holds(&w, first[40], 0) && holds(&w, first[41], 0) &&
        holds(&w, second[0], 2) && holds(&w, first[0], 0) &&
        holds(&w, second[99], 1));
  /* The last part cut short: the others stand, the entry is damaged. */
  CHECK(cprof__symcache_parse(file.data, file.len - 1, &v));
  CHECK(v.nparts == 2 && v.damaged && holds(&v, second[0], 1) &&
        !holds(&v, third[1] + 0, 2));
  /* A byte of the first part changed: its hash fails, and what follows
   * it is not read either. */
  file.data[base_len + part.len - 2] ^= 1;
  CHECK(cprof__symcache_parse(file.data, file.len, &v));
  CHECK(v.nparts == 1 && v.damaged && holds(&v, first[40], 0) &&
        !holds(&v, second[99], 1));
  file.data[base_len + part.len - 2] ^= 1;
  /* At most CPROF__SYMCACHE_PARTS parts are read. */
  file.len = base_len;
  for (int i = 0; i < CPROF__SYMCACHE_PARTS; i++)
    put(&file, other.data, other.len);
  CHECK(cprof__symcache_parse(file.data, file.len, &v));
  CHECK(v.nparts == CPROF__SYMCACHE_PARTS && v.damaged);
  file.len -= other.len;
  CHECK(cprof__symcache_parse(file.data, file.len, &v));
  CHECK(v.nparts == CPROF__SYMCACHE_PARTS && !v.damaged);
  CHECK(!cprof__symcache_add_part(&v, other.data, other.len));
  cprof_buf_free(&file);
  cprof_buf_free(&part);
  cprof_buf_free(&other);
  cprof_buf_free(&one);
}

/* Ranges: a result whose names hold over a range keeps it (around its
 * address; never for a result with lines); an offset with no entry of its
 * own is named by the entry whose range holds it, in another process's
 * mapping too, its start moved with the address and no fact of the code
 * given; the bounds are exact; ranges the format does not allow are
 * refused when parsed. */
static void test_ranges(void) {
  cprof__sym_frame fa = {.name = "fn", .system_name = "_Z2fnv",
                         .file = "/src/a.c", .start = 0x401000};
  cprof__sym_frame fb = {.name = "gn", .system_name = "gn",
                         .file = "/src/b.c", .line = 5, .start = 0x402000};
  cprof__sym_result ra = {.nframes = 1, .has_function = true,
                          .call = CPROF__CODE_YES, .call_disp = 77,
                          .frames = &fa, .range_lo = 0x401000,
                          .range_hi = 0x401040};
  cprof__sym_result rb = {.nframes = 1, .has_function = true,
                          .has_line = true, .frames = &fb,
                          .range_lo = 0x402000, .range_hi = 0x402040};
  cprof__symcache_add add[2] = {{0x1010, 0x401010, &ra},
                                {0x2000, 0x402000, &rb}};
  cprof_buf out = {0};
  CHECK(cprof__symcache_write(NULL, add, 2, STAMP, STAMP_LEN, &out) == 0);
  cprof__symcache_view v;
  CHECK(cprof__symcache_parse(out.data, out.len, &v));
  cprof__sym_result r = {0};
  cprof__sym_frame f[CPROF__SYM_MAX_FRAMES];
  const uint64_t base = 0x7f0000000000; /* the mapping, elsewhere */
  CHECK(cprof__symcache_find(&v, 0x1010, base + 0x1010, &r, f));
  CHECK_EQ_INT(r.call, CPROF__CODE_YES);
  CHECK(r.range_lo == base + 0x1000 && r.range_hi == base + 0x1040);
  CHECK(!cprof__symcache_find(&v, 0x1030, base + 0x1030, &r, f));
  memset(&r, 0, sizeof r);
  CHECK(cprof__symcache_find_range(&v, 0x1030, base + 0x1030, &r, f));
  CHECK_EQ_INT(r.nframes, 1);
  CHECK_STREQ(f[0].name, "fn");
  CHECK_STREQ(f[0].system_name, "_Z2fnv");
  CHECK_STREQ(f[0].file, "/src/a.c");
  CHECK(f[0].start == base + 0x1000);
  CHECK_EQ_INT(r.call, CPROF__CODE_UNREAD);
  CHECK_EQ_INT(r.call_disp, 0);
  CHECK(r.range_lo == base + 0x1000 && r.range_hi == base + 0x1040);
  CHECK(cprof__symcache_find_range(&v, 0x1000, base + 0x1000, &r, f));
  CHECK(cprof__symcache_find_range(&v, 0x103f, base + 0x103f, &r, f));
  CHECK(!cprof__symcache_find_range(&v, 0xfff, base + 0xfff, &r, f));
  CHECK(!cprof__symcache_find_range(&v, 0x1040, base + 0x1040, &r, f));
  /* An offset with an entry of its own is never named by a range. */
  CHECK(!cprof__symcache_find_range(&v, 0x1010, base + 0x1010, &r, f));
  /* A result with lines keeps no range. */
  CHECK(!cprof__symcache_find_range(&v, 0x2001, base + 0x2001, &r, f));

  /* The first entry (0x1010): flags at 14, before at 24, after at 28. */
  unsigned char *e = (unsigned char *)v.part[0].entries;
  unsigned char saved[32];
  memcpy(saved, e, sizeof saved);
  CHECK_EQ_INT(e[14] & 128, 128);
  memset(e + 28, 0, 4); /* a range of no address */
  CHECK(!cprof__symcache_parse(out.data, out.len, &v));
  memcpy(e, saved, sizeof saved);
  uint32_t before = 0x1011; /* below offset 0 */
  memcpy(e + 24, &before, 4);
  CHECK(!cprof__symcache_parse(out.data, out.len, &v));
  memcpy(e, saved, sizeof saved);
  e[14] |= 1; /* a range with lines */
  CHECK(!cprof__symcache_parse(out.data, out.len, &v));
  memcpy(e, saved, sizeof saved);
  e[14] &= (unsigned char)~128; /* bounds without the flag */
  CHECK(!cprof__symcache_parse(out.data, out.len, &v));
  memcpy(e, saved, sizeof saved);
  CHECK(cprof__symcache_parse(out.data, out.len, &v));
  cprof_buf_free(&out);
}

int main(void) {
  RUN(test_ranges);
  RUN(test_append_rounds);
  RUN(test_parts);
  RUN(test_code_checked);
  RUN(test_full_entry);
  return TEST_RESULT();
}
