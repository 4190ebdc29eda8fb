/*
 * The /proc reader (proc.h). Calls libc's file functions and base/mem;
 * normal context only.
 */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/proc.h"

ssize_t cprof__proc_read(int dirfd, const char *path, char *buf,
                         size_t size) {
  if (size == 0) return -1;
  int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len + 1 < size) {
    ssize_t r = read(fd, buf + len, size - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      close(fd);
      return -1;
    }
    if (r == 0) break;
    len += (size_t)r;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

/* Read with getdents64 into a buffer on the stack: opendir's own buffer
 * is 32 KiB of the process's heap per listing. */
int cprof__proc_tids(pid_t **out, size_t *count) {
  int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return CPROF_ESYS;
  size_t cap = 64, n = 0;
  pid_t *v = cprof__malloc(cap * sizeof *v);
  int err = v ? 0 : CPROF_ENOMEM;
  _Alignas(8) char buf[4096];
  long got = 0;
  while (!err && (got = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
    for (long at = 0; !err && at < got;) {
      const struct dirent64 *e = (const struct dirent64 *)(buf + at);
      at += e->d_reclen;
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      char *end;
      long tid = strtol(e->d_name, &end, 10);
      if (*end != '\0' || tid <= 0) continue;
      if (n == cap) {
        pid_t *w = cprof__realloc(v, 2 * cap * sizeof *v);
        if (!w) {
          err = CPROF_ENOMEM;
          break;
        }
        v = w;
        cap *= 2;
      }
      v[n++] = (pid_t)tid;
    }
  }
  if (!err && got < 0) err = CPROF_ESYS;
  close(fd);
  if (err) {
    cprof__free(v);
    return err;
  }
  *out = v;
  *count = n;
  return 0;
}

bool cprof__proc_thread_name(pid_t tid, char *out, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
  if (cprof__proc_read(AT_FDCWD, path, out, len) <= 0) return false;
  out[strcspn(out, "\n")] = '\0';
  return true;
}

bool cprof__seccomp_filtered(void) {
  char buf[4096];
  if (cprof__proc_read(AT_FDCWD, "/proc/thread-self/status", buf, sizeof buf) <= 0 &&
      cprof__proc_read(AT_FDCWD, "/proc/self/status", buf, sizeof buf) <= 0)
    return true;
  const char *p = strstr(buf, "\nSeccomp:");
  if (!p) return false; /* a kernel without seccomp */
  p += strlen("\nSeccomp:");
  while (*p == ' ' || *p == '\t') p++;
  return *p != '0';
}
