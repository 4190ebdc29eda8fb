/*
 * The compile-unit table (encode/cutab.c): its lookup is libdwfl's
 * (addrarange in libdwfl/cu.c: a run holds the addresses up to the next
 * run's start, gaps included, and the last run those up to and at the end
 * of its last range), checked at the edges and against a plain search over
 * random tables; a table written and parsed keeps its stamp and runs; a
 * table cut short, with a byte changed, or with runs out of order is
 * refused, and so are runs out of order handed to the writer.
 */
#include "encode/cutab.h"
#include "base/hmap.h"
#include "base/mem.h"
#include "testutil.h"

static const char STAMP[] = "a stamp of some length";

static bool made(const cprof__cutab_run *runs, size_t n, uint64_t end,
                 cprof_buf *b, cprof__cutab *t) {
  b->len = 0;
  return cprof__cutab_write(runs, n, end, STAMP, sizeof STAMP, b) == 0 &&
         cprof__cutab_parse(b->data, b->len, t);
}

static int64_t found(const cprof__cutab *t, uint64_t addr) {
  uint64_t off;
  return cprof__cutab_find(t, addr, &off) ? (int64_t)off : -1;
}

/* The rule said plainly: the run with the greatest start at or below
 * addr, but past the end of the last range for the last run. */
static int64_t reference(const cprof__cutab_run *runs, size_t n,
                         uint64_t end, uint64_t addr) {
  size_t i = n;
  for (size_t k = 0; k < n; k++)
    if (runs[k].start <= addr) i = k;
  if (i == n) return -1;
  if (i == n - 1 && addr > runs[i].start && addr > end) return -1;
  return (int64_t)runs[i].cu_off;
}

static void test_edges(void) {
  const cprof__cutab_run runs[] = {
      {0x1000, 11}, {0x2000, 22}, {0x3000, 33}};
  cprof_buf b = {0};
  cprof__cutab t;
  CHECK(made(runs, 3, 0x3500, &b, &t));
  CHECK_EQ_INT(t.nruns, 3);
  CHECK(t.stamp_len == sizeof STAMP &&
        memcmp(t.stamp, STAMP, sizeof STAMP) == 0);
  CHECK_EQ_INT(found(&t, 0), -1);
  CHECK_EQ_INT(found(&t, 0xfff), -1);
  CHECK_EQ_INT(found(&t, 0x1000), 11);
  CHECK_EQ_INT(found(&t, 0x1fff), 11); /* a gap belongs to the run before */
  CHECK_EQ_INT(found(&t, 0x2000), 22);
  CHECK_EQ_INT(found(&t, 0x3000), 33);
  CHECK_EQ_INT(found(&t, 0x3500), 33); /* the end itself, as libdwfl */
  CHECK_EQ_INT(found(&t, 0x3501), -1);
  CHECK(made(runs, 0, 0, &b, &t));
  CHECK_EQ_INT(found(&t, 0x1000), -1);
  cprof_buf_free(&b);
}

static void test_random(void) {
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  cprof_buf b = {0};
  for (int round = 0; round < 200; round++) {
    cprof__cutab_run runs[64];
    size_t n = 1 + (size_t)(round % 64);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      at += 1 + (rng >> 40) % 200;
      runs[i] = (cprof__cutab_run){at, rng >> 48};
    }
    uint64_t end = at + (rng >> 20) % 100;
    if (round % 7 == 0) end = at - 1; /* an end before the last start */
    cprof__cutab t;
    CHECK(made(runs, n, end, &b, &t));
    for (uint64_t a = 0; a <= end + 3 || a <= at + 3; a++)
      if (found(&t, a) != reference(runs, n, end, a)) {
        CHECK(found(&t, a) == reference(runs, n, end, a));
        break;
      }
  }
  cprof_buf_free(&b);
}

static void test_refused(void) {
  cprof__cutab_run runs[] = {{0x1000, 1}, {0x2000, 2}, {0x3000, 3}};
  cprof_buf b = {0};
  cprof__cutab t;
  CHECK(made(runs, 3, 0x3100, &b, &t));
  size_t len = b.len;
  for (size_t cut = 0; cut < len; cut += 7)
    CHECK(!cprof__cutab_parse(b.data, cut, &t));
  for (size_t i = 0; i < len; i += 5) {
    b.data[i] ^= 0x10;
    CHECK(!cprof__cutab_parse(b.data, len, &t));
    b.data[i] ^= 0x10;
  }
  CHECK(cprof__cutab_parse(b.data, len, &t));
  /* Runs out of order, with a hash that matches: refused all the same. */
  uint64_t start = 0x1800; /* below the run before it */
  memcpy(b.data + len - 16, &start, sizeof start);
  uint64_t hash = cprof__hash_bytes(
      cprof__hash_bytes(CPROF__HASH_SEED, b.data + 8, 16), b.data + 32,
      len - 32);
  memcpy(b.data + 24, &hash, sizeof hash);
  CHECK(!cprof__cutab_parse(b.data, len, &t));
  runs[2].start = 0x2000;
  CHECK(cprof__cutab_write(runs, 3, 0x3100, STAMP, sizeof STAMP, &b) ==
        CPROF_EINVAL);
  cprof_buf_free(&b);
}

int main(void) {
  RUN(test_edges);
  RUN(test_random);
  RUN(test_refused);
  return TEST_RESULT();
}
