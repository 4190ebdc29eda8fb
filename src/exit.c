/*
 * The _exit and _Exit interposers: the final dump before them
 * (cprof__dump_before_exit, sink/dump.c), then libc's (or a sanitizer's
 * interceptor's) underneath. Only getpid, atomics and futexes run first,
 * since _exit may be called from a signal handler. A file of its own, in
 * the top layer: it calls the dump sink, and a libFuzzer target (whose
 * runtime calls _Exit) links cprof's parsers without it.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cprof.h"
#include "exit.h"
#include "sink/dump.h"

typedef void (*exit_fn)(int);
static _Atomic(exit_fn) real_exit, real_Exit;

void cprof__exit_init(void) {
  /* Resolved whether or not dumps are configured: _exit is interposed for
   * the whole life of the process. */
  atomic_store(&real_exit, (exit_fn)dlsym(RTLD_NEXT, "_exit"));
  atomic_store(&real_Exit, (exit_fn)dlsym(RTLD_NEXT, "_Exit"));
}

static _Noreturn void exit_through(_Atomic(exit_fn) *real, int status) {
  cprof__dump_before_exit();
  exit_fn f = atomic_load(real);
  if (f) f(status);
  for (;;) syscall(SYS_exit_group, status);
}

CPROF_EXPORT void _exit(int status) { exit_through(&real_exit, status); }

CPROF_EXPORT void _Exit(int status) { exit_through(&real_Exit, status); }
