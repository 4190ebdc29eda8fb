/*
 * Tests of the /tmp/perf-PID.map reader (encode/perfmap.h): the line
 * format, which entry a lookup takes, the bounds on names and entries, and
 * the file itself: this process's own /tmp/perf-PID.map, read when it
 * grows, read whole when replaced, refused when others may write it or it
 * is a symlink.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "encode/perfmap.h"
#include "testutil.h"

static size_t feed(const char *text) {
  return cprof__perfmap_feed(text, strlen(text));
}

static const char *name_at(uintptr_t pc, uintptr_t *start) {
  uintptr_t s = 0;
  const char *n = cprof__perfmap_lookup(pc, &s);
  if (start) *start = s;
  return n;
}

static void test_lines(void) {
  cprof__perfmap_reset();
  const char text[] =
      "1000 100 first\n"
      "0x2000 0x10 with prefix\n"
      "3000 20  two  spaces \r\n"
      "zz 10 bad start\n"
      "4000 zz bad size\n"
      "5000 0 empty size\n"
      "6000 10\n"
      "7000 10 unfinished";
  /* The unfinished last line is not taken. */
  CHECK_EQ_INT(feed(text), strlen(text) - strlen("7000 10 unfinished"));
  CHECK_EQ_INT(cprof__perfmap_entries(), 3);
  uintptr_t start;
  CHECK_STREQ(name_at(0x1000, &start), "first");
  CHECK_EQ_INT(start, 0x1000);
  CHECK_STREQ(name_at(0x10ff, &start), "first");
  CHECK(name_at(0x1100, NULL) == NULL);
  CHECK(name_at(0xfff, NULL) == NULL);
  CHECK_STREQ(name_at(0x200f, NULL), "with prefix");
  CHECK_STREQ(name_at(0x3000, NULL), "two  spaces");
  CHECK(name_at(0x4000, NULL) == NULL);
  CHECK(name_at(0x6000, NULL) == NULL);
  CHECK(name_at(0x7000, NULL) == NULL);
}

static void test_newest_wins(void) {
  cprof__perfmap_reset();
  feed("1000 1000 old big\n1800 10 old small\n");
  feed("1000 100 new\n");
  CHECK_STREQ(name_at(0x1050, NULL), "new");
  CHECK_STREQ(name_at(0x1805, NULL), "old small");
  CHECK_STREQ(name_at(0x1900, NULL), "old big");
  feed("1800 10 newer small\n");
  CHECK_STREQ(name_at(0x1805, NULL), "newer small");
}

static void test_bounds(void) {
  cprof__perfmap_reset();
  /* A long name is cut; control bytes become '?'. */
  char line[3000];
  memset(line, 'n', sizeof line);
  memcpy(line, "1000 10 ", 8);
  line[8] = '\t';
  line[9] = '\x1b';
  line[sizeof line - 1] = '\n';
  CHECK_EQ_INT(cprof__perfmap_feed(line, sizeof line), sizeof line);
  const char *n = name_at(0x1000, NULL);
  CHECK(n != NULL);
  if (n) {
    CHECK_EQ_INT(strlen(n), CPROF__PERFMAP_NAME_MAX);
    CHECK(n[0] == '?' && n[1] == '?' && n[2] == 'n');
  }
  /* An entry larger than any function a JIT writes is not taken. */
  feed("100000 20000000 huge\n");
  CHECK(name_at(0x100010, NULL) == NULL);
  /* Addresses near the top do not wrap. */
  feed("fffffffffffffff0 20 wraps\n");
  CHECK(name_at(0x5, NULL) == NULL);
}

static void test_entry_bound(void) {
  cprof__perfmap_reset();
  size_t want = ((size_t)1 << 20) + 10;
  char *text = malloc(want * 12);
  CHECK(text != NULL);
  if (!text) return;
  size_t len = 0;
  for (size_t i = 0; i < want; i++)
    len += (size_t)sprintf(text + len, "%zx 1 f\n", i * 16 + 16);
  CHECK_EQ_INT(cprof__perfmap_feed(text, len), len);
  CHECK_EQ_INT(cprof__perfmap_entries(), (size_t)1 << 20);
  free(text);
  cprof__perfmap_reset();
}

static char path[64];

static void write_file(const char *text, mode_t mode, bool append) {
  int fd = open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0600);
  CHECK(fd >= 0);
  if (fd < 0) return;
  CHECK_EQ_INT(write(fd, text, strlen(text)), (long long)strlen(text));
  CHECK_EQ_INT(fchmod(fd, mode), 0);
  close(fd);
}

static void test_file(void) {
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
  unlink(path);
  cprof__perfmap_reset();
  CHECK(!cprof__perfmap_refresh()); /* no file */
  write_file("1000 10 a\n2000 10 b", 0644, false);
  CHECK(cprof__perfmap_refresh());
  CHECK_STREQ(name_at(0x1000, NULL), "a");
  CHECK(name_at(0x2000, NULL) == NULL); /* its line is not complete yet */
  CHECK(!cprof__perfmap_refresh());     /* nothing changed */
  write_file("\n3000 10 c\n", 0644, true);
  CHECK(cprof__perfmap_refresh());
  CHECK_STREQ(name_at(0x2000, NULL), "b");
  CHECK_STREQ(name_at(0x3000, NULL), "c");
  CHECK_EQ_INT(cprof__perfmap_entries(), 3);
  /* Replaced by a new file: read whole, the old names gone. */
  unlink(path);
  write_file("4000 10 d\n", 0644, false);
  CHECK(cprof__perfmap_refresh());
  CHECK(name_at(0x1000, NULL) == NULL);
  CHECK_STREQ(name_at(0x4000, NULL), "d");
  /* Shrunk in place: read whole. */
  write_file("5000 1 e\n", 0644, false);
  CHECK(cprof__perfmap_refresh());
  CHECK(name_at(0x4000, NULL) == NULL);
  CHECK_STREQ(name_at(0x5000, NULL), "e");
  /* Rewritten in place to the same size: read whole too. */
  usleep(20000);
  write_file("6000 1 f\n", 0644, false);
  CHECK(cprof__perfmap_refresh());
  CHECK(name_at(0x5000, NULL) == NULL);
  CHECK_STREQ(name_at(0x6000, NULL), "f");

  /* A file others may write is not read. */
  unlink(path);
  cprof__perfmap_reset();
  write_file("1000 10 a\n", 0664, false);
  CHECK(!cprof__perfmap_refresh());
  CHECK(name_at(0x1000, NULL) == NULL);
  write_file("1000 10 a\n", 0646, false);
  CHECK(!cprof__perfmap_refresh());
  CHECK(name_at(0x1000, NULL) == NULL);
  /* Nor a symlink, even to a good file. */
  char target[80];
  snprintf(target, sizeof target, "%s.target", path);
  unlink(path);
  int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && write(fd, "1000 10 a\n", 10) == 10);
  if (fd >= 0) close(fd);
  CHECK_EQ_INT(symlink(target, path), 0);
  CHECK(!cprof__perfmap_refresh());
  CHECK(name_at(0x1000, NULL) == NULL);
  unlink(path);
  unlink(target);
  cprof__perfmap_reset();
}

int main(void) {
  RUN(test_lines);
  RUN(test_newest_wins);
  RUN(test_bounds);
  RUN(test_entry_bound);
  RUN(test_file);
  return TEST_RESULT();
}
