/*
 * The one answer to "is this signal taken": whether a disposition installs
 * a function of the program's (neither SIG_DFL nor SIG_IGN, nor cprof's
 * own handler). The CPU profiler and the goroutine profile refuse a signal
 * the program handles; the dumper chains to the program's handler. Pure;
 * any context.
 */
#ifndef CPROF_SIG_H
#define CPROF_SIG_H

#include <signal.h>
#include <stdbool.h>

/* True when sa installs a handler function: neither SIG_DFL nor SIG_IGN,
 * which the kernel reads the same whatever sa_flags say. */
static inline bool cprof__sig_is_function(const struct sigaction *sa) {
  return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

/* True when sa installs a function other than mine. */
static inline bool cprof__sig_taken(const struct sigaction *sa,
                                    void (*mine)(int, siginfo_t *, void *)) {
  if ((sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == mine) return false;
  return cprof__sig_is_function(sa);
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
