/*
 * cprof's own descriptors and the interposers that keep the program off
 * them (fds.h). The registry is two bitmaps (cprof's descriptors, and
 * among them the HTTP endpoint's), read with single atomic loads so that
 * every interposer stays async-signal-safe and costs one load on the
 * program's descriptors. close and close_range skip a registered
 * descriptor when the caller is the program (not inside cprof's guard) and
 * report success; closefrom closes around them; dup2 and dup3 onto one
 * fail with EBUSY (Linux's errno for a target it cannot replace now) and
 * say so once on stderr; eventfd, pipe and pipe2 register what a thread
 * capturing for cprof creates. Everything else passes straight through to
 * the next definition (libc's, or a sanitizer's).
 *
 * A fork child closes the endpoint's descriptors in its fork handler, with
 * nothing but close: the threads that used them do not exist there.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/env.h"
#include "base/fork.h"
#include "base/lock.h"
#include "base/mem.h"
#include "source/fds.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Descriptors below this are tracked; cprof's sit just above
 * CPROF__FD_HIGH unless the program holds tens of thousands. */
#define FD_LIMIT 65536
#define WORD_BITS 64
#define NWORDS (FD_LIMIT / WORD_BITS)

static _Atomic unsigned long long own[NWORDS];
static _Atomic unsigned long long endpoint[NWORDS];

typedef int (*close_fn)(int);
typedef int (*close_range_fn)(unsigned, unsigned, int);
typedef void (*closefrom_fn)(int);
typedef int (*dup2_fn)(int, int);
typedef int (*dup3_fn)(int, int, int);
typedef int (*eventfd_fn)(unsigned, int);
typedef int (*pipe_fn)(int[2]);
typedef int (*pipe2_fn)(int[2], int);

enum {
  F_CLOSE,
  F_CLOSE_RANGE,
  F_CLOSEFROM,
  F_DUP2,
  F_DUP3,
  F_EVENTFD,
  F_PIPE,
  F_PIPE2,
  F_COUNT
};
static const char *const fn_names[F_COUNT] = {
    "close", "close_range", "closefrom", "dup2",
    "dup3",  "eventfd",     "pipe",      "pipe2",
};
static _Atomic(void *) next_fn[F_COUNT];

/* The next definition of an interposed name, or NULL when there is none
 * (close_range and closefrom before glibc 2.34). */
static void *next(int which) {
  void *fn = atomic_load_explicit(&next_fn[which], memory_order_acquire);
  if (!fn) {
    fn = dlsym(RTLD_NEXT, fn_names[which]);
    if (fn) atomic_store_explicit(&next_fn[which], fn, memory_order_release);
  }
  return fn;
}

static int real_close(int fd) {
  close_fn fn = (close_fn)next(F_CLOSE);
  return fn ? fn(fd) : (int)syscall(SYS_close, fd);
}

static int real_close_range(unsigned first, unsigned last, int flags) {
  close_range_fn fn = (close_range_fn)next(F_CLOSE_RANGE);
  if (fn) return fn(first, last, flags);
#ifdef SYS_close_range
  return (int)syscall(SYS_close_range, first, last, flags);
#else
  errno = ENOSYS;
  return -1;
#endif
}

static bool bit_get(_Atomic unsigned long long *map, int fd) {
  if (fd < 0 || fd >= FD_LIMIT) return false;
  return (atomic_load_explicit(&map[fd / WORD_BITS], memory_order_acquire) >>
          (fd % WORD_BITS)) & 1;
}

static void bit_set(_Atomic unsigned long long *map, int fd, bool on) {
  unsigned long long b = 1ULL << (fd % WORD_BITS);
  if (on)
    atomic_fetch_or(&map[fd / WORD_BITS], b);
  else
    atomic_fetch_and(&map[fd / WORD_BITS], ~b);
}

bool cprof__fd_is_own(int fd) { return bit_get(own, fd); }

static void forget(int fd) {
  if (fd < 0 || fd >= FD_LIMIT) return;
  bit_set(endpoint, fd, false);
  bit_set(own, fd, false);
}

/* The lowest registered descriptor in [from, to], or -1. */
static int next_own(unsigned from, unsigned to) {
  if (to >= FD_LIMIT) to = FD_LIMIT - 1;
  for (unsigned fd = from; fd <= to;) {
    unsigned long long w =
        atomic_load_explicit(&own[fd / WORD_BITS], memory_order_acquire) >>
        (fd % WORD_BITS);
    if (w) {
      fd += (unsigned)__builtin_ctzll(w);
      return fd <= to ? (int)fd : -1;
    }
    fd = (fd / WORD_BITS + 1) * WORD_BITS;
  }
  return -1;
}

/*
 * Registration and fork.
 */
static CPROF__FORK_LOCK pthread_mutex_t fd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fd_once = PTHREAD_ONCE_INIT;
static __thread int capture_kind CPROF__TLS;

static void before_fork(void) { cprof__lock(&fd_mu); }
static void parent_after_fork(void) { cprof__unlock(&fd_mu); }

/* The child has none of the endpoint's threads: its descriptors only
 * hold the port and the connections open, so they are closed, and nothing
 * else is done with them. */
static void child_after_fork(void) {
  for (int fd = next_own(0, FD_LIMIT - 1); fd >= 0;
       fd = next_own((unsigned)fd + 1, FD_LIMIT - 1))
    if (bit_get(endpoint, fd)) {
      forget(fd);
      real_close(fd);
    }
  pthread_mutex_init(&fd_mu, NULL);
}

static void install(void) {
  for (int i = 0; i < F_COUNT; i++) next(i);
  cprof__atfork(CPROF__FORK_FDS, before_fork, parent_after_fork,
                child_after_fork);
}

void cprof__fd_init(void) { pthread_once(&fd_once, install); }

void cprof__fd_begin(void) {
  cprof__fd_init();
  cprof__lock(&fd_mu);
}

bool cprof__fd_trybegin(void) {
  cprof__fd_init();
  return cprof__trylock(&fd_mu) == 0;
}

void cprof__fd_end(void) { cprof__unlock(&fd_mu); }

void cprof__fd_capture(int kind) {
  cprof__fd_init();
  capture_kind = kind;
}

int cprof__fd_adopt(int fd, int kind) {
  if (fd < 0) return fd;
  if (fd < CPROF__FD_HIGH) {
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, CPROF__FD_HIGH);
    if (hi >= 0) {
      real_close(fd);
      fd = hi;
    }
  }
  if (fd < FD_LIMIT) {
    bit_set(own, fd, true);
    if (kind == CPROF__FD_ENDPOINT) bit_set(endpoint, fd, true);
  }
  return fd;
}

int cprof__fd_close(int fd) {
  cprof__guard_enter();
  int rc = close(fd); /* through the interposers, a sanitizer's too */
  cprof__guard_exit();
  return rc;
}

/*
 * The interposers.
 */

CPROF_EXPORT int close(int fd) {
  if (bit_get(own, fd)) {
    if (!cprof__guarded()) return 0; /* the program's view: closed */
    forget(fd);
  }
  return real_close(fd);
}

/* Closes [first, last] but cprof's descriptors, as close_range would. */
static int close_around(unsigned first, unsigned last, int flags) {
  unsigned lo = first;
  for (int fd = next_own(first, last); fd >= 0;
       fd = next_own((unsigned)fd + 1, last)) {
    if ((unsigned)fd > lo && real_close_range(lo, (unsigned)fd - 1, flags) != 0)
      return -1;
    lo = (unsigned)fd + 1;
  }
  return lo <= last ? real_close_range(lo, last, flags) : 0;
}

CPROF_EXPORT int close_range(unsigned first, unsigned last, int flags) {
  /* Close-on-exec on cprof's descriptors is what they already have. */
  if (cprof__guarded() || (flags & (int)CLOSE_RANGE_CLOEXEC) || first > last)
    return real_close_range(first, last, flags);
  return close_around(first, last, flags);
}

CPROF_EXPORT void closefrom(int lowfd) {
  unsigned lo = lowfd < 0 ? 0 : (unsigned)lowfd;
  if (!cprof__guarded()) {
    for (int fd = next_own(lo, FD_LIMIT - 1); fd >= 0;
         fd = next_own((unsigned)fd + 1, FD_LIMIT - 1)) {
      if ((unsigned)fd > lo &&
          real_close_range(lo, (unsigned)fd - 1, 0) != 0)
        for (unsigned f = lo; f < (unsigned)fd; f++) real_close((int)f);
      lo = (unsigned)fd + 1;
    }
  }
  closefrom_fn fn = (closefrom_fn)next(F_CLOSEFROM);
  if (fn) {
    fn((int)lo);
  } else if (real_close_range(lo, UINT_MAX, 0) != 0) {
    long max = sysconf(_SC_OPEN_MAX);
    for (long f = lo; f < max; f++) real_close((int)f);
  }
}

/* "cprof: dup2 onto descriptor N refused ...", once, with one write. */
static atomic_bool refusal_said;
static void say_refused(const char *fn, int fd) {
  if (atomic_exchange(&refusal_said, true)) return;
  char line[200], num[12];
  int n = 0, k = 0;
  unsigned v = (unsigned)fd;
  do num[k++] = (char)('0' + v % 10), v /= 10; while (v);
  const char *parts[] = {"cprof: ", fn, " onto descriptor ", NULL,
                         " refused (EBUSY): the profiler holds it; further "
                         "refusals are not reported\n"};
  for (int i = 0; i < 5; i++) {
    if (!parts[i]) {
      while (k) line[n++] = num[--k];
      continue;
    }
    for (const char *s = parts[i]; *s && n < (int)sizeof line - 1; s++)
      line[n++] = *s;
  }
  cprof__write_guard g;
  cprof__write_guard_begin(&g);
  ssize_t w = write(STDERR_FILENO, line, (size_t)n);
  cprof__write_guard_end(&g, w < 0 ? errno : 0);
}

static bool refuse(const char *fn, int oldfd, int newfd) {
  if (oldfd == newfd || !bit_get(own, newfd) || cprof__guarded()) return false;
  say_refused(fn, newfd);
  errno = EBUSY;
  return true;
}

CPROF_EXPORT int dup2(int oldfd, int newfd) {
  if (refuse("dup2", oldfd, newfd)) return -1;
  dup2_fn fn = (dup2_fn)next(F_DUP2);
  return fn ? fn(oldfd, newfd) : (int)syscall(SYS_dup3, oldfd, newfd, 0);
}

CPROF_EXPORT int dup3(int oldfd, int newfd, int flags) {
  if (refuse("dup3", oldfd, newfd)) return -1;
  dup3_fn fn = (dup3_fn)next(F_DUP3);
  return fn ? fn(oldfd, newfd, flags)
            : (int)syscall(SYS_dup3, oldfd, newfd, flags);
}

CPROF_EXPORT int eventfd(unsigned initval, int flags) {
  eventfd_fn fn = (eventfd_fn)next(F_EVENTFD);
  if (!fn) {
    errno = ENOSYS;
    return -1;
  }
  int kind = capture_kind;
  if (!kind || !cprof__guarded()) return fn(initval, flags);
  cprof__fd_begin();
  int fd = cprof__fd_adopt(fn(initval, flags), kind);
  cprof__fd_end();
  return fd;
}

static int make_pipe(int fds[2], int flags, bool with_flags) {
  int rc;
  if (with_flags) {
    pipe2_fn fn = (pipe2_fn)next(F_PIPE2);
    rc = fn ? fn(fds, flags) : (int)syscall(SYS_pipe2, fds, flags);
  } else {
    pipe_fn fn = (pipe_fn)next(F_PIPE);
    rc = fn ? fn(fds) : (int)syscall(SYS_pipe2, fds, 0);
  }
  return rc;
}

static int pipe_for(int fds[2], int flags, bool with_flags) {
  int kind = capture_kind;
  if (!kind || !cprof__guarded()) return make_pipe(fds, flags, with_flags);
  cprof__fd_begin();
  int rc = make_pipe(fds, flags, with_flags);
  if (rc == 0) {
    fds[0] = cprof__fd_adopt(fds[0], kind);
    fds[1] = cprof__fd_adopt(fds[1], kind);
  }
  cprof__fd_end();
  return rc;
}

CPROF_EXPORT int pipe(int fds[2]) { return pipe_for(fds, 0, false); }

CPROF_EXPORT int pipe2(int fds[2], int flags) {
  return pipe_for(fds, flags, true);
}
