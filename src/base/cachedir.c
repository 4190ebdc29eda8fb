/*
 * The private cache directory (cachedir.h). Files are reached through a
 * descriptor of the directory (openat, O_NOFOLLOW), so nothing under it is
 * followed through a link; an entry is written under a temporary name
 * created O_EXCL and renamed into place, so a reader never sees half of
 * one and two writers never share one. A temporary name left by a writer
 * that died is taken over after STALE_SECONDS. An entry whose format can
 * tell a part cut short may also grow by appending (the symbol cache's).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cachedir.h"
#include "base/env.h"
#include "base/mem.h"

#define DEFAULT_MB 512
#define STALE_SECONDS 120
/* The most entries eviction looks at; more are left alone. */
#define MAX_ENTRIES 1024
#define PATH_QUOTE_MAX 512

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool cache_on;
static bool cache_named; /* by CPROF_DEBUG_CACHE, not the default */
/* How much of cache_dir must exist already: its parent when named, $HOME,
 * or $XDG_CACHE_HOME's parent. Only what lies below is made. */
static size_t cache_base_len;
static char cache_dir[PATH_MAX];
static unsigned long long cache_max; /* bytes */

static void read_settings(void) {
  if (getauxval(AT_SECURE)) return; /* neither CPROF_* nor HOME is ours */
  long long mb = DEFAULT_MB;
  cprof__env_int("CPROF_DEBUG_CACHE_MB", 0, 1 << 20,
                 "the debug cache keeps its bound of 512 MiB", &mb);
  const char *v = cprof__env_str("CPROF_DEBUG_CACHE");
  if (mb == 0 || (v && strcmp(v, "off") == 0)) return;
  int len = -1;
  if (v) {
    if (v[0] != '/') {
      char q[CPROF__QUOTED_SIZE];
      cprof__warn("CPROF_DEBUG_CACHE=%s: not an absolute directory (or off); "
                  "no debug cache",
                  cprof__quoted(q, sizeof q, v));
      return;
    }
    len = snprintf(cache_dir, sizeof cache_dir, "%s", v);
    cache_named = true;
    const char *slash = strrchr(v, '/');
    cache_base_len = (size_t)(slash - v);
  } else {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xdg && xdg[0] == '/') {
      len = snprintf(cache_dir, sizeof cache_dir, "%s/cprof/debug", xdg);
      const char *slash = strrchr(xdg, '/');
      cache_base_len = (size_t)(slash - xdg);
    } else if (home && home[0] == '/') {
      len = snprintf(cache_dir, sizeof cache_dir, "%s/.cache/cprof/debug",
                     home);
      cache_base_len = strlen(home);
    }
  }
  if (len <= 0 || (size_t)len >= sizeof cache_dir) return;
  if (cache_base_len == 0) cache_base_len = 1; /* "/" */
  cache_max = (unsigned long long)mb << 20;
  cache_on = true;
}

void cprof__cachedir_env_init(void) { pthread_once(&once, read_settings); }

/* True when st is ours and nobody else may write it. */
static bool owned(const struct stat *st) {
  return st->st_uid == geteuid() && (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

/* Creates the missing directories of path below its first base bytes,
 * each 0700 (the XDG rule), when those exist as a directory: a HOME that
 * does not exist is never made. */
static void make_dirs(char *path, size_t base) {
  struct stat st;
  char keep = path[base];
  path[base] = '\0';
  bool there = stat(base ? path : "/", &st) == 0 && S_ISDIR(st.st_mode);
  path[base] = keep;
  if (!there) return;
  for (char *p = path + base + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    (void)mkdir(path, 0700);
    *p = '/';
  }
  (void)mkdir(path, 0700);
}

/* The cache directory, opened and checked; -1 when it is not usable. Said
 * once when it was named, or exists and is not safe; a default directory
 * that cannot be made (a service's HOME that does not exist) is quietly
 * no cache. */
int cprof__cachedir_open(void) {
  static bool warned;
  int d = open(cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (d < 0 && errno == ENOENT) {
    char copy[PATH_MAX];
    memcpy(copy, cache_dir, sizeof copy);
    make_dirs(copy, cache_base_len);
    d = open(cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  struct stat st;
  if (d >= 0 && fstat(d, &st) == 0 && owned(&st)) return d;
  if (d >= 0) close(d);
  if (d < 0 && !cache_named) {
    cache_on = false;
    return -1;
  }
  if (!warned) {
    warned = true;
    /* A path is shown whole (up to PATH_QUOTE_MAX bytes), unlike a value
       that merely came from the environment: the user needs all of it to
       find the directory. */
    char q[4 * PATH_QUOTE_MAX + 32];
    cprof__quote(q, sizeof q, cache_dir, strlen(cache_dir), PATH_QUOTE_MAX);
    cprof__warn("debug cache %s: not a directory of this user's that only it "
                "may write; debug files are read compressed",
                q);
  }
  cache_on = false;
  return -1;
}


/* The kinds of entries the directory holds (what the bound counts): the
 * inflated debug files, the symbol cache's and the unwind tables'. */
static bool entry_suffix(const char *name, size_t l) {
  static const char *const kinds[] = {".debug", ".sym", ".cfi"};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    size_t k = strlen(kinds[i]);
    if (l > k && strcmp(name + l - k, kinds[i]) == 0) return true;
  }
  return false;
}

unsigned long long cprof__cachedir_max(void) { return cache_max; }

const char *cprof__cachedir_path(void) { return cache_dir; }

/* Writes all of buf at off. A file that would pass the process's
 * RLIMIT_FSIZE is not written past it, and the SIGXFSZ that would kill
 * the program is taken back (env.h). */
bool cprof__cachedir_write_at(int fd, const void *buf, size_t len, off_t off) {
  const unsigned char *p = buf;
  cprof__write_guard g;
  cprof__write_guard_begin(&g);
  int failed = 0;
  while (len > 0) {
    ssize_t w = pwrite(fd, p, len, off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      failed = w < 0 ? errno : EIO;
      break;
    }
    p += w;
    len -= (size_t)w;
    off += w;
  }
  cprof__write_guard_end(&g, failed);
  return failed == 0;
}

/* The entries' total size as this process last listed the directory,
 * plus the sizes of the entries it has written since (0 until its first
 * listing). Listing means a stat of every entry: 423 of them took 8
 * listings a compiler's exit dump, 3,400 fstatat calls. A process lists
 * the directory at its first write (a fork child goes on from its
 * parent's count), then only when what it wrote since would take its
 * count past the bound: entries other processes wrote meanwhile are
 * theirs to count. */
static _Atomic unsigned long long listed_sum;
static atomic_bool listed;

/* Adds n bytes written to the count: false when the directory was not
 * listed yet, or the count would pass the bound (it is listed then). */
static bool count_written(unsigned long long n) {
  if (!atomic_load(&listed)) return false;
  unsigned long long was = atomic_load(&listed_sum);
  unsigned long long now = was + n;
  return now <= cache_max &&
         atomic_compare_exchange_strong(&listed_sum, &was, now);
}

static void evict_listed(int d, const char *keep);

/* The entries' total size, and the oldest ones removed (by the time they
 * were last used) until it is at most the bound; keep is never removed. */
void cprof__cachedir_evict(int d, const char *keep) {
  struct stat kst;
  if (atomic_load(&listed) &&
      fstatat(d, keep, &kst, AT_SYMLINK_NOFOLLOW) == 0 &&
      count_written((unsigned long long)kst.st_size))
    return;
  evict_listed(d, keep);
}

/* Lists the directory: its total, and the oldest entries removed until it
 * is at most the bound; keep is never removed. */
static void evict_listed(int d, const char *keep) {
  int d2 = dup(d);
  DIR *dir = d2 >= 0 ? fdopendir(d2) : NULL;
  if (!dir) {
    if (d2 >= 0) close(d2);
    return;
  }
  struct entry {
    time_t used;
    off_t size;
    char name[NAME_MAX + 1];
  } *e = cprof__malloc(MAX_ENTRIES * sizeof *e);
  size_t n = 0;
  unsigned long long sum = 0;
  struct dirent *de;
  while (e && n < MAX_ENTRIES && (de = readdir(dir)) != NULL) {
    size_t l = strlen(de->d_name);
    if (!entry_suffix(de->d_name, l)) continue;
    struct stat st;
    if (fstatat(d, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || st.st_uid != geteuid())
      continue;
    sum += (unsigned long long)st.st_size;
    e[n].used = st.st_mtime;
    e[n].size = st.st_size;
    snprintf(e[n].name, sizeof e[n].name, "%s", de->d_name);
    n++;
  }
  closedir(dir);
  while (e && sum > cache_max) {
    size_t oldest = n;
    for (size_t i = 0; i < n; i++)
      if (e[i].size >= 0 && strcmp(e[i].name, keep) != 0 &&
          (oldest == n || e[i].used < e[oldest].used))
        oldest = i;
    if (oldest == n) break;
    if (unlinkat(d, e[oldest].name, 0) == 0)
      sum -= (unsigned long long)e[oldest].size;
    e[oldest].size = -1;
  }
  if (e && n < MAX_ENTRIES) {
    atomic_store(&listed_sum, sum);
    atomic_store(&listed, true);
  }
  cprof__free(e);
}

/* Opens the entry name under d when it is a regular file of ours within
 * the bound; marks it used. */
/* Opens the entry name under d (mode: O_RDONLY, or O_RDWR | O_APPEND)
 * when it is a regular file of ours that, grown by grow bytes, stays
 * within the bound; *st gets its status. -1 otherwise. */
static int open_checked(int d, const char *name, int mode, size_t grow,
                        struct stat *st) {
  int fd = openat(d, name, mode | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || !owned(st) ||
      st->st_size <= 0 ||
      (unsigned long long)st->st_size + grow > cache_max) {
    close(fd);
    return -1;
  }
  return fd;
}

int cprof__cachedir_open_entry(int d, const char *name, struct stat *st) {
  int fd = open_checked(d, name, O_RDONLY, 0, st);
  if (fd >= 0) (void)futimens(fd, NULL); /* last used now, for eviction */
  return fd;
}

/* Creates the temporary file for entry name under d: -1 when another
 * process is writing it (one that died has its file taken over after
 * STALE_SECONDS). tmp gets its name. */
int cprof__cachedir_create_temporary(int d, const char *name, char *tmp,
                                      size_t cap) {
  if ((size_t)snprintf(tmp, cap, "%s.tmp", name) >= cap) return -1;
  int out = -1;
  for (int attempt = 0; out < 0 && attempt < 2; attempt++) {
    out = openat(d, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                 0600);
    struct stat st;
    if (out < 0 && errno == EEXIST &&
        fstatat(d, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        time(NULL) - st.st_mtime > STALE_SECONDS)
      (void)unlinkat(d, tmp, 0); /* its writer died */
    else if (out < 0)
      break; /* another process is writing it */
  }
  return out;
}

bool cprof__cachedir_on(void) {
  cprof__cachedir_env_init();
  return cache_on;
}

/* An entry's name: hex digits, a dot and a short suffix, nothing else. */
static bool entry_name_ok(const char *name) {
  size_t n = strlen(name), digits = strspn(name, "0123456789abcdef");
  return n < 2 * 64 + 16 && digits >= 2 && name[digits] == '.' &&
         strspn(name + digits + 1, "abcdefghijklmnopqrstuvwxyz") ==
             n - digits - 1;
}

bool cprof__cachedir_read_at(int fd, void *buf, size_t n, off_t off) {
  unsigned char *b = buf;
  while (n > 0) {
    ssize_t got = pread(fd, b, n, off);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    b += got;
    n -= (size_t)got;
    off += got;
  }
  return true;
}

int cprof__cachedir_open_named(const char *name, struct stat *st) {
  if (!cprof__cachedir_on() || !entry_name_ok(name)) return -1;
  int d = cprof__cachedir_open();
  if (d < 0) return -1;
  int fd = cprof__cachedir_open_entry(d, name, st);
  close(d);
  return fd;
}

bool cprof__cachedir_changed(const char *name, const struct stat *was) {
  if (!cprof__cachedir_on() || !entry_name_ok(name)) return false;
  char path[PATH_MAX + 2 * 64 + 16];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", cache_dir, name) >=
      sizeof path)
    return false;
  /* An entry is only ever replaced by a rename of a file created while it
   * still existed (another inode), or appended to (another size). Its
   * times say nothing (reading an entry marks it used). */
  struct stat st;
  if (stat(path, &st) != 0) return true;
  return st.st_dev != was->st_dev || st.st_ino != was->st_ino ||
         st.st_size != was->st_size;
}

bool cprof__cachedir_read(const char *name, size_t max, cprof_buf *out,
                          struct stat *st_out) {
  out->len = 0;
  struct stat st;
  int fd = cprof__cachedir_open_named(name, &st);
  if (fd < 0) return false;
  bool ok = (unsigned long long)st.st_size <= max;
  size_t len = ok ? (size_t)st.st_size : 0;
  if (ok && out->cap < len) {
    unsigned char *p = cprof__realloc(out->data, len);
    ok = p != NULL;
    if (ok) {
      out->data = p;
      out->cap = len;
    }
  }
  if (ok) ok = cprof__cachedir_read_at(fd, out->data, len, 0);
  out->len = ok ? len : 0;
  if (ok && st_out) *st_out = st;
  close(fd);
  return ok;
}

bool cprof__cachedir_append(const char *name, const void *data, size_t len,
                            bool (*accept)(int fd, void *ctx), void *ctx,
                            struct stat *st) {
  if (!cprof__cachedir_on() || !entry_name_ok(name) || len == 0)
    return false;
  int d = cprof__cachedir_open();
  if (d < 0) return false;
  struct stat was;
  int fd = open_checked(d, name, O_RDWR | O_APPEND, len, &was);
  ssize_t w = -1;
  if (fd >= 0 && accept(fd, ctx)) {
    /* One write: two processes' parts never interleave (the file's lock
     * is held across a write), and one cut short (the file at the
     * process's RLIMIT_FSIZE, say) is told by its hash. */
    cprof__write_guard g;
    cprof__write_guard_begin(&g);
    do
      w = write(fd, data, len);
    while (w < 0 && errno == EINTR);
    cprof__write_guard_end(&g, w < 0 ? errno : 0);
  }
  bool ok = w == (ssize_t)len && fstat(fd, st) == 0;
  if (fd >= 0) close(fd);
  if (w > 0 && !count_written((unsigned long long)w)) evict_listed(d, name);
  close(d);
  return ok;
}

void cprof__cachedir_write(const char *name, const void *data, size_t len) {
  if (!cprof__cachedir_on() || !entry_name_ok(name) ||
      (unsigned long long)len > cache_max)
    return;
  int d = cprof__cachedir_open();
  if (d < 0) return;
  char tmp[2 * 64 + 32];
  int out = cprof__cachedir_create_temporary(d, name, tmp, sizeof tmp);
  if (out >= 0) {
    bool ok = cprof__cachedir_write_at(out, data, len, 0);
    if (close(out) != 0) ok = false;
    if (ok && renameat(d, tmp, d, name) == 0)
      cprof__cachedir_evict(d, name);
    else
      (void)unlinkat(d, tmp, 0);
  }
  close(d);
}
