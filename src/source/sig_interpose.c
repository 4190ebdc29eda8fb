/*
 * The signals cprof uses, and the interposers that keep them out of the
 * program's way (signals.h). The disposition interposers (sigaction,
 * signal, sigset, bsd_signal, sysv_signal, sigignore) have the owner of a
 * signal the program is changing move off it first, then make the
 * program's change unchanged but for the SA_ONSTACK masks; the wait
 * interposers (sigwait, sigwaitinfo, sigtimedwait) consume cprof's own
 * signals and wait on; signalfd on an owned signal moves its owner off it.
 * Everything else passes straight through to the next definition (libc's,
 * or a sanitizer's). They live in the file whose claims the owners call,
 * so that a static link always includes them.
 *
 * State changes run under sig_lock, a lock that knows its holder: a
 * program calling sigaction from a handler that interrupted this very
 * thread inside it passes straight through rather than deadlock.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/fork.h"
#include "base/env.h"
#include "base/real.h"
#include "base/sig.h"
#include "base/sys.h"
#include "source/signals.h"

#define NSIG_MAX 65 /* signals 1..64 */
#define MAX_OWNERS 4

typedef __sighandler_t (*signal_fn)(int, __sighandler_t);
typedef int (*sigignore_fn)(int);
typedef int (*sigwait_fn)(const sigset_t *, int *);
typedef int (*sigwaitinfo_fn)(const sigset_t *, siginfo_t *);
typedef int (*sigtimedwait_fn)(const sigset_t *, siginfo_t *,
                               const struct timespec *);
typedef int (*signalfd_fn)(int, const sigset_t *, int);

/* The interposed names whose next definition this file finds itself
 * (sigaction's is base/real.h's, cprof's own dispositions use it too). */
enum {
  F_SIGNAL,
  F_SIGSET,
  F_BSD_SIGNAL,
  F_SYSV_SIGNAL,
  F_SIGIGNORE,
  F_SIGWAIT,
  F_SIGWAITINFO,
  F_SIGTIMEDWAIT,
  F_SIGNALFD,
  F_COUNT,
};
static _Atomic(void *) next_fn[F_COUNT];
static const char *const fn_names[F_COUNT] = {
    "signal",  "sigset",      "bsd_signal",   "sysv_signal", "sigignore",
    "sigwait", "sigwaitinfo", "sigtimedwait", "signalfd",
};

/* The next definition of an interposed name; NULL (errno ENOSYS) when
 * there is none. */
static void *next(int which) {
  void *fn = atomic_load_explicit(&next_fn[which], memory_order_acquire);
  if (!fn) {
    fn = dlsym(RTLD_NEXT, fn_names[which]);
    if (!fn) {
      errno = ENOSYS;
      return NULL;
    }
    atomic_store_explicit(&next_fn[which], fn, memory_order_release);
  }
  return fn;
}


/* The lock and what it guards. */
static CPROF__FORK_LOCK _Atomic pid_t lock_holder;
static cprof__sigown *_Atomic owners[MAX_OWNERS];
/* The disposition each owned signal had when cprof claimed it. */
static struct sigaction found[NSIG_MAX];
/* Per signal, the owned signals cprof added to the mask of the program's
 * SA_ONSTACK handler for it (bit n - 1 for signal n). */
static unsigned long long added[NSIG_MAX];
/* Signals the program waits for with signalfd: never claimed. */
static unsigned long long wanted;

/* False when this thread already holds the lock (a handler of the
 * program's, run inside cprof's own call here). */
static bool lock(void) {
  pid_t self = cprof__sys_gettid();
  for (;;) {
    pid_t none = 0;
    if (atomic_compare_exchange_weak(&lock_holder, &none, self)) return true;
    if (none == self) return false;
    sched_yield();
  }
}

static void unlock(void) { atomic_store(&lock_holder, 0); }

/* Whether the forking thread took the lock (not when fork is called from
 * a handler that interrupted this thread's own change). */
static CPROF__FORK_DATA bool fork_took;
static void before_fork(void) { fork_took = lock(); }
static void after_fork(void) {
  if (fork_took) unlock();
}
static void child_after_fork(void) { atomic_store(&lock_holder, 0); }

/* Registered by the library's constructor, before any owner's: in a fork
 * child the lock is free again before the owners' own child handlers use
 * it, and no fork finds it held mid-change. */
void cprof__sig_init(void) {
  cprof__atfork(CPROF__FORK_SIGNALS, before_fork, after_fork, child_after_fork);
}

/* Bit sig - 1 for signal sig, as the kernel's masks have it. */
static unsigned long long bit(int sig) { return 1ULL << (sig - 1); }

static bool valid(int sig) { return sig > 0 && sig < NSIG_MAX; }

/* The signals cprof holds now, as a bit set. */
static unsigned long long owned_set(void) {
  unsigned long long s = 0;
  for (int i = 0; i < MAX_OWNERS; i++) {
    cprof__sigown *o = atomic_load(&owners[i]);
    int sig = o ? atomic_load(&o->signo) : 0;
    if (sig) s |= bit(sig);
  }
  return s;
}

static cprof__sigown *owner_of(int sig) {
  for (int i = 0; i < MAX_OWNERS; i++) {
    cprof__sigown *o = atomic_load(&owners[i]);
    if (o && atomic_load(&o->signo) == sig) return o;
  }
  return NULL;
}

static void remember(cprof__sigown *o) {
  for (int i = 0; i < MAX_OWNERS; i++)
    if (atomic_load(&owners[i]) == o) return;
  for (int i = 0; i < MAX_OWNERS; i++) {
    cprof__sigown *none = NULL;
    if (atomic_compare_exchange_strong(&owners[i], &none, o)) return;
  }
}

static bool is_mine(const struct sigaction *sa, const cprof__sigown *o) {
  return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == o->handler;
}

/* Adds (or, with remove, takes out) sig in the mask of every SA_ONSTACK
 * handler of the program's; sig_lock held. */
static void onstack_masks(int sig, bool remove) {
  for (int s = 1; s < NSIG_MAX; s++) {
    if (s == SIGKILL || s == SIGSTOP || s == sig || (bit(s) & owned_set()))
      continue;
    if (remove && !(added[s] & bit(sig))) continue;
    struct sigaction cur;
    if (cprof__real_sigaction(s, NULL, &cur) != 0) continue;
    if (remove) {
      added[s] &= ~bit(sig);
      if (!sigismember(&cur.sa_mask, sig)) continue;
      sigdelset(&cur.sa_mask, sig);
    } else {
      if (!cprof__sig_is_function(&cur) || !(cur.sa_flags & SA_ONSTACK) ||
          sigismember(&cur.sa_mask, sig))
        continue;
      sigaddset(&cur.sa_mask, sig);
      added[s] |= bit(sig);
    }
    cprof__real_sigaction(s, &cur, NULL);
  }
}

/* Whether sig can be claimed: the default disposition, no owner, not
 * waited for; sig_lock held. Fills *was with what it has. */
static bool free_signal(int sig, struct sigaction *was) {
  if (!valid(sig) || (bit(sig) & (owned_set() | wanted))) return false;
  if (cprof__real_sigaction(sig, NULL, was) != 0) return false;
  return was->sa_handler == SIG_DFL && !(was->sa_flags & SA_SIGINFO);
}

/* Installs o's handler on sig; sig_lock held. */
static bool install(cprof__sigown *o, int sig, const struct sigaction *was) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = o->handler;
  sa.sa_flags = SA_SIGINFO | o->flags;
  if (o->full_mask)
    sigfillset(&sa.sa_mask);
  else
    sigemptyset(&sa.sa_mask);
  if (cprof__real_sigaction(sig, &sa, NULL) != 0) return false;
  found[sig] = *was;
  added[sig] = 0;
  atomic_store(&o->signo, sig);
  onstack_masks(sig, false);
  return true;
}

/* Picks and installs a free signal for o, other than avoid; sig_lock
 * held. */
static int pick(cprof__sigown *o, int avoid) {
  struct sigaction was;
  if (o->fixed) {
    if (o->fixed != avoid && free_signal(o->fixed, &was) &&
        install(o, o->fixed, &was))
      return o->fixed;
    return 0;
  }
  if (o->preferred && o->preferred != avoid && free_signal(o->preferred, &was) &&
      install(o, o->preferred, &was))
    return o->preferred;
  /* From the top of the real-time range down: libraries that use one
   * tend to take the first ones. SIGRTMIN..SIGRTMIN+2 are left alone. */
  for (int sig = SIGRTMAX - 1; sig >= SIGRTMIN + 3; sig--)
    if (sig != avoid && free_signal(sig, &was) && install(o, sig, &was))
      return sig;
  return 0;
}

static void say_none(cprof__sigown *o, bool moving) {
  if (atomic_exchange(&o->warned, true)) return;
  if (o->fixed)
    cprof__warn("%s %s: the signal the setting names is in use by the program",
                o->what, moving ? "stopped" : "disabled");
  else
    cprof__warn("%s %s: no free signal (every signal it may use is the "
                "program's)",
                o->what, moving ? "stopped" : "disabled");
}

int cprof__sig_claim(cprof__sigown *o) {
  remember(o);
  if (!lock()) return 0;
  int sig = atomic_load(&o->signo);
  if (sig) {
    struct sigaction cur;
    if (cprof__real_sigaction(sig, NULL, &cur) == 0 && is_mine(&cur, o)) {
      unlock();
      return sig;
    }
    atomic_store(&o->signo, 0);
  }
  sig = pick(o, 0);
  unlock();
  if (sig)
    atomic_store(&o->warned, false);
  else
    say_none(o, false);
  return sig;
}

int cprof__sig_move(cprof__sigown *o) {
  if (!lock()) return 0;
  int old = atomic_load(&o->signo);
  /* The old one stays o's until dropped, so it is not picked again. */
  int sig = pick(o, old);
  if (!sig) atomic_store(&o->signo, old);
  unlock();
  if (!sig) say_none(o, true);
  return sig;
}

void cprof__sig_drop(cprof__sigown *o, int sig) {
  if (!valid(sig) || !lock()) return;
  struct sigaction cur;
  if (cprof__real_sigaction(sig, NULL, &cur) == 0 && is_mine(&cur, o)) {
    /* Ignoring a signal discards its pending instances in every thread,
     * blocked or not: none of cprof's can reach what comes next. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    cprof__real_sigaction(sig, &ign, NULL);
    cprof__real_sigaction(sig, &found[sig], NULL);
  }
  atomic_compare_exchange_strong(&o->signo, &sig, 0);
  onstack_masks(sig, true);
  unlock();
}

void cprof__sig_forget(cprof__sigown *o, int sig) {
  if (!valid(sig) || !lock()) return;
  atomic_compare_exchange_strong(&o->signo, &sig, 0);
  onstack_masks(sig, true);
  unlock();
}

bool cprof__sig_still_ours(const cprof__sigown *o) {
  int sig = atomic_load(&o->signo);
  struct sigaction cur;
  return sig && cprof__real_sigaction(sig, NULL, &cur) == 0 &&
         is_mine(&cur, o);
}

CPROF__SIGNAL_SAFE void cprof__sig_forward(int sig, const siginfo_t *si) {
  int saved = errno;
  cprof__sig_default(sig);
  siginfo_t copy = *si;
  cprof__sys4(SYS_rt_tgsigqueueinfo, cprof__sys4(SYS_getpid, 0, 0, 0, 0),
              cprof__sys_gettid(), sig, (long)&copy);
  errno = saved;
}

int cprof__sig_parse(const char *name, const char *v) {
  char q[CPROF__QUOTED_SIZE];
  const char *p = v;
  if (strncmp(p, "SIG", 3) == 0) p += 3;
  long sig = 0;
  char *end = NULL;
  if (strcmp(p, "PROF") == 0) {
    sig = SIGPROF;
  } else if (strncmp(p, "RTMIN", 5) == 0) {
    long off = p[5] ? strtol(p + 5, &end, 10) : 0;
    if (p[5] && (*end || off < 0)) sig = -1;
    else sig = SIGRTMIN + off;
  } else if (strncmp(p, "RTMAX", 5) == 0) {
    long off = p[5] ? strtol(p + 5, &end, 10) : 0;
    if (p[5] && (*end || off > 0)) sig = -1;
    else sig = SIGRTMAX + off;
  } else if (*p >= '0' && *p <= '9') {
    sig = strtol(p, &end, 10);
    if (*end) sig = -1;
  } else {
    sig = -1;
  }
  if (sig != SIGPROF && (sig < SIGRTMIN || sig > SIGRTMAX)) {
    cprof__warn("%s=%s: not SIGPROF or a real-time signal (SIGRTMIN+N, "
                "SIGRTMAX-N, or %d to %d); the feature is off",
                name, cprof__quoted(q, sizeof q, v), SIGRTMIN, SIGRTMAX);
    return 0;
  }
  return (int)sig;
}

/* The program is about to change sig's disposition (or wait on it with
 * signalfd): its owner moves off it first. */
static void program_takes(int sig) {
  cprof__sigown *o = valid(sig) ? owner_of(sig) : NULL;
  if (o && o->taken) o->taken();
}

/* The watchers cprof__sig_watch sets, by signal. */
static _Atomic(void (*)(int)) watchers[NSIG_MAX];

void cprof__sig_watch(int sig, void (*watcher)(int sig)) {
  if (valid(sig)) atomic_store(&watchers[sig], watcher);
}

/* The program changed sig's disposition: its watcher hears of it. */
static void program_changed(int sig) {
  void (*w)(int) = valid(sig) ? atomic_load(&watchers[sig]) : NULL;
  if (w) w(sig);
}

/* The disposition interposers. */

static int sigaction_call(int sig, const struct sigaction *act,
                          struct sigaction *old);

CPROF_EXPORT int sigaction(int sig, const struct sigaction *act,
                           struct sigaction *old) {
  int rc = sigaction_call(sig, act, old);
  if (rc == 0 && act) program_changed(sig);
  return rc;
}

int cprof__sig_set_own(int sig, const struct sigaction *act,
                       struct sigaction *old) {
  return sigaction_call(sig, act, old);
}

static int sigaction_call(int sig, const struct sigaction *act,
                          struct sigaction *old) {
  if (!valid(sig)) return cprof__real_sigaction(sig, act, old);
  if (act) program_takes(sig);
  if (!lock()) return cprof__real_sigaction(sig, act, old);
  cprof__sigown *o = owner_of(sig);
  if (o && !act) {
    /* Still owned (a query): what the program left there. */
    if (old) *old = found[sig];
    unlock();
    return 0;
  }
  struct sigaction copy;
  unsigned long long before = added[sig], now = 0;
  if (act && cprof__sig_is_function(act) && (act->sa_flags & SA_ONSTACK)) {
    copy = *act;
    unsigned long long own = owned_set();
    for (int s = 1; s < NSIG_MAX; s++)
      if ((own & bit(s)) && !sigismember(&copy.sa_mask, s)) {
        sigaddset(&copy.sa_mask, s);
        now |= bit(s);
      }
    act = &copy;
  }
  int rc = cprof__real_sigaction(sig, act, old);
  if (rc == 0) {
    if (old)
      for (int s = 1; s < NSIG_MAX; s++)
        if (before & bit(s)) sigdelset(&old->sa_mask, s);
    if (act) added[sig] = now;
  }
  unlock();
  return rc;
}

CPROF_EXPORT int __sigaction(int sig, const struct sigaction *act,
                             struct sigaction *old) {
  return sigaction(sig, act, old);
}

/* signal and its variants install no SA_ONSTACK handler: the owner moves,
 * the call is made, and no mask of cprof's is left on the signal. */
static __sighandler_t handler_change(int which, int sig, __sighandler_t h);

static __sighandler_t handler_call(int which, int sig, __sighandler_t h) {
  __sighandler_t r = handler_change(which, sig, h);
  if (r != SIG_ERR && (which != F_SIGSET || h != SIG_HOLD))
    program_changed(sig);
  return r;
}

static __sighandler_t handler_change(int which, int sig, __sighandler_t h) {
  signal_fn fn = (signal_fn)next(which);
  if (!fn) return SIG_ERR;
  if (!valid(sig)) return fn(sig, h);
  program_takes(sig);
  if (!lock()) return fn(sig, h);
  __sighandler_t r = fn(sig, h);
  if (r != SIG_ERR && (which != F_SIGSET || h != SIG_HOLD)) added[sig] = 0;
  unlock();
  return r;
}

CPROF_EXPORT __sighandler_t signal(int sig, __sighandler_t h) {
  return handler_call(F_SIGNAL, sig, h);
}
CPROF_EXPORT __sighandler_t bsd_signal(int sig, __sighandler_t h) {
  return handler_call(F_BSD_SIGNAL, sig, h);
}
CPROF_EXPORT __sighandler_t sysv_signal(int sig, __sighandler_t h) {
  return handler_call(F_SYSV_SIGNAL, sig, h);
}
CPROF_EXPORT __sighandler_t sigset(int sig, __sighandler_t h) {
  return handler_call(F_SIGSET, sig, h);
}

static int sigignore_call(int sig);

CPROF_EXPORT int sigignore(int sig) {
  int r = sigignore_call(sig);
  if (r == 0) program_changed(sig);
  return r;
}

static int sigignore_call(int sig) {
  sigignore_fn fn = (sigignore_fn)next(F_SIGIGNORE);
  if (!fn) return -1;
  if (!valid(sig)) return fn(sig);
  program_takes(sig);
  if (!lock()) return fn(sig);
  int r = fn(sig);
  if (r == 0) added[sig] = 0;
  unlock();
  return r;
}

/* The wait interposers. A thread that blocks cprof's signal and waits
 * for a set holding it (a loop on sigtimedwait(full set), say) would
 * receive cprof's timer signals: those are consumed, and the wait goes
 * on for what is left of its time. */

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int wait_for(const sigset_t *set, siginfo_t *info,
                    const struct timespec *timeout) {
  sigtimedwait_fn fn = (sigtimedwait_fn)next(F_SIGTIMEDWAIT);
  if (!fn) return -1;
  int64_t deadline = 0;
  if (timeout)
    deadline = mono_ns() + (int64_t)timeout->tv_sec * 1000000000 + timeout->tv_nsec;
  struct timespec left_ts, *left = NULL;
  if (timeout) {
    left_ts = *timeout;
    left = &left_ts;
  }
  for (;;) {
    siginfo_t si;
    int sig = fn(set, &si, left);
    if (sig < 0 || !(bit(sig) & owned_set()) || !cprof__sig_from_cprof(&si)) {
      if (sig >= 0 && info) *info = si;
      return sig;
    }
    if (timeout) {
      int64_t rest = deadline - mono_ns();
      if (rest < 0) rest = 0;
      left_ts.tv_sec = rest / 1000000000;
      left_ts.tv_nsec = rest % 1000000000;
    }
  }
}

CPROF_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info,
                              const struct timespec *timeout) {
  return wait_for(set, info, timeout);
}

CPROF_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info) {
  return wait_for(set, info, NULL);
}

CPROF_EXPORT int sigwait(const sigset_t *set, int *sig) {
  for (;;) {
    int r = wait_for(set, NULL, NULL);
    if (r > 0) {
      *sig = r;
      return 0;
    }
    if (errno != EINTR) return errno;
  }
}

/* A signalfd reads signals the kernel would otherwise deliver: one that
 * names an owned signal takes it for the program, and the owner moves off
 * it; cprof never claims it afterwards. */
CPROF_EXPORT int signalfd(int fd, const sigset_t *mask, int flags) {
  signalfd_fn fn = (signalfd_fn)next(F_SIGNALFD);
  if (!fn) return -1;
  {
    unsigned long long in = 0;
    for (int s = 1; s < NSIG_MAX; s++)
      if (s != SIGKILL && s != SIGSTOP && sigismember(mask, s) == 1) in |= bit(s);
    if (lock()) {
      wanted |= in;
      unlock();
    }
    for (int s = 1; s < NSIG_MAX; s++)
      if ((in & bit(s)) && owner_of(s)) program_takes(s);
  }
  return fn(fd, mask, flags);
}
