/*
 * The inflated-debug-file cache (debug_cache.h). Files are reached through
 * a descriptor of the cache directory (openat, O_NOFOLLOW), so nothing
 * under it is followed through a link; an entry is written under a
 * temporary name created O_EXCL and renamed into place, so a reader never
 * sees half of one and two writers never share one. A temporary name left
 * by a writer that died is taken over after STALE_SECONDS.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/env.h"
#include "base/mem.h"
#include "encode/debug_cache.h"

#define DEFAULT_MB 512
#define STALE_SECONDS 120
#define CHUNK ((size_t)256 * 1024)
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

void cprof__debug_cache_env_init(void) { pthread_once(&once, read_settings); }

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
static int open_dir(void) {
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

static void entry_name(char *out, size_t cap, const unsigned char *bits,
                       int n, const char *suffix) {
  size_t len = 0;
  for (int i = 0; i < n && len + 3 < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%02x", bits[i]);
  snprintf(out + len, cap - len, "%s", suffix);
}

/* Writes all of buf at off. */
static bool write_at(int fd, const void *buf, size_t len, off_t off) {
  const unsigned char *p = buf;
  while (len > 0) {
    ssize_t w = pwrite(fd, p, len, off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    len -= (size_t)w;
    off += w;
  }
  return true;
}

/* Inflates the zlib stream in[0..len) to out at off; true when it gives
 * exactly size bytes. */
static bool inflate_to(int out, const unsigned char *in, size_t len,
                       unsigned long long size, off_t off, unsigned char *buf) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit(&z) != Z_OK) return false;
  unsigned long long done = 0;
  int rc = Z_OK;
  bool ok = true;
  while (ok && rc != Z_STREAM_END) {
    if (z.avail_in == 0) {
      size_t take = len > UINT_MAX ? UINT_MAX : len;
      if (take == 0) break;
      z.next_in = (Bytef *)(uintptr_t)in;
      z.avail_in = (uInt)take;
      in += take;
      len -= take;
    }
    z.next_out = buf;
    z.avail_out = (uInt)CHUNK;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) ok = false;
    size_t got = CHUNK - z.avail_out;
    if (got > size - done) ok = false;
    if (ok && got) ok = write_at(out, buf, got, off + (off_t)done);
    done += got;
    if (ok && rc == Z_OK && got == 0 && z.avail_in == 0 && len == 0)
      ok = false; /* input ended before the stream did */
  }
  inflateEnd(&z);
  return ok && rc == Z_STREAM_END && done == size;
}

int cprof__debug_cache_inflate(const unsigned char *image, size_t len,
                               int out, unsigned long long max) {
  Elf64_Ehdr eh;
  if (len < sizeof eh) return -1;
  memcpy(&eh, image, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      eh.e_shoff > len || (len - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
    return -1;
  size_t nsh = eh.e_shnum;
  Elf64_Shdr *sh = cprof__malloc(nsh * sizeof *sh);
  if (!sh) return -1;
  memcpy(sh, image + eh.e_shoff, nsh * sizeof *sh);
  unsigned long long total = (len + 15) & ~15ull;
  size_t compressed = 0;
  int rc = -1;
  if (total > max) goto done;
  for (size_t i = 0; i < nsh; i++) {
    if (!(sh[i].sh_flags & SHF_COMPRESSED) || sh[i].sh_type == SHT_NOBITS)
      continue;
    Elf64_Chdr ch;
    if (sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset ||
        sh[i].sh_size < sizeof ch)
      goto done;
    memcpy(&ch, image + sh[i].sh_offset, sizeof ch);
    if (ch.ch_type != ELFCOMPRESS_ZLIB) goto done; /* libdw's reading */
    if (ch.ch_size > max || total > max - ch.ch_size) goto done;
    total = (total + ch.ch_size + 15) & ~15ull;
    compressed++;
  }
  if (compressed == 0) {
    rc = 0;
    goto done;
  }
  if (nsh * sizeof *sh > max || total > max - nsh * sizeof *sh) goto done;
  if (out < 0) { /* only asked whether there is a copy to write */
    rc = 1;
    goto done;
  }
  unsigned char *buf = cprof__malloc(CHUNK);
  if (!buf) goto done;
  bool ok = write_at(out, image, len, 0);
  off_t at = (off_t)((len + 15) & ~(size_t)15);
  for (size_t i = 0; ok && i < nsh; i++) {
    if (!(sh[i].sh_flags & SHF_COMPRESSED) || sh[i].sh_type == SHT_NOBITS)
      continue;
    Elf64_Chdr ch;
    memcpy(&ch, image + sh[i].sh_offset, sizeof ch);
    ok = inflate_to(out, image + sh[i].sh_offset + sizeof ch,
                    sh[i].sh_size - sizeof ch, ch.ch_size, at, buf);
    sh[i].sh_offset = (Elf64_Off)at;
    sh[i].sh_size = ch.ch_size;
    sh[i].sh_flags &= ~(Elf64_Xword)SHF_COMPRESSED;
    sh[i].sh_addralign = ch.ch_addralign;
    at = (off_t)(((unsigned long long)at + ch.ch_size + 15) & ~15ull);
  }
  cprof__free(buf);
  eh.e_shoff = (Elf64_Off)at;
  if (ok) ok = write_at(out, sh, nsh * sizeof *sh, at);
  if (ok) ok = write_at(out, &eh, sizeof eh, 0);
  rc = ok ? 1 : -1;
done:
  cprof__free(sh);
  return rc;
}

/* The entries' total size, and the oldest ones removed (by the time they
 * were last used) until it is at most the bound; keep is never removed. */
static void evict(int d, const char *keep) {
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
    if (l < 5 || (strcmp(de->d_name + l - 4, ".sym") != 0 &&
                  (l < 7 || strcmp(de->d_name + l - 6, ".debug") != 0)))
      continue;
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
  cprof__free(e);
}

/* Opens the entry name under d when it is a regular file of ours within
 * the bound; marks it used. */
static int open_entry(int d, const char *name, struct stat *st) {
  int fd = openat(d, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || !owned(st) ||
      st->st_size <= 0 || (unsigned long long)st->st_size > cache_max) {
    close(fd);
    return -1;
  }
  (void)futimens(fd, NULL); /* last used now, for eviction */
  return fd;
}

/* Creates the temporary file for entry name under d: -1 when another
 * process is writing it (one that died has its file taken over after
 * STALE_SECONDS). tmp gets its name. */
static int create_temporary(int d, const char *name, char *tmp, size_t cap) {
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

/* Writes the entry name from the file open at src (status sst): 1 written,
 * 0 nothing to write (not compressed), -1 not written. */
static int write_entry(int d, const char *name, int src,
                       const struct stat *sst) {
  if (sst->st_size <= 0 || (unsigned long long)sst->st_size > cache_max)
    return -1;
  size_t len = (size_t)sst->st_size;
  void *image = mmap(NULL, len, PROT_READ, MAP_PRIVATE, src, 0);
  if (image == MAP_FAILED) return -1;
  int rc = cprof__debug_cache_inflate(image, len, -1, cache_max);
  if (rc != 1) {
    munmap(image, len);
    return rc;
  }
  char tmp[2 * 64 + 32];
  int out = create_temporary(d, name, tmp, sizeof tmp);
  if (out < 0) {
    munmap(image, len);
    return -1;
  }
  rc = cprof__debug_cache_inflate(image, len, out, cache_max);
  munmap(image, len);
  if (close(out) != 0 && rc == 1) rc = -1;
  if (rc == 1 && renameat(d, tmp, d, name) != 0) rc = -1;
  if (rc != 1) (void)unlinkat(d, tmp, 0);
  if (rc == 1) evict(d, name);
  return rc;
}

int cprof__debug_cache_open(int fd, const struct stat *st,
                            const unsigned char *bits, int n, char *path,
                            size_t cap, struct stat *out_st) {
  cprof__debug_cache_env_init();
  if (!cache_on || n < 1 || n > 64) return -1;
  char name[2 * 64 + 16];
  entry_name(name, sizeof name, bits, n, ".debug");
  int d = open_dir();
  if (d < 0) return -1;
  int c = open_entry(d, name, out_st);
  if (c < 0 && write_entry(d, name, fd, st) == 1)
    c = open_entry(d, name, out_st);
  close(d);
  if (c >= 0 &&
      (size_t)snprintf(path, cap, "%s/%s", cache_dir, name) >= cap) {
    close(c);
    c = -1;
  }
  return c;
}

void cprof__debug_cache_drop(const unsigned char *bits, int n) {
  cprof__debug_cache_env_init();
  if (!cache_on || n < 1 || n > 64) return;
  char name[2 * 64 + 16];
  entry_name(name, sizeof name, bits, n, ".debug");
  int d = open_dir();
  if (d < 0) return;
  (void)unlinkat(d, name, 0);
  close(d);
}

bool cprof__debug_cache_on(void) {
  cprof__debug_cache_env_init();
  return cache_on;
}

/* An entry's name: hex digits, a dot and a short suffix, nothing else. */
static bool entry_name_ok(const char *name) {
  size_t n = strlen(name), digits = strspn(name, "0123456789abcdef");
  return n < 2 * 64 + 16 && digits >= 2 && name[digits] == '.' &&
         strspn(name + digits + 1, "abcdefghijklmnopqrstuvwxyz") ==
             n - digits - 1;
}

bool cprof__debug_cache_read(const char *name, size_t max, cprof_buf *out) {
  out->len = 0;
  if (!cprof__debug_cache_on() || !entry_name_ok(name)) return false;
  int d = open_dir();
  if (d < 0) return false;
  struct stat st;
  int fd = open_entry(d, name, &st);
  close(d);
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
  while (ok && out->len < len) {
    ssize_t r = pread(fd, out->data + out->len, len - out->len,
                      (off_t)out->len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) ok = false;
    else out->len += (size_t)r;
  }
  close(fd);
  if (!ok) out->len = 0;
  return ok;
}

void cprof__debug_cache_write(const char *name, const void *data,
                              size_t len) {
  if (!cprof__debug_cache_on() || !entry_name_ok(name) ||
      (unsigned long long)len > cache_max)
    return;
  int d = open_dir();
  if (d < 0) return;
  char tmp[2 * 64 + 32];
  int out = create_temporary(d, name, tmp, sizeof tmp);
  if (out >= 0) {
    bool ok = write_at(out, data, len, 0);
    if (close(out) != 0) ok = false;
    if (ok && renameat(d, tmp, d, name) == 0)
      evict(d, name);
    else
      (void)unlinkat(d, tmp, 0);
  }
  close(d);
}
