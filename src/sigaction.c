/*
 * The sigaction and signal interposers: a program that installs its own
 * SIGPROF handler while cprof's CPU timers run (its own profiler, started
 * after cprof's) would otherwise receive cprof's timer signals, about 500
 * in 2 s at 1000 Hz. The interposers tell the CPU profiler first, which
 * stops its timers and says so in one line, then install the program's
 * handler unchanged. Every other call passes straight through to the next
 * definition (libc's, or a sanitizer's). Normal context: sigaction and
 * signal are async-signal-safe, and a call from a signal handler takes the
 * pass-through path unless it installs a SIGPROF handler while cprof's
 * timers run (then it takes cprof's engine lock: as unsafe as the
 * program's own non-signal-safe call would be elsewhere; documented).
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>

#include "cpu.h"
#include "mem.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef __sighandler_t (*signal_fn)(int, __sighandler_t);

static _Atomic(sigaction_fn) real_sigaction;
static _Atomic(signal_fn) real_signal;

static bool takes_sigprof(int sig, bool installs, bool own) {
  return sig == SIGPROF && installs && !own && !cprof__guarded();
}

CPROF_EXPORT int sigaction(int sig, const struct sigaction *act,
                           struct sigaction *old) {
  sigaction_fn fn = atomic_load_explicit(&real_sigaction, memory_order_acquire);
  if (!fn) {
    fn = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (!fn) {
      errno = ENOSYS;
      return -1;
    }
    atomic_store_explicit(&real_sigaction, fn, memory_order_release);
  }
  if (takes_sigprof(sig, act != NULL, cprof__cpu_is_own_handler(act)))
    cprof__cpu_handler_replaced();
  return fn(sig, act, old);
}

CPROF_EXPORT __sighandler_t signal(int sig, __sighandler_t handler) {
  signal_fn fn = atomic_load_explicit(&real_signal, memory_order_acquire);
  if (!fn) {
    fn = (signal_fn)dlsym(RTLD_NEXT, "signal");
    if (!fn) {
      errno = ENOSYS;
      return SIG_ERR;
    }
    atomic_store_explicit(&real_signal, fn, memory_order_release);
  }
  if (takes_sigprof(sig, handler != SIG_DFL && handler != SIG_IGN &&
                             handler != SIG_ERR,
                    false))
    cprof__cpu_handler_replaced();
  return fn(sig, handler);
}
