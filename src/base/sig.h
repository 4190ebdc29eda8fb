/*
 * Small facts about signals every layer shares: whether a disposition
 * installs a function (the dumper chains to the program's; the signal
 * owner, source/signals.h, adds its signals to SA_ONSTACK handlers' masks),
 * how cprof's own timer signals are told apart, and the kernel's struct
 * sigaction for the raw system call. Pure; any context.
 */
#ifndef CPROF_SIG_H
#define CPROF_SIG_H

#include <signal.h>
#include <stdbool.h>
#include <sys/syscall.h>

#include "base/internal.h"
#include "base/sys.h"

/* True when sa installs a handler function: neither SIG_DFL nor SIG_IGN,
 * which the kernel reads the same whatever sa_flags say. */
CPROF__SIGNAL_SAFE static inline bool cprof__sig_is_function(
    const struct sigaction *sa) {
  return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

/* The kernel's struct sigaction (x86-64, AArch64), for rt_sigaction made
 * directly: setting SIG_DFL needs no restorer. */
struct cprof__ksigaction {
  void *handler;
  unsigned long flags;
  void *restorer;
  unsigned long mask;
};

/* Puts sig's default disposition back with the raw system call, never
 * through a sigaction interposer (cprof's or another's) or the loader:
 * for handlers and the code a fork child runs before exec. */
__attribute__((always_inline)) static inline void cprof__sig_default(int sig) {
  struct cprof__ksigaction dfl = {0};
  dfl.handler = (void *)SIG_DFL;
  cprof__sys4(SYS_rt_sigaction, sig, (long)&dfl, 0, 8);
}

/* The value every timer of cprof's carries (sigev_value.sival_int): a
 * signal with SI_TIMER and this value is cprof's own. */
#define CPROF__SIG_COOKIE 0x63707266 /* "cprf" */

/* Whether a signal a handler of cprof's received came from cprof's own
 * timers (source/signals.h). Async-signal-safe. */
__attribute__((always_inline)) static inline bool cprof__sig_from_cprof(const siginfo_t *si) {
  return si->si_code == SI_TIMER && si->si_value.sival_int == CPROF__SIG_COOKIE;
}

#endif
