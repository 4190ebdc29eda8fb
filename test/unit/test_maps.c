/*
 * Tests of the /proc/PID/maps parser: a table of well-formed lines with the
 * fields each must yield, a table of malformed lines that must be refused,
 * and the multi-line walk. Every line is copied into a buffer of exactly its
 * length so that ASan catches any read past the end.
 */
#include <stdbool.h>

#include "encode/maps.h"
#include "testutil.h"

typedef struct good_case {
  const char *line;
  uint64_t start, end, offset, inode;
  const char *perms;
  const char *path; /* as returned, " (deleted)" trimmed */
  bool deleted;
} good_case;

static const good_case good[] = {
    {"55d0c7a00000-55d0c7a28000 r-xp 00002000 fd:01 1234567                    /usr/bin/cat",
     0x55d0c7a00000, 0x55d0c7a28000, 0x2000, 1234567, "r-xp", "/usr/bin/cat", false},
    {"7f0000000000-7f0000001000 rw-p 00000000 00:00 0", 0x7f0000000000,
     0x7f0000001000, 0, 0, "rw-p", "", false},
    {"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 ", 0x7f0000000000,
     0x7f0000001000, 0, 0, "rw-p", "", false},
    {"7ffd1b5e9000-7ffd1b5eb000 r-xp 00000000 00:00 0                          [vdso]",
     0x7ffd1b5e9000, 0x7ffd1b5eb000, 0, 0, "r-xp", "[vdso]", false},
    {"7ffd1b4c0000-7ffd1b4e1000 rw-p 00000000 00:00 0                          [stack]",
     0x7ffd1b4c0000, 0x7ffd1b4e1000, 0, 0, "rw-p", "[stack]", false},
    {"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
     0xffffffffff600000ull, 0xffffffffff601000ull, 0, 0, "--xp", "[vsyscall]", false},
    {"400000-401000 r-xp 00001000 08:02 42 /home/me/my program/a b.so",
     0x400000, 0x401000, 0x1000, 42, "r-xp", "/home/me/my program/a b.so", false},
    {"400000-401000 r-xp 00000000 08:02 42 /tmp/libx.so (deleted)", 0x400000,
     0x401000, 0, 42, "r-xp", "/tmp/libx.so", true},
    {"400000-401000 r-xp 00000000 08:02 42 /tmp/a (deleted) b", 0x400000,
     0x401000, 0, 42, "r-xp", "/tmp/a (deleted) b", false},
    {"7F00AbCd0000-7F00ABCD1000 rwxs 0000FFFF 103:1a 18446744073709551615 /dev/shm/x",
     0x7f00abcd0000, 0x7f00abcd1000, 0xffff, UINT64_MAX, "rwxs", "/dev/shm/x", false},
    {"0-0 ---p 0 00:00 0", 0, 0, 0, 0, "---p", "", false},
    {"1000-2000 r--p 00000000 00:00 0\t\t/tabbed", 0x1000, 0x2000, 0, 0, "r--p",
     "/tabbed", false},
    {"ffffffffffffffff-ffffffffffffffff r--p ffffffffffffffff 00:00 0", UINT64_MAX,
     UINT64_MAX, UINT64_MAX, 0, "r--p", "", false},
    {"00000000000000000000001000-2000 r--p 00000000 00:00 0", 0x1000, 0x2000, 0, 0,
     "r--p", "", false},
};

static const char *const bad[] = {
    "",
    " ",
    "garbage",
    "1000",
    "1000-",
    "1000-2000",
    "1000-2000 ",
    "1000-2000 r-x",
    "1000-2000 r-xp",
    "1000-2000 r-xp ",
    "1000-2000 r-xp 0",
    "1000-2000 r-xp 0 00:00",
    "1000-2000 r-xp 0 00:00 ",
    "2000-1000 r-xp 00000000 00:00 0",              /* start > end */
    "10000000000000000-2000 r-xp 0 00:00 0",        /* start overflows */
    "1000-10000000000000000 r-xp 0 00:00 0",        /* end overflows */
    "1000-2000 r-xp 10000000000000000 00:00 0",     /* offset overflows */
    "1000-2000 r-xp 0 00:00 18446744073709551616",  /* inode overflows */
    "1000-2000 r-xp 0 100000000:00 0",              /* major too big */
    "1000-2000 r-xpp 0 00:00 0",                    /* perms too long */
    "1000-2000 r-x 0 00:00 0",                      /* perms too short */
    "1000-2000 xr-p 0 00:00 0",                     /* perms out of order */
    "1000-2000 r-xq 0 00:00 0",                     /* neither p nor s */
    "1000-2000 r-xp 0 0:00 0",                      /* one-digit major */
    "1000-2000 r-xp 0 00:0 0",                      /* one-digit minor */
    "1000-2000 r-xp 0 0000 0",                      /* no colon */
    "1000-2000 r-xp 0 00:00 abc",                   /* inode not decimal */
    "1000-2000 r-xp 0 00:00 0x10",                  /* junk after inode */
    "1000-2000 r-xp 0 00:00 12a /x",                /* junk after inode */
    "1000-2000  r-xp 0 00:00 0",                    /* double blank */
    " 1000-2000 r-xp 0 00:00 0",                    /* leading blank */
    "1000 2000 r-xp 0 00:00 0",                     /* no dash */
    "g000-2000 r-xp 0 00:00 0",                     /* not hex */
    "-2000 r-xp 0 00:00 0",                         /* empty start */
    "1000-2000 r-xp 0 00:00 0\n",                   /* a newline is not a path */
};

/* Parses line from a heap copy of exactly its length. */
static int parse_exact(const char *line, cprof__map_entry *e) {
  size_t len = strlen(line);
  char *copy = malloc(len ? len : 1);
  memcpy(copy, line, len);
  int rc = cprof__maps_parse_line(copy, len, e);
  /* Paths point into the copy; move them into the caller's string. */
  if (rc == 0 && e->path) e->path = line + (e->path - copy);
  free(copy);
  return rc;
}

static void perms_of(const cprof__map_entry *e, char out[5]) {
  out[0] = e->readable ? 'r' : '-';
  out[1] = e->writable ? 'w' : '-';
  out[2] = e->executable ? 'x' : '-';
  out[3] = e->shared ? 's' : 'p';
  out[4] = '\0';
}

static void test_good_lines(void) {
  for (size_t i = 0; i < CPROF__ARRAY_LEN(good); i++) {
    const good_case *c = &good[i];
    cprof__map_entry e;
    int rc = parse_exact(c->line, &e);
    if (rc != 0) fprintf(stderr, "  line %zu: %s\n", i, c->line);
    CHECK_EQ_INT(rc, 0);
    if (rc) continue;
    CHECK(e.start == c->start);
    CHECK(e.end == c->end);
    CHECK(e.offset == c->offset);
    CHECK(e.inode == c->inode);
    char perms[5];
    perms_of(&e, perms);
    CHECK_STREQ(perms, c->perms);
    CHECK_EQ_INT(e.path_len, strlen(c->path));
    CHECK(e.path_len == 0 || memcmp(e.path, c->path, e.path_len) == 0);
    CHECK_EQ_INT(e.deleted, c->deleted);
  }
}

static void test_bad_lines(void) {
  for (size_t i = 0; i < CPROF__ARRAY_LEN(bad); i++) {
    cprof__map_entry e;
    int rc = parse_exact(bad[i], &e);
    if (rc != CPROF_EINVAL) fprintf(stderr, "  accepted: \"%s\"\n", bad[i]);
    CHECK_EQ_INT(rc, CPROF_EINVAL);
  }
  cprof__map_entry e;
  CHECK_EQ_INT(cprof__maps_parse_line(NULL, 0, &e), CPROF_EINVAL);
}

/* A length shorter than the string: the parser must stop at len. */
static void test_length_bound(void) {
  const char *line = "1000-2000 r-xp 00000000 08:02 42 /lib/x.so";
  cprof__map_entry e;
  CHECK_EQ_INT(cprof__maps_parse_line(line, strlen(line) - 5, &e), 0);
  CHECK_EQ_INT(e.path_len, strlen("/lib"));
  /* Cut inside the inode: still a valid (anonymous) line with inode 4. */
  CHECK_EQ_INT(cprof__maps_parse_line(line, 31, &e), 0);
  CHECK(e.inode == 4);
  CHECK_EQ_INT(e.path_len, 0);
  /* Cut inside the device. */
  CHECK_EQ_INT(cprof__maps_parse_line(line, 28, &e), CPROF_EINVAL);
  /* Every prefix of a good line parses or fails, never overreads (ASan). */
  size_t len = strlen(line);
  for (size_t n = 0; n <= len; n++) {
    char *copy = malloc(n ? n : 1);
    memcpy(copy, line, n);
    int rc = cprof__maps_parse_line(copy, n, &e);
    CHECK(rc == 0 || rc == CPROF_EINVAL);
    free(copy);
  }
}

typedef struct walk {
  int n;
  int stop_at;
  uint64_t starts[8];
  size_t path_lens[8];
} walk;

static int walk_cb(const cprof__map_entry *e, void *ctx) {
  walk *w = ctx;
  if (w->n < 8) {
    w->starts[w->n] = e->start;
    w->path_lens[w->n] = e->path_len;
  }
  w->n++;
  return w->n == w->stop_at ? 42 : 0;
}

static void test_parse_text(void) {
  static const char text[] =
      "00400000-00401000 r--p 00000000 08:02 42   /bin/prog\n"
      "00401000-00402000 r-xp 00001000 08:02 42   /bin/prog\n"
      "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
      "7ffd1b5e9000-7ffd1b5eb000 r-xp 00000000 00:00 0  [vdso]\n";
  walk w = {0};
  CHECK_EQ_INT(cprof__maps_parse(text, sizeof text - 1, walk_cb, &w), 0);
  CHECK_EQ_INT(w.n, 4);
  CHECK(w.starts[0] == 0x400000 && w.starts[1] == 0x401000);
  CHECK(w.starts[3] == 0x7ffd1b5e9000);
  CHECK_EQ_INT(w.path_lens[0], strlen("/bin/prog"));
  CHECK_EQ_INT(w.path_lens[2], 0);
  CHECK_EQ_INT(w.path_lens[3], strlen("[vdso]"));

  /* Without the final newline the last line still counts. */
  memset(&w, 0, sizeof w);
  CHECK_EQ_INT(cprof__maps_parse(text, sizeof text - 2, walk_cb, &w), 0);
  CHECK_EQ_INT(w.n, 4);

  /* A nonzero callback result stops the walk and is returned. */
  memset(&w, 0, sizeof w);
  w.stop_at = 2;
  CHECK_EQ_INT(cprof__maps_parse(text, sizeof text - 1, walk_cb, &w), 42);
  CHECK_EQ_INT(w.n, 2);

  /* Empty text is fine; a malformed line anywhere is an error. */
  memset(&w, 0, sizeof w);
  CHECK_EQ_INT(cprof__maps_parse("", 0, walk_cb, &w), 0);
  CHECK_EQ_INT(w.n, 0);
  static const char broken[] =
      "00400000-00401000 r--p 00000000 08:02 42 /bin/prog\n"
      "this is not a maps line\n"
      "00401000-00402000 r-xp 00001000 08:02 42 /bin/prog\n";
  memset(&w, 0, sizeof w);
  CHECK_EQ_INT(cprof__maps_parse(broken, sizeof broken - 1, walk_cb, &w),
               CPROF_EINVAL);
  CHECK_EQ_INT(w.n, 1);
  static const char blank_line[] =
      "00400000-00401000 r--p 00000000 08:02 42 /bin/prog\n\n";
  CHECK_EQ_INT(cprof__maps_parse(blank_line, sizeof blank_line - 1, NULL, NULL),
               CPROF_EINVAL);
}

/* The real thing: this process's own maps parse completely. */
static int count_cb(const cprof__map_entry *e, void *ctx) {
  (void)e;
  ++*(int *)ctx;
  return 0;
}

static void test_own_maps(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  CHECK(f != NULL);
  if (!f) return;
  static char text[1 << 20];
  size_t len = fread(text, 1, sizeof text, f);
  fclose(f);
  int n = 0;
  CHECK_EQ_INT(cprof__maps_parse(text, len, count_cb, &n), 0);
  CHECK(n > 5);
}

int main(void) {
  RUN(test_good_lines);
  RUN(test_bad_lines);
  RUN(test_length_bound);
  RUN(test_parse_text);
  RUN(test_own_maps);
  return TEST_RESULT();
}
