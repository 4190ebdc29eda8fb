/*
 * The /proc reader (proc.h). Calls libc's file functions and base/mem;
 * normal context only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int cprof__proc_tids(pid_t **out, size_t *count) {
  /* opendir allocates through the process's malloc. */
  cprof__guard_enter();
  DIR *d = opendir("/proc/self/task");
  cprof__guard_exit();
  if (!d) return CPROF_ESYS;
  pid_t *v = NULL;
  size_t len = 0, cap = 0;
  int err = 0;
  struct dirent *e;
  while (!err && (e = readdir(d)) != NULL) {
    char *end;
    long tid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || tid <= 0 || e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    if (len == cap) {
      cap = cap ? cap * 2 : 64;
      pid_t *nv = cprof__realloc(v, cap * sizeof *nv);
      if (!nv) {
        err = CPROF_ENOMEM;
        break;
      }
      v = nv;
    }
    v[len++] = (pid_t)tid;
  }
  cprof__guard_enter();
  closedir(d);
  cprof__guard_exit();
  if (err) {
    cprof__free(v);
    return err;
  }
  *out = v;
  *count = len;
  return 0;
}

bool cprof__proc_thread_name(pid_t tid, char *out, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
  if (cprof__proc_read(AT_FDCWD, path, out, len) <= 0) return false;
  out[strcspn(out, "\n")] = '\0';
  return true;
}
