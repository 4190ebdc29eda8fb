/*
 * The /tmp/perf-PID.map reader (perfmap.h). The table is an array of
 * entries sorted by first address, then by the order they were read; a
 * lookup takes the newest entry covering the address among those that
 * start at most max_size below it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/env.h"
#include "base/mem.h"
#include "encode/perfmap.h"

/* Entries kept at most (32 bytes each); a file with more stops being read
 * there, with one line on stderr. */
#define MAX_ENTRIES ((size_t)1 << 20)
/* An entry larger than this is not a function a JIT wrote: skipped. */
#define MAX_SIZE ((uint64_t)1 << 28)
/* How far back a lookup scans among entries that start below pc. */
#define SCAN_BACK 256
/* What one read takes. */
#define CHUNK ((size_t)256 << 10)

typedef struct entry {
  uint64_t start, size, seq;
  uint32_t name_off, name_len;
} entry;

static struct {
  entry *e;
  size_t n, cap;
  char *names;
  size_t names_len, names_cap;
  uint64_t seq, max_size;
  bool sorted, full_warned;
  /* The file read so far: its identity and how many bytes were taken. */
  dev_t dev;
  ino_t ino;
  size_t taken, size;
  struct timespec mtime;
  pid_t pid;
  int enabled; /* -1: not decided yet */
} T = {.enabled = -1};

static bool hexnum(const char **p, const char *end, uint64_t *out) {
  const char *s = *p;
  if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
  uint64_t v = 0;
  int digits = 0;
  for (; s < end; s++, digits++) {
    int d;
    if (*s >= '0' && *s <= '9')
      d = *s - '0';
    else if (*s >= 'a' && *s <= 'f')
      d = *s - 'a' + 10;
    else if (*s >= 'A' && *s <= 'F')
      d = *s - 'A' + 10;
    else
      break;
    if (digits >= 16) return false;
    v = v << 4 | (uint64_t)d;
  }
  if (digits == 0) return false;
  *p = s;
  *out = v;
  return true;
}

static bool add_entry(uint64_t start, uint64_t size, const char *name,
                      size_t name_len) {
  if (T.n == T.cap) {
    size_t cap = T.cap ? T.cap * 2 : 1024;
    entry *e = cprof__realloc(T.e, cap * sizeof *e);
    if (!e) return false;
    T.e = e;
    T.cap = cap;
  }
  if (T.names_len + name_len > T.names_cap) {
    size_t cap = T.names_cap ? T.names_cap : 16384;
    while (cap < T.names_len + name_len) cap *= 2;
    char *s = cprof__realloc(T.names, cap);
    if (!s) return false;
    T.names = s;
    T.names_cap = cap;
  }
  memcpy(T.names + T.names_len, name, name_len);
  T.e[T.n++] = (entry){start, size, T.seq++, (uint32_t)T.names_len,
                       (uint32_t)name_len};
  T.names_len += name_len;
  if (size > T.max_size) T.max_size = size;
  T.sorted = false;
  return true;
}

/* One line, without its newline. */
static bool parse_line(const char *s, const char *end) {
  uint64_t start, size;
  if (!hexnum(&s, end, &start) || s == end || *s != ' ') return true;
  while (s < end && *s == ' ') s++;
  if (!hexnum(&s, end, &size) || s == end || *s != ' ') return true;
  while (s < end && *s == ' ') s++;
  size_t len = (size_t)(end - s);
  while (len && (s[len - 1] == '\r' || s[len - 1] == ' ')) len--;
  if (len == 0 || size == 0 || size > MAX_SIZE || start + size < start)
    return true;
  if (len > CPROF__PERFMAP_NAME_MAX) len = CPROF__PERFMAP_NAME_MAX;
  /* A name is shown as is: control bytes become '?', so no line of a
   * text profile can be split by one. */
  char name[CPROF__PERFMAP_NAME_MAX];
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    name[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
  }
  if (T.n >= MAX_ENTRIES) {
    if (!T.full_warned) {
      T.full_warned = true;
      cprof__warn("perf map: more than %zu entries; the rest are not read",
                  MAX_ENTRIES);
    }
    return true;
  }
  return add_entry(start, size, name, len);
}

size_t cprof__perfmap_feed(const char *text, size_t len) {
  size_t done = 0;
  while (done < len) {
    const char *nl = memchr(text + done, '\n', len - done);
    if (!nl) break;
    if (!parse_line(text + done, nl)) return (size_t)-1;
    done = (size_t)(nl - text) + 1;
  }
  return done;
}

void cprof__perfmap_reset(void) {
  cprof__free(T.e);
  cprof__free(T.names);
  int enabled = T.enabled;
  memset(&T, 0, sizeof T);
  T.enabled = enabled;
}

static bool enabled(void) {
  if (T.enabled >= 0) return T.enabled;
  T.enabled = 0;
  if (getauxval(AT_SECURE)) return false;
  const char *v = cprof__env_str("CPROF_PERF_MAP");
  if (!v || strcmp(v, "on") == 0) {
    T.enabled = 1;
  } else if (strcmp(v, "off") != 0) {
    char q[CPROF__QUOTED_SIZE];
    cprof__warn("CPROF_PERF_MAP=%s: not on or off; JIT code stays unnamed",
                cprof__quoted(q, sizeof q, v));
  }
  return T.enabled;
}

/* Reads [T.taken, end) of fd into the table, whole lines only. */
static void read_from(int fd, size_t end) {
  char *buf = cprof__malloc(CHUNK);
  if (!buf) return;
  size_t have = 0;
  bool skipping = false; /* inside a line longer than a chunk */
  while (T.taken + have < end) {
    size_t want = CHUNK - have;
    if (want > end - T.taken - have) want = end - T.taken - have;
    ssize_t r = pread(fd, buf + have, want, (off_t)(T.taken + have));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
    size_t used;
    if (skipping) {
      const char *nl = memchr(buf, '\n', have);
      used = nl ? (size_t)(nl - buf) + 1 : have;
      if (nl) skipping = false;
    } else {
      used = cprof__perfmap_feed(buf, have);
      if (used == (size_t)-1) break;
      if (used == 0 && have == CHUNK) {
        used = have; /* no newline in a whole chunk: skip that line */
        skipping = true;
      }
    }
    memmove(buf, buf + used, have - used);
    have -= used;
    T.taken += used;
  }
  cprof__free(buf);
}

bool cprof__perfmap_refresh(void) {
  if (!enabled()) return false;
  pid_t pid = getpid();
  if (pid != T.pid) {
    bool had = T.n > 0;
    cprof__perfmap_reset();
    T.pid = pid;
    if (had) return true;
  }
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)pid);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
                          O_NOCTTY);
  if (fd < 0) return false;
  struct stat st;
  bool changed = false;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    close(fd);
    return false;
  }
  size_t size = st.st_size < 0 ? 0 : (size_t)st.st_size;
  if (size > CPROF__PERFMAP_MAX_BYTES) size = CPROF__PERFMAP_MAX_BYTES;
  /* Replaced, shrunk, or rewritten in place (the same size, a new
   * modification time): read whole. */
  bool rewritten = size == T.size &&
                   (st.st_mtim.tv_sec != T.mtime.tv_sec ||
                    st.st_mtim.tv_nsec != T.mtime.tv_nsec);
  if (st.st_dev != T.dev || st.st_ino != T.ino || size < T.taken ||
      rewritten) {
    changed = T.n > 0;
    cprof__perfmap_reset();
    T.pid = pid;
    T.dev = st.st_dev;
    T.ino = st.st_ino;
  }
  T.size = size;
  T.mtime = st.st_mtim;
  size_t before = T.n;
  if (size > T.taken) read_from(fd, size);
  close(fd);
  return changed || T.n != before;
}

static int by_start(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

const char *cprof__perfmap_lookup(uintptr_t pc, uintptr_t *start) {
  if (T.n == 0) return NULL;
  if (!T.sorted) {
    qsort(T.e, T.n, sizeof *T.e, by_start);
    T.sorted = true;
  }
  /* The first entry that starts above pc. */
  size_t lo = 0, hi = T.n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (T.e[mid].start <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  const entry *best = NULL;
  for (size_t i = lo, k = 0; i > 0 && k < SCAN_BACK; i--, k++) {
    const entry *e = &T.e[i - 1];
    if (pc - e->start >= T.max_size) break;
    if (pc - e->start < e->size && (!best || e->seq > best->seq)) best = e;
  }
  if (!best) return NULL;
  /* Names are kept without their NUL: one is written into a copy. */
  static char name[CPROF__PERFMAP_NAME_MAX + 1];
  memcpy(name, T.names + best->name_off, best->name_len);
  name[best->name_len] = '\0';
  *start = (uintptr_t)best->start;
  return name;
}

size_t cprof__perfmap_entries(void) { return T.n; }
