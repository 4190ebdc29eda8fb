/*
 * The signals cprof uses are ones the program does not (sig_interpose.c).
 *
 * An owner (the CPU timers, the thread sampler) claims a free signal: its
 * preferred one (SIGPROF, SIGRTMIN+5) while that has the default
 * disposition, otherwise a real-time signal that has it, or exactly the
 * one a setting names. Every way the program changes a disposition
 * through libc (sigaction, signal, sigset, bsd_signal, sysv_signal,
 * sigignore) first has the owner of that signal move to another free one
 * (its `taken` callback), so none of cprof's signals can reach the
 * program's handler or default action; a change made with a raw system
 * call is seen at the owner's next check (cprof__sig_still_ours). A
 * program that waits for a signal with signalfd is taken to use it; one
 * that waits with sigwait, sigwaitinfo or sigtimedwait never receives one
 * of cprof's (they are consumed and the wait goes on).
 *
 * While cprof owns signals, every handler the program installs with
 * SA_ONSTACK has them added to its sa_mask: cprof's signals never land on
 * an alternate stack whose handler is running (the kernel's frame alone
 * may not fit: 3.4 KB with AVX-512). The program reading a disposition
 * back sees its own mask and, for an owned signal, the disposition cprof
 * found there.
 *
 * Normal context, except cprof__sig_from_cprof and cprof__sig_forward,
 * which handlers call.
 */
#ifndef CPROF_SIGNALS_H
#define CPROF_SIGNALS_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/internal.h"
#include "base/sig.h"


typedef struct cprof__sigown {
  const char *what; /* "CPU profiling": for the lines on stderr */
  void (*handler)(int, siginfo_t *, void *);
  int flags;      /* sa_flags besides SA_SIGINFO */
  bool full_mask; /* block every signal while the handler runs */
  int fixed;      /* the one signal a setting names, 0 for any free one */
  int preferred;  /* tried first when fixed is 0 */
  /* The program is taking this owner's signal (a disposition change
   * through libc, or a wait on it): move to another with
   * cprof__sig_move, or stop. Called with no lock of this module held,
   * before the program's change is made. */
  void (*taken)(void);
  _Atomic int signo; /* the signal held, 0 for none */
  atomic_bool warned; /* the line on stderr said, until a claim succeeds */
} cprof__sigown;

/* Sets the module up (its fork handlers); the library's constructor
 * calls it before anything can claim a signal. */
CPROF__HIDDEN void cprof__sig_init(void);

/* Installs o's handler on a free signal and returns it (o->signo), or 0
 * with one line on stderr saying why (once, until a claim succeeds). Returns o->signo at once while it
 * still holds its handler. */
CPROF__HIDDEN int cprof__sig_claim(cprof__sigown *o);

/* Moves o to another free signal: returns the new one (o->signo), or 0
 * when none is free (one line on stderr). The old one is not released:
 * the owner moves its timers, then calls cprof__sig_drop(o, old). */
CPROF__HIDDEN int cprof__sig_move(cprof__sigown *o);

/* Gives sig back: when it still holds o's handler, its pending
 * instances are discarded (in every thread) and the disposition cprof
 * found is put back; the masks of the program's SA_ONSTACK handlers lose
 * it. Clears o->signo when it was sig. */
CPROF__HIDDEN void cprof__sig_drop(cprof__sigown *o, int sig);

/* Forgets sig, which the program took with a raw rt_sigaction: its
 * disposition is the program's now and stays as it is; the masks of the
 * program's SA_ONSTACK handlers lose it. */
CPROF__HIDDEN void cprof__sig_forget(cprof__sigown *o, int sig);

/* True when o's signal still has o's handler (a raw rt_sigaction may
 * have replaced it). */
CPROF__HIDDEN bool cprof__sig_still_ours(const cprof__sigown *o);

/* cprof__sig_from_cprof (base/sig.h) tells an owner's handler whether a
 * signal came from cprof's own timers. */

/* A signal that is not cprof's reached its handler (kill, the program's
 * own itimer or timer): it gets what it would have got without cprof, the
 * default action (every signal cprof claims had the default disposition):
 * the disposition goes back to SIG_DFL and the signal, with its siginfo,
 * is queued to this thread again, to be delivered when the handler
 * returns. Async-signal-safe. */
CPROF__HIDDEN void cprof__sig_forward(int sig, const siginfo_t *si);

/* A disposition of cprof's own that is not an owned signal's (the
 * dumper's handlers), set or queried as the program's would be: an owner
 * of sig moves to another signal, an SA_ONSTACK handler gets the owned
 * signals in its mask, a query of an owned signal answers what the
 * program left there; but through the real sigaction (base/real.h), never
 * cprof's exported interposer, and no watcher hears of it. Normal
 * context; as sigaction returns. */
CPROF__HIDDEN int cprof__sig_set_own(int sig, const struct sigaction *act,
                                     struct sigaction *old);

/* Another part of cprof handles sig for the program (a dump signal):
 * after each change the program makes to sig's disposition through libc
 * (sigaction, signal and its variants, sigignore), watcher(sig) is
 * called; NULL stops watching. The watcher must be async-signal-safe: a
 * program may change a disposition in a signal handler. */
CPROF__HIDDEN void cprof__sig_watch(int sig, void (*watcher)(int sig));

/* Reads a signal setting: "SIGPROF"/"PROF", "SIGRTMIN+N", "SIGRTMAX-N"
 * or a number; 0 (with one line on stderr) when it is not one cprof may
 * use (a real-time signal or SIGPROF). */
CPROF__HIDDEN int cprof__sig_parse(const char *name, const char *value);

#endif
