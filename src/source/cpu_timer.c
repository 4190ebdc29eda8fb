/*
 * The CPU profiler (cpu.h). Each thread gets its own timer on its own CPU
 * clock (timer_create with SIGEV_THREAD_ID), so every thread is sampled in
 * proportion to the CPU time it used: a process-wide setitimer can have
 * only one SIGPROF pending and the kernel prefers the running thread, which
 * skews multi-threaded profiles. Existing threads are found in
 * /proc/self/task when the engine starts; new ones arm their timer in the
 * pthread_create trampoline.
 *
 * The SIGPROF handler is async-signal-safe: it walks the stack from the
 * ucontext, interns it, and adds (1 + overruns) samples to every active
 * session's table, keyed by the thread id. It takes no lock, allocates
 * nothing and preserves errno. It may call only CPROF__SIGNAL_SAFE code
 * (capture/'s walker, stack table and aggregation) and raw system calls
 * (base/sys.h); test/e2e/signal_calls.sh holds it to that. Everything else
 * here runs in normal context under engine_lock.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "capture/agg.h"
#include "source/cpu.h"
#include "source/threads.h"
#include "base/env.h"
#include "base/hmap.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/proc.h"
#include "capture/stack.h"
#include "capture/labels.h"
#include "capture/stacktab.h"
#include "capture/taskread.h"
#include "base/rng.h"
#include "base/sig.h"
#include "base/sys.h"
#include "source/thread_scan.h"


/* Distinct (stack, thread) pairs one session keeps; more are counted as
 * lost samples. */
#define SESSION_KEYS 32768
/* Names of threads that exited during a session, kept for its labels. */
#define EXITED_NAMES 1024

struct cprof__cpu_session {
  cprof__agg *agg;
  int hz;
  int64_t start_ns;
  _Atomic uint64_t lost; /* samples the table had no room for */
  _Atomic uint64_t unarmed; /* threads whose timer could not be armed */
  atomic_bool follows_forks;
};

typedef struct thread_timer {
  pid_t tid;
  timer_t timer;
} thread_timer;

typedef cprof__cpu_thread_name exited_name;

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(cprof__cpu_session *) sessions[CPROF__CPU_SESSIONS];
static _Atomic int handlers_running;
static _Atomic int engine_hz; /* 0 when idle */
static int64_t period_ns;
static thread_timer *timers; /* under engine_lock */
static size_t ntimers, timers_cap;
static exited_name exited[EXITED_NAMES];
static size_t nexited;
static bool handler_installed;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
/* Threads whose timer could not be armed (and that still exist, as far as
 * the engine knows): each counts once in every session running then. */
#define UNARMED_MAX 1024
static pid_t unarmed[UNARMED_MAX];
static size_t nunarmed;

static pid_t current_tid(void) { return (pid_t)cprof__sys4(SYS_gettid, 0, 0, 0, 0); }

/* Walks and records one sample; on its own frame (the stack buffer is
 * most of a handler's stack use), entered only once the room is known. */
CPROF__SIGNAL_SAFE __attribute__((noinline)) static void take_sample(const siginfo_t *si,
                                                  void *uc) {
  uintptr_t pcs[CPROF__STACK_BUF];
  size_t n = cprof__stack_walk_ucontext(uc, pcs, CPROF__ARRAY_LEN(pcs));
  n = cprof__labels_mark(pcs, n, CPROF__ARRAY_LEN(pcs));
  cprof__stack_id sid = cprof__stacktab_intern(pcs, n);
  int64_t weight = 1 + (si->si_overrun > 0 ? si->si_overrun : 0);
  const int64_t vals[2] = {weight, weight * period_ns};
  uint32_t tid = (uint32_t)current_tid();
  for (int i = 0; i < CPROF__CPU_SESSIONS; i++) {
    cprof__cpu_session *s = atomic_load(&sessions[i]);
    if (s && !cprof__agg_add(s->agg, sid, tid, vals))
      atomic_fetch_add(&s->lost, (uint64_t)weight);
  }
}

/* A sample that cannot be taken (too little stack left) still counts, as a
 * lost sample, so the profile's total stays true. */
static void lose_sample(const siginfo_t *si) {
  int64_t weight = 1 + (si->si_overrun > 0 ? si->si_overrun : 0);
  for (int i = 0; i < CPROF__CPU_SESSIONS; i++) {
    cprof__cpu_session *s = atomic_load(&sessions[i]);
    if (s) atomic_fetch_add(&s->lost, (uint64_t)weight);
  }
}

CPROF__SIGNAL_SAFE static void on_sigprof(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  int saved_errno = errno;
  /* Only our own timers count: a leftover setitimer or a kill(SIGPROF)
   * from elsewhere must not add samples. */
  if (si->si_code != SI_TIMER || atomic_load(&engine_hz) == 0) goto out;
  atomic_fetch_add(&handlers_running, 1);
  /* The signal may land on a nearly exhausted stack (a thread recovering
   * from an overflow) or a small alternate stack of the program's own: a
   * sample is only taken with room for the deepest walk. */
  if (cprof__stack_room() >= CPROF__HANDLER_STACK)
    take_sample(si, uc);
  else
    lose_sample(si);
  atomic_fetch_sub(&handlers_running, 1);
out:
  errno = saved_errno;
}

static uint64_t random_u64(void) { return cprof__rng_seed(0); }

/* Counts tid as a thread that could not be armed, once, in every
 * session; engine_lock held. */
static void note_unarmed(pid_t tid) {
  for (size_t i = 0; i < nunarmed; i++)
    if (unarmed[i] == tid) return;
  if (nunarmed < UNARMED_MAX) unarmed[nunarmed++] = tid;
  for (int i = 0; i < CPROF__CPU_SESSIONS; i++) {
    cprof__cpu_session *s = atomic_load(&sessions[i]);
    if (s) atomic_fetch_add(&s->unarmed, 1);
  }
}

static void forget_unarmed(pid_t tid) {
  for (size_t i = 0; i < nunarmed; i++)
    if (unarmed[i] == tid) unarmed[i--] = unarmed[--nunarmed];
}

/* Arms a timer for tid; engine_lock held. A thread that already exited is
 * not an error (timer_create says EINVAL for its clock); any other failure
 * is counted (note_unarmed). */
static void arm_thread(pid_t tid) {
  for (size_t i = 0; i < ntimers; i++)
    if (timers[i].tid == tid) return;
  if (ntimers == timers_cap) {
    size_t cap = timers_cap ? timers_cap * 2 : 64;
    thread_timer *t = cprof__realloc(timers, cap * sizeof *t);
    if (!t) {
      note_unarmed(tid);
      return;
    }
    timers = t;
    timers_cap = cap;
  }
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev.sigev_notify_thread_id = tid;
  timer_t timer;
  if (timer_create(cprof__thread_cpu_clock(tid), &sev, &timer) != 0) {
    if (errno != EINVAL && errno != ESRCH) note_unarmed(tid);
    return;
  }
  /* A random first expiry in [1, period] ns, so threads that live shorter
   * than a period are still sampled fairly and timers do not tick in step
   * with periodic work. */
  struct itimerspec its;
  int64_t first = 1 + (int64_t)(random_u64() % (uint64_t)period_ns);
  its.it_interval.tv_sec = period_ns / 1000000000;
  its.it_interval.tv_nsec = period_ns % 1000000000;
  its.it_value.tv_sec = first / 1000000000;
  its.it_value.tv_nsec = first % 1000000000;
  if (timer_settime(timer, 0, &its, NULL) != 0) {
    if (errno != EINVAL && errno != ESRCH) note_unarmed(tid);
    timer_delete(timer);
    return;
  }
  timers[ntimers++] = (thread_timer){tid, timer};
  if (nunarmed) forget_unarmed(tid);
}

static void disarm_all(void) {
  for (size_t i = 0; i < ntimers; i++) timer_delete(timers[i].timer);
  ntimers = 0;
}

static void arm_existing_threads(void) {
  pid_t *tids;
  size_t n;
  if (cprof__proc_tids(&tids, &n) != 0) {
    arm_thread(current_tid());
    return;
  }
  for (size_t i = 0; i < n; i++) arm_thread(tids[i]);
  cprof__free(tids);
}

/*
 * Threads started without cprof's trampoline (thread_scan.h) get their
 * timers here, from the scanner's scans while the engine runs. The timers
 * of threads that are gone are deleted: a timer whose thread exited reads
 * no interval (the kernel reports nothing for a clock without its task),
 * and its tid may have been reused since. The listing is not used for
 * that: a thread that started after it was read may already be timed.
 */
size_t cprof__cpu_rescan(const pid_t *tids, size_t n) {
  size_t found = 0;
  cprof__hmap listed = {0}, timed = {0};
  bool complete = true;
  for (size_t i = 0; i < n; i++)
    if (cprof__hmap_put(&listed, (uint64_t)tids[i] + 1, 1)) complete = false;
  cprof__lock(&engine_lock);
  if (atomic_load(&engine_hz) != 0) {
    for (size_t i = 0; i < ntimers; i++) {
      struct itimerspec its;
      bool gone = timer_gettime(timers[i].timer, &its) == 0 &&
                  its.it_interval.tv_sec == 0 && its.it_interval.tv_nsec == 0;
      if (gone) {
        timer_delete(timers[i].timer);
        timers[i--] = timers[--ntimers];
      }
    }
    for (size_t i = 0; i < ntimers; i++)
      cprof__hmap_put(&timed, (uint64_t)timers[i].tid + 1, 1);
    for (size_t i = 0; i < n; i++) {
      uint64_t v;
      size_t before = ntimers;
      if (!cprof__hmap_get(&timed, (uint64_t)tids[i] + 1, &v)) arm_thread(tids[i]);
      found += ntimers - before;
    }
    for (size_t i = 0; complete && i < nunarmed; i++) {
      uint64_t v;
      if (!cprof__hmap_get(&listed, (uint64_t)unarmed[i] + 1, &v))
        unarmed[i--] = unarmed[--nunarmed];
    }
  }
  cprof__unlock(&engine_lock);
  cprof__hmap_free(&listed);
  cprof__hmap_free(&timed);
  return found;
}

static void child_after_fork(void) {
  /* Timers do not survive fork, and the child has one thread. A session
   * that follows forks (the dumps') carries on in the child from zero: its
   * table is cleared, its window starts now, and the forking thread's
   * timer is armed again. The others (the application's own, the
   * endpoint's, the pusher's, whose consumers stay in the parent) are
   * released; stopping one of them in the child is CPROF_EINVAL, and the
   * child may start sessions of its own. No handler runs meanwhile: no
   * timer of the child's is armed yet. */
  bool kept = false;
  int64_t now = cprof__now_ns();
  for (int i = 0; i < CPROF__CPU_SESSIONS; i++) {
    cprof__cpu_session *s = atomic_load(&sessions[i]);
    if (!s) continue;
    if (atomic_load(&s->follows_forks)) {
      cprof__agg_clear(s->agg);
      atomic_store(&s->lost, 0);
      s->start_ns = now;
      kept = true;
    } else {
      atomic_store(&sessions[i], NULL);
      cprof__agg_free(s->agg);
      cprof__free(s);
    }
  }
  atomic_store(&handlers_running, 0);
  ntimers = 0;
  nexited = 0;
  nunarmed = 0;
  pthread_mutex_init(&engine_lock, NULL);
  if (kept && atomic_load(&engine_hz) != 0) {
    /* The scanner first: starting it is cprof's work, not the child's. */
    cprof__thread_scan_wake();
    arm_thread(current_tid());
  } else {
    atomic_store(&engine_hz, 0);
  }
}

void cprof__cpu_session_follow_forks(cprof__cpu_session *s) {
  if (s) atomic_store(&s->follows_forks, true);
}

static void install_atfork(void) {
  pthread_atfork(NULL, NULL, child_after_fork);
}

/* Installs the handler unless the application owns SIGPROF. */
static int install_handler(void) {
  struct sigaction cur;
  if (sigaction(SIGPROF, NULL, &cur) != 0) return CPROF_ESYS;
  if (handler_installed && (cur.sa_flags & SA_SIGINFO) &&
      cur.sa_sigaction == on_sigprof)
    return 0;
  if (cprof__sig_taken(&cur, on_sigprof)) {
    fprintf(stderr,
            "cprof: CPU profiling disabled: the program has its own SIGPROF "
            "handler\n");
    return CPROF_ESYS;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigprof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL) != 0) return CPROF_ESYS;
  handler_installed = true;
  return 0;
}

int cprof__cpu_session_start(int hz, cprof__cpu_session **out) {
  cprof__threads_hooks(cprof__cpu_thread_started, cprof__cpu_thread_exiting);
  if (hz == 0) hz = CPROF__CPU_DEFAULT_HZ;
  if (hz < 1 || hz > CPROF__CPU_MAX_HZ || !out) return CPROF_EINVAL;
  /* The unwind tables cover what is loaded when the profile starts. */
  cprof__stack_refresh();
  pthread_once(&atfork_once, install_atfork);
  cprof__stacktab_init();
  cprof__cpu_session *s = cprof__calloc(1, sizeof *s);
  if (!s) return CPROF_ENOMEM;
  s->agg = cprof__agg_new(2, SESSION_KEYS);
  if (!s->agg) {
    cprof__free(s);
    return CPROF_ENOMEM;
  }

  int err = 0;
  cprof__lock(&engine_lock);
  int slot = -1;
  for (int i = 0; i < CPROF__CPU_SESSIONS && slot < 0; i++)
    if (!atomic_load(&sessions[i])) slot = i;
  if (slot < 0) {
    err = CPROF_EBUSY;
  } else if (atomic_load(&engine_hz) == 0) {
    err = install_handler();
    if (!err) {
      period_ns = 1000000000 / hz;
      nexited = 0;
      nunarmed = 0;
      atomic_store(&engine_hz, hz);
      arm_existing_threads();
      if (ntimers == 0) {
        atomic_store(&engine_hz, 0);
        err = CPROF_ESYS;
      }
    }
  }
  if (!err) {
    s->hz = atomic_load(&engine_hz);
    s->start_ns = cprof__now_ns();
    atomic_store(&s->unarmed, nunarmed);
    atomic_store(&sessions[slot], s);
  }
  cprof__unlock(&engine_lock);
  if (err) {
    cprof__agg_free(s->agg);
    cprof__free(s);
    return err;
  }
  cprof__thread_scan_wake();
  *out = s;
  return 0;
}

/* Waits until no handler can still hold a pointer to a removed session.
 * Handlers take microseconds; a handler that interrupted this very thread
 * finished before we got here. */
static void quiesce_handlers(void) {
  for (int spins = 0; atomic_load(&handlers_running) != 0; spins++) {
    if (spins < 1000) {
      sched_yield();
    } else {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
  }
}

int cprof__cpu_session_end(cprof__cpu_session *s, bool keep,
                           cprof__cpu_window *out) {
  if (!s) return CPROF_EINVAL;
  int64_t end_ns = cprof__now_ns();
  cprof__lock(&engine_lock);
  bool found = false, others = false;
  for (int i = 0; i < CPROF__CPU_SESSIONS; i++) {
    cprof__cpu_session *cur = atomic_load(&sessions[i]);
    if (cur == s) {
      atomic_store(&sessions[i], NULL);
      found = true;
    } else if (cur) {
      others = true;
    }
  }
  if (found && !others) {
    atomic_store(&engine_hz, 0);
    disarm_all();
  }
  quiesce_handlers();
  /* The profile is written outside the lock, so threads starting or
   * exiting meanwhile are not held up by symbolization; the names of
   * threads that already exited are copied for it. */
  size_t ngone = nexited;
  exited_name *gone = found && keep ? cprof__malloc(ngone * sizeof *gone + 1)
                                    : NULL;
  if (gone) memcpy(gone, exited, ngone * sizeof *gone);
  cprof__unlock(&engine_lock);
  if (!found) return CPROF_EINVAL;
  if (!keep) {
    cprof__agg_free(s->agg);
    cprof__free(s);
    return 0;
  }
  *out = (cprof__cpu_window){
      .agg = s->agg,
      .hz = s->hz,
      .start_ns = s->start_ns,
      .end_ns = end_ns,
      .lost = atomic_load(&s->lost),
      .unarmed = atomic_load(&s->unarmed),
      .gone = gone,
      .ngone = gone ? ngone : 0,
  };
  cprof__free(s);
  return 0;
}

void cprof__cpu_window_free(cprof__cpu_window *w) {
  cprof__agg_free(w->agg);
  cprof__free(w->gone);
  memset(w, 0, sizeof *w);
}



int cprof__cpu_engine_hz(void) { return atomic_load(&engine_hz); }

void cprof__cpu_thread_started(void) {
  if (atomic_load(&engine_hz) == 0) return;
  cprof__lock(&engine_lock);
  if (atomic_load(&engine_hz) != 0) arm_thread(current_tid());
  cprof__unlock(&engine_lock);
}

void cprof__cpu_thread_exiting(void) {
  if (atomic_load(&engine_hz) == 0) return;
  pid_t tid = current_tid();
  cprof__lock(&engine_lock);
  for (size_t i = 0; i < ntimers; i++) {
    if (timers[i].tid == tid) {
      timer_delete(timers[i].timer);
      timers[i] = timers[--ntimers];
      break;
    }
  }
  if (nexited < EXITED_NAMES) {
    exited[nexited].tid = tid;
    if (pthread_getname_np(pthread_self(), exited[nexited].name,
                           sizeof exited[nexited].name) != 0)
      snprintf(exited[nexited].name, sizeof exited[nexited].name,
               "thread-%d", (int)tid);
    nexited++;
  }
  cprof__unlock(&engine_lock);
}

bool cprof__cpu_is_own_handler(const struct sigaction *act) {
  return act && (act->sa_flags & SA_SIGINFO) &&
         act->sa_sigaction == on_sigprof;
}

void cprof__cpu_handler_replaced(void) {
  cprof__lock(&engine_lock);
  bool running = handler_installed && atomic_load(&engine_hz) != 0;
  /* The next start checks the disposition again, and refuses. */
  handler_installed = false;
  if (running) {
    atomic_store(&engine_hz, 0);
    disarm_all();
  }
  cprof__unlock(&engine_lock);
  if (running)
    cprof__warn("CPU profiling stopped: the program installed its own "
                "SIGPROF handler");
}

/*
 * The sigaction and signal interposers: a program that installs its own
 * SIGPROF handler while cprof's CPU timers run (its own profiler, started
 * after cprof's) would otherwise receive cprof's timer signals, about 500
 * a second at 1000 Hz. They stop the timers first (above), then install
 * the program's handler unchanged; every other call passes straight
 * through to the next definition (libc's, or a sanitizer's). They live in
 * this file, not one of their own, so that a static link always includes
 * them: a file holding only them would be left out whenever a sanitizer's
 * runtime, linked first, already defines sigaction.
 */
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
