/*
 * The _exit, _Exit and daemon interposers: a process tree's root hands its tree
 * over (cprof__tree_hand_over, sink/tree.c), then the final dump
 * (cprof__dump_before_exit, sink/dump.c), then libc's (or a sanitizer's
 * interceptor's) underneath. Only getpid, atomics, futexes, a lock tried
 * but never waited for, and socket system calls run first, since _exit
 * may be called from a signal handler. A file of its own, in
 * the top layer: it calls the dump sink, and a libFuzzer target (whose
 * runtime calls _Exit) links cprof's parsers without it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cprof.h"
#include "exit.h"
#include "sink/dump.h"
#include "sink/tree.h"

typedef void (*exit_fn)(int);
static _Atomic(exit_fn) real_exit, real_Exit;

void cprof__exit_init(void) {
  /* Resolved whether or not dumps are configured: _exit is interposed for
   * the whole life of the process. */
  atomic_store(&real_exit, (exit_fn)dlsym(RTLD_NEXT, "_exit"));
  atomic_store(&real_Exit, (exit_fn)dlsym(RTLD_NEXT, "_Exit"));
}

CPROF__SIGNAL_SAFE static _Noreturn void exit_through(_Atomic(exit_fn) *real, int status) {
  /* A daemon's first stages leave by _exit (daemon(3) does): the
   * endpoint goes on in the process that lives on. */
  cprof__tree_hand_over();
  cprof__dump_before_exit();
  exit_fn f = atomic_load(real);
  if (f) f(status);
  for (;;) syscall(SYS_exit_group, status);
}

CPROF__SIGNAL_SAFE CPROF_EXPORT void _exit(int status) { exit_through(&real_exit, status); }

CPROF__SIGNAL_SAFE CPROF_EXPORT void _Exit(int status) { exit_through(&real_Exit, status); }

/* daemon(3), as glibc 2.36 writes it, but with its parent leaving through
 * the interposed _exit: glibc's own calls _exit inside libc, where no
 * interposer sees it, so a process tree's root that daemonizes would take
 * its endpoint down with it instead of handing it to the child. The
 * child's part is glibc's: a new session, "/" unless nochdir, and unless
 * noclose the standard descriptors on /dev/null (refused, ENODEV, when
 * /dev/null is not the null device). */
CPROF_EXPORT int daemon(int nochdir, int noclose) {
  pid_t p = fork();
  if (p < 0) return -1;
  if (p > 0) exit_through(&real_exit, 0);
  if (setsid() == -1) return -1;
  if (!nochdir) (void)!chdir("/");
  if (!noclose) {
    int fd = open("/dev/null", O_RDWR);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode) ||
        st.st_rdev != makedev(1, 3)) {
      close(fd);
      errno = ENODEV;
      return -1;
    }
    (void)dup2(fd, STDIN_FILENO);
    (void)dup2(fd, STDOUT_FILENO);
    (void)dup2(fd, STDERR_FILENO);
    if (fd > 2) close(fd);
  }
  return 0;
}
