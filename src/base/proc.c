/*
 * The /proc reader (proc.h). Calls libc's file functions and base/mem;
 * normal context only.
 */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/proc.h"
#include "base/sig.h"
#include "base/sys.h"

static ssize_t read_small(int dirfd, const char *path, char *buf,
                          size_t size, bool line) {
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
    /* The line is whole: the read that would find the end of the file is
     * a system call saved (one a thread, every collection). */
    if (line && buf[len - 1] == '\n') break;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

ssize_t cprof__proc_read(int dirfd, const char *path, char *buf,
                         size_t size) {
  return read_small(dirfd, path, buf, size, false);
}

ssize_t cprof__proc_read_line(int dirfd, const char *path, char *buf,
                              size_t size) {
  return read_small(dirfd, path, buf, size, true);
}

/* The calling thread's batch (cprof__proc_tids_batch): its one listing,
 * taken by the first call inside it. */
static __thread struct {
  bool on;
  pid_t *tids;
  size_t n;
} batch;

void cprof__proc_tids_batch_begin(void) { batch.on = true; }

void cprof__proc_tids_batch_end(void) {
  cprof__free(batch.tids);
  batch.tids = NULL;
  batch.n = 0;
  batch.on = false;
}

static int list_tids(int dirfd, pid_t **out, size_t *count);

int cprof__proc_tids(pid_t **out, size_t *count) {
  return cprof__proc_tids_at(-1, out, count);
}

int cprof__proc_tids_at(int dirfd, pid_t **out, size_t *count) {
  if (!batch.on) return list_tids(dirfd, out, count);
  if (!batch.tids) {
    int err = list_tids(dirfd, &batch.tids, &batch.n);
    if (err) return err;
  }
  pid_t *v = cprof__malloc((batch.n ? batch.n : 1) * sizeof *v);
  if (!v) return CPROF_ENOMEM;
  memcpy(v, batch.tids, batch.n * sizeof *v);
  *out = v;
  *count = batch.n;
  return 0;
}

/* Read with getdents64 into a buffer on the stack: opendir's own buffer
 * is 32 KiB of the process's heap per listing. Through dirfd when it is
 * not -1 (left open), else through a descriptor of its own. */
static int list_tids(int dirfd, pid_t **out, size_t *count) {
  int fd = dirfd >= 0
               ? dirfd
               : open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
  if (fd != dirfd) close(fd);
  if (err) {
    cprof__free(v);
    return err;
  }
  *out = v;
  *count = n;
  return 0;
}

bool cprof__proc_thread_name(pid_t tid, char *out, size_t len) {
  /* The calling thread's own without /proc: each open of a task's file
   * leaves entries the kernel walks again when the process is reaped. */
  if (tid == cprof__sys_gettid() && len > 0) {
    char own[16] = {0};
    if (prctl(PR_GET_NAME, (unsigned long)own, 0, 0, 0) == 0) {
      snprintf(out, len, "%s", own);
      return true;
    }
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
  if (cprof__proc_read(AT_FDCWD, path, out, len) <= 0) return false;
  out[strcspn(out, "\n")] = '\0';
  return true;
}

/* The number after "\nKEY:" and its blanks in text, or -1 (none, or no
 * digits). A few lines of code of its own, not strstr and strtol: in a
 * fork child that calls neither, their first calls cost page faults. */
static long status_field(const char *text, const char *key) {
  size_t klen = strlen(key);
  for (const char *p = text; (p = strchr(p, '\n')) != NULL;) {
    p++;
    if (strncmp(p, key, klen) != 0 || p[klen] != ':') continue;
    p += klen + 1;
    while (*p == ' ' || *p == '\t') p++;
    if (*p < '0' || *p > '9') return -1;
    long v = 0;
    while (*p >= '0' && *p <= '9' && v < 1000000000) v = v * 10 + (*p++ - '0');
    return v;
  }
  return -1;
}

/* The calling thread's seccomp mode (0 none, 1 strict, 2 filter) and its
 * number of filters (-1 where the kernel does not say); mode -1 when the
 * status cannot be read. The main thread reads /proc/self/status, which
 * is its own (and, in a fork child, leaves the kernel fewer entries to
 * drop when the child is reaped); another, /proc/thread-self/status. */
static int seccomp_state(long *filters) {
  char buf[4096];
  *filters = -1;
  bool main_thread = cprof__sys_gettid() == getpid();
  if (cprof__proc_read(AT_FDCWD,
                       main_thread ? "/proc/self/status"
                                   : "/proc/thread-self/status",
                       buf, sizeof buf) <= 0 &&
      cprof__proc_read(AT_FDCWD, "/proc/self/status", buf, sizeof buf) <= 0)
    return -1;
  long mode = status_field(buf, "Seccomp");
  if (mode < 0) return 0; /* a kernel without seccomp */
  *filters = status_field(buf, "Seccomp_filters");
  return (int)mode;
}

bool cprof__seccomp_filtered(void) {
  long filters;
  return seccomp_state(&filters) != 0;
}

/*
 * Whether a child process that inherits this thread's filters can create a
 * timer: a raw clone (none of the program's fork handlers run, and with no
 * exit signal, no SIGCHLD reaches it, nor does its wait() see the child)
 * resets SIGSYS to its default action (a filter's SECCOMP_RET_TRAP must
 * not run the program's handler in it), calls timer_create and exits with
 * its result. Killed by the filter, or refused, it says no. Only raw system
 * calls run in the child, on its copy of this stack.
 */
__attribute__((noinline, no_sanitize("address", "thread", "undefined")))
static bool probe_timer_create(void) {
  long pid = cprof__sys6(SYS_clone, 0, 0, 0, 0, 0, 0);
  if (pid == 0) {
    cprof__sig_default(SIGSYS);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_NONE;
    int id;
    long r = cprof__sys4(SYS_timer_create, CLOCK_THREAD_CPUTIME_ID, (long)&sev,
                         (long)&id, 0);
    cprof__sys4(SYS_exit_group, r == 0 ? 0 : 1, 0, 0, 0);
    for (;;) {
    }
  }
  if (pid < 0) return false;
  int status = 0;
  long w;
  do {
    w = cprof__sys4(SYS_wait4, pid, (long)&status, __WALL, 0);
  } while (w == -EINTR);
  return w == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The filter counts found to allow timer_create, and to refuse it. */
static _Atomic long allowed_at = -2, refused_at = -2;

bool cprof__timer_create_allowed(void) {
  long filters;
  int mode = seccomp_state(&filters);
  if (mode == 0) return true;
  if (mode == 1) return false; /* strict mode */
  /* A filter, or no status to read (no /proc: a chroot), where the probe
   * answers as well; its answer is kept for the filter count read (-1
   * when none could be). */
  if (filters == atomic_load(&allowed_at)) return true;
  if (filters == atomic_load(&refused_at)) return false;
  bool ok = probe_timer_create();
  atomic_store(ok ? &allowed_at : &refused_at, filters);
  return ok;
}
