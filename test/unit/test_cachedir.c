/*
 * The cache directory's bound (base/cachedir.c): a process lists the
 * directory (a stat of every entry) at its first write, and again only
 * when what it has written since would pass the bound; the oldest
 * entries go then, never the one just written.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cachedir.h"
#include "testutil.h"

static char dir[64];

static bool exists(const char *name) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* A file of n bytes put there as another process would, last used ago
 * seconds before now. */
static void plant(const char *name, size_t n, long ago) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  CHECK(f != NULL);
  if (!f) return;
  for (size_t i = 0; i < n; i++) fputc(0, f);
  fclose(f);
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= ago;
  t[1] = t[0];
  utimensat(AT_FDCWD, p, t, 0);
}

static void put(const char *name, size_t n) {
  char *b = calloc(1, n);
  cprof__cachedir_write(name, b, n);
  free(b);
}

static size_t entries(void) {
  size_t n = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

static void test_bound(void) {
  CHECK(cprof__cachedir_on());
  CHECK_EQ_INT(entries(), 0);
  CHECK_EQ_INT(cprof__cachedir_max(), 1 << 20);
  plant("00aa.debug", 300 << 10, 3000); /* the oldest */
  plant("00bb.debug", 300 << 10, 2000);
  /* The first write lists the directory: 900 KiB fit. */
  put("01aa.sym", 300 << 10);
  CHECK(exists("00aa.debug") && exists("00bb.debug") && exists("01aa.sym"));
  /* Another process's entry, planted now, is not counted by this one. */
  plant("00cc.debug", 100 << 10, 1000);
  /* 1,000 KiB by this process's count: no listing, nothing goes, though
   * the directory holds 1,100 KiB. */
  put("01bb.sym", 100 << 10);
  CHECK(exists("00aa.debug") && exists("00bb.debug") && exists("00cc.debug"));
  /* Past the bound by its count: the directory is listed again (1,300
   * KiB) and the oldest entry goes, which makes it fit. */
  put("01cc.sym", 200 << 10);
  CHECK(!exists("00aa.debug"));
  CHECK(exists("00bb.debug") && exists("00cc.debug") && exists("01aa.sym") &&
        exists("01bb.sym") && exists("01cc.sym"));
  /* Listed afresh: 1,000 KiB. One more of 100 KiB is past the bound
   * again, and the oldest left goes; the new one never does. */
  put("01dd.sym", 100 << 10);
  CHECK(!exists("00bb.debug"));
  CHECK(exists("00cc.debug") && exists("01dd.sym"));
}

int main(int argc, char **argv) {
  if (argc < 2) {
    /* The settings are read once, at start-up: run again with them (and
     * the directory as an argument: cprof keeps its settings out of the
     * environment the program sees). */
    snprintf(dir, sizeof dir, "/tmp/cprof-cachedir-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    setenv("CPROF_DEBUG_CACHE", dir, 1);
    setenv("CPROF_DEBUG_CACHE_MB", "1", 1);
    /* No unwind tables, so none is kept in the directory. */
    setenv("CPROF_UNWIND", "fp", 1);
    char *again[] = {argv[0], dir, NULL};
    execv("/proc/self/exe", again);
    return 1;
  }
  snprintf(dir, sizeof dir, "%s", argv[1]);
  cprof__cachedir_env_init();
  RUN(test_bound);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return TEST_RESULT();
}
