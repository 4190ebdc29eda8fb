/*
 * The cache directory's bound (base/cachedir.c): a process lists the
 * directory (a stat of every entry) at its first write, and again only
 * when what it has written since would pass the bound; the oldest
 * entries go then, never the one just written. Entries appended to by
 * two processes at once keep each one's records whole.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static bool accept_all(int fd, void *ctx) {
  (void)fd;
  return ctx == NULL;
}

/* Appending (the symbol cache's parts): a refused entry is not written;
 * two processes appending at once, each record by one call, leave every
 * record whole, none interleaved with another. */
enum { REC = 4100, NREC = 50 };
static void test_append(void) {
  static const char head[16] = "entry's head....";
  cprof__cachedir_write("02aa.sym", head, sizeof head);
  struct stat st;
  int refuse = 1;
  CHECK(!cprof__cachedir_append("02aa.sym", head, sizeof head, accept_all,
                                &refuse, &st));
  CHECK(!cprof__cachedir_append("02zz.sym", head, sizeof head, accept_all,
                                NULL, &st)); /* no such entry */
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      static uint64_t rec[REC / 8 + 1];
      for (uint64_t i = 0; i < NREC; i++) {
        for (size_t j = 0; j <= REC / 8; j++) rec[j] = ((uint64_t)k << 32) | i;
        if (!cprof__cachedir_append("02aa.sym", rec, REC, accept_all, NULL,
                                    &st))
          _exit(1);
      }
      _exit(0);
    }
  }
  for (int k = 0; k < 2; k++) {
    int status = -1;
    CHECK(waitpid(kids[k], &status, 0) == kids[k] && status == 0);
  }
  char p[256];
  snprintf(p, sizeof p, "%s/02aa.sym", dir);
  FILE *f = fopen(p, "r");
  CHECK(f != NULL);
  if (!f) return;
  static unsigned char all[sizeof head + 2 * NREC * REC + 1];
  size_t n = fread(all, 1, sizeof all, f);
  fclose(f);
  CHECK_EQ_INT(n, sizeof head + 2 * NREC * REC);
  CHECK(memcmp(all, head, sizeof head) == 0);
  int seen[2] = {0, 0}, whole = 1;
  for (size_t at = sizeof head; at + REC <= n; at += REC) {
    uint64_t tag, w;
    memcpy(&tag, all + at, sizeof tag);
    for (size_t j = 0; j + 8 <= REC; j += 8) {
      memcpy(&w, all + at + j, sizeof w);
      if (w != tag) whole = 0;
    }
    if ((tag >> 32) < 2) seen[tag >> 32]++;
  }
  CHECK(whole);
  CHECK_EQ_INT(seen[0], NREC);
  CHECK_EQ_INT(seen[1], NREC);
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
  RUN(test_append);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return TEST_RESULT();
}
