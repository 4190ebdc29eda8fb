/*
 * The CPU profiler (cpu_timer.h). Each thread gets its own timer on its own CPU
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

#include "base/fork.h"
#include "capture/agg.h"
#include "capture/sample.h"
#include "source/cpu_timer.h"
#include "source/threads.h"
#include "base/env.h"
#include "base/hmap.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/proc.h"
#include "capture/stack.h"
#include "capture/stacktab.h"
#include "capture/taskread.h"
#include "base/rng.h"
#include "base/sig.h"
#include "base/sys.h"
#include "source/signals.h"


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
  _Atomic uint64_t no_room; /* samples not taken: too little stack */
  int signo; /* the timers' signal when it ended */
  atomic_bool follows_forks;
};

typedef struct thread_timer {
  pid_t tid;
  timer_t timer;
} thread_timer;

typedef cprof__cpu_thread_name exited_name;

static CPROF__FORK_LOCK pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(cprof__cpu_session *) sessions[CPROF__CPU_SESSIONS];
static _Atomic int handlers_running;
static _Atomic int engine_hz; /* 0 when idle */
static int64_t period_ns;
static thread_timer *timers; /* under engine_lock */
static size_t ntimers, timers_cap;
static exited_name exited[EXITED_NAMES];
static size_t nexited;
static void on_sigprof(int sig, siginfo_t *si, void *uc);
static void signal_taken(void);
/* The signal the timers deliver: SIGPROF while the program leaves it
 * alone, else a free real-time one (source/signals.h). */
static cprof__sigown cpu_signal = {
    .what = "CPU profiling",
    .handler = on_sigprof,
    .flags = SA_RESTART,
    .full_mask = true,
    .taken = signal_taken,
};
static pthread_once_t signal_env_once = PTHREAD_ONCE_INIT;
static _Atomic(void (*)(void)) engine_listener;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
/* Threads whose timer could not be armed (and that still exist, as far as
 * the engine knows): each counts once in every session running then. */
#define UNARMED_MAX 1024
static pid_t unarmed[UNARMED_MAX];
static size_t nunarmed;

void cprof__cpu_engine_listen(void (*on_start)(void)) {
  atomic_store(&engine_listener, on_start);
}

static void engine_started(void) {
  void (*fn)(void) = atomic_load(&engine_listener);
  if (fn) fn();
}


/* engine_lock's holder (a tid), so that a fork from a handler that
 * interrupted the holder does not wait on it (fork_prepare). */
static CPROF__FORK_DATA _Atomic pid_t engine_holder;

static void engine_take(void) {
  cprof__lock(&engine_lock);
  atomic_store(&engine_holder, cprof__sys_gettid());
}

static void engine_give(void) {
  atomic_store(&engine_holder, 0);
  cprof__unlock(&engine_lock);
}

/* Walks and records one sample; on its own frame (the stack buffer is
 * most of a handler's stack use), entered only once the room is known. */
CPROF__SIGNAL_SAFE __attribute__((noinline)) static void take_sample(const siginfo_t *si,
                                                  void *uc) {
  const cprof__sample_at at = {.from = CPROF__SAMPLE_SIGNAL, .uc = uc};
  cprof__stack_id sid = cprof__sample_stack(&at, CPROF__SAMPLE_LABELS);
  int64_t weight = 1 + (si->si_overrun > 0 ? si->si_overrun : 0);
  const int64_t vals[2] = {weight, weight * period_ns};
  uint32_t tid = (uint32_t)cprof__sys_gettid();
  for (int i = 0; i < CPROF__CPU_SESSIONS; i++) {
    cprof__cpu_session *s = atomic_load(&sessions[i]);
    if (s && !cprof__agg_add(s->agg, sid, tid, vals))
      atomic_fetch_add(&s->lost, (uint64_t)weight);
  }
}

/* A sample that cannot be taken (too little stack left) still counts, as a
 * lost sample, so the profile's total stays true. */
CPROF__SIGNAL_SAFE static void lose_sample(const siginfo_t *si) {
  int64_t weight = 1 + (si->si_overrun > 0 ? si->si_overrun : 0);
  for (int i = 0; i < CPROF__CPU_SESSIONS; i++) {
    cprof__cpu_session *s = atomic_load(&sessions[i]);
    if (!s) continue;
    atomic_fetch_add(&s->lost, (uint64_t)weight);
    atomic_fetch_add(&s->no_room, (uint64_t)weight);
  }
}

CPROF__SIGNAL_SAFE static void on_sigprof(int sig, siginfo_t *si, void *uc) {
  int saved_errno = errno;
  /* Only cprof's own timers count. Anything else (a kill, the program's
   * own itimer) gets what it would have got without cprof: the default
   * action. */
  if (!cprof__sig_from_cprof(si)) {
    cprof__sig_forward(sig, si);
    goto out;
  }
  if (atomic_load(&engine_hz) == 0) goto out;
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

static void disarm_all(void) {
  for (size_t i = 0; i < ntimers; i++) timer_delete(timers[i].timer);
  ntimers = 0;
}

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

/* Creates tid's timer on the engine's signal, unarmed. */
static int new_timer(pid_t tid, timer_t *out) {
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = atomic_load(&cpu_signal.signo);
  sev.sigev_value.sival_int = CPROF__SIG_COOKIE;
  sev.sigev_notify_thread_id = tid;
  return timer_create(cprof__thread_cpu_clock(tid), &sev, out);
}

/* Whether timers may be created from this thread: under a seccomp filter
 * that kills (or refuses) timer_create it is never called
 * (cprof__timer_create_allowed). The engine stops, once, with one line on
 * stderr. engine_lock held. */
static bool timers_allowed(void) {
  if (cprof__timer_create_allowed()) return true;
  if (atomic_load(&engine_hz) != 0) {
    atomic_store(&engine_hz, 0);
    disarm_all();
    cprof__warn("CPU profiling stopped: a seccomp filter refuses "
                "timer_create, or kills the process for it");
  }
  return false;
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
  timer_t timer;
  if (new_timer(tid, &timer) != 0) {
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


static void arm_existing_threads(void) {
  pid_t *tids;
  size_t n;
  if (!timers_allowed()) return;
  /* In a fork child's handlers the program has one thread, this one (the
   * threads of cprof's own that earlier handlers started block every
   * signal): no listing of /proc/self/task, whose entries the kernel
   * walks again when the child is reaped. */
  if (cprof__fork_child_running() || cprof__proc_tids(&tids, &n) != 0) {
    arm_thread(cprof__sys_gettid());
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
  /* Every allocation here is made and freed under engine_lock, which fork
   * takes: a fork child never inherits these maps half-built and held only
   * by this thread's registers (memory it could neither use nor free). */
  engine_take();
  for (size_t i = 0; i < n; i++)
    if (cprof__hmap_put(&listed, (uint64_t)tids[i] + 1, 1)) complete = false;
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
    bool checked = false;
    for (size_t i = 0; i < n; i++) {
      uint64_t v;
      if (cprof__hmap_get(&timed, (uint64_t)tids[i] + 1, &v)) continue;
      if (!checked && !timers_allowed()) break;
      checked = true;
      size_t before = ntimers;
      arm_thread(tids[i]);
      found += ntimers - before;
    }
    for (size_t i = 0; complete && i < nunarmed; i++) {
      uint64_t v;
      if (!cprof__hmap_get(&listed, (uint64_t)unarmed[i] + 1, &v))
        unarmed[i--] = unarmed[--nunarmed];
    }
  }
  cprof__hmap_free(&listed);
  cprof__hmap_free(&timed);
  engine_give();
  return found;
}

/* fork: engine_lock is held across it (not when fork is called from a
 * handler that interrupted its holder), so the child never inherits it
 * taken mid-change by a thread that is not there. */
static CPROF__FORK_DATA bool fork_took;
/* In a fork child, between its first and last handlers: the signal is
 * still claimed while no session runs (child_after_fork). */
static bool signal_parked;
static void fork_prepare(void) {
  fork_took = atomic_load(&engine_holder) != cprof__sys_gettid();
  if (fork_took) engine_take();
}

static void fork_parent(void) {
  if (fork_took) engine_give();
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
  if (kept && atomic_load(&engine_hz) != 0) {
    /* The scanner first: starting it is cprof's work, not the child's. */
    engine_started();
    arm_thread(cprof__sys_gettid());
  } else {
    /* The signal stays claimed until every child handler has run
     * (child_signal_settle): a session a later handler starts (the
     * dumps' window) finds it installed, where giving it back and
     * claiming it again cost a child 0.3 ms (a read of every signal's
     * disposition, for the alternate-stack masks). */
    atomic_store(&engine_hz, 0);
    signal_parked = atomic_load(&cpu_signal.signo) != 0;
  }
  /* Held since the prepare handler, so that no thread of the child (one
   * a handler started) saw the engine half reset. */
  atomic_store(&engine_holder, 0);
  if (fork_took)
    cprof__unlock(&engine_lock);
  else
    pthread_mutex_init(&engine_lock, NULL);
}

/* After every child handler: the signal goes back to the program if no
 * session of the child's took it. */
static void child_signal_settle(void) {
  if (!signal_parked) return;
  signal_parked = false;
  int sig = atomic_load(&cpu_signal.signo);
  if (sig && atomic_load(&engine_hz) == 0) cprof__sig_drop(&cpu_signal, sig);
}

void cprof__cpu_session_follow_forks(cprof__cpu_session *s) {
  if (s) atomic_store(&s->follows_forks, true);
}

static void install_atfork(void) {
  cprof__atfork(CPROF__FORK_CPU_TIMERS, fork_prepare, fork_parent,
                child_after_fork);
  cprof__atfork_child_last(child_signal_settle);
}

static void read_signal_env(void) {
  const char *v = cprof__env_str("CPROF_CPU_SIGNAL");
  if (v) {
    cpu_signal.fixed = cprof__sig_parse("CPROF_CPU_SIGNAL", v);
    /* A setting that names no usable signal turns CPU profiling off. */
    if (!cpu_signal.fixed) cpu_signal.fixed = -1;
  }
  cpu_signal.preferred = SIGPROF;
}

void cprof__cpu_env_init(void) {
  pthread_once(&signal_env_once, read_signal_env);
}

/* Installs the handler on a free signal (cprof__sig_claim). */
static int install_handler(void) {
  cprof__cpu_env_init();
  if (cpu_signal.fixed < 0) return CPROF_ESYS;
  return cprof__sig_claim(&cpu_signal) ? 0 : CPROF_ESYS;
}

/* Moves every timer to the engine's new signal, keeping each one's
 * interval and time to its next expiry; engine_lock held. */
static void move_timers(void) {
  for (size_t i = 0; i < ntimers; i++) {
    struct itimerspec its;
    timer_t t;
    if (timer_gettime(timers[i].timer, &its) != 0 ||
        (its.it_interval.tv_sec == 0 && its.it_interval.tv_nsec == 0) ||
        new_timer(timers[i].tid, &t) != 0) {
      /* Its thread is gone. */
      timer_delete(timers[i].timer);
      timers[i--] = timers[--ntimers];
      continue;
    }
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
      its.it_value.tv_nsec = 1;
    if (timer_settime(t, 0, &its, NULL) != 0) {
      timer_delete(t);
      timer_delete(timers[i].timer);
      timers[i--] = timers[--ntimers];
      continue;
    }
    timer_delete(timers[i].timer);
    timers[i].timer = t;
  }
}

/* The program is taking the engine's signal (through libc, or found
 * replaced by the scanner's check): the timers move to another free
 * signal, sessions go on; with none free, the engine stops, once. */
static void move_signal(bool still_mine) {
  engine_take();
  int old = atomic_load(&cpu_signal.signo);
  if (old && atomic_load(&engine_hz) != 0) {
    if (cprof__sig_move(&cpu_signal)) {
      move_timers();
    } else {
      atomic_store(&engine_hz, 0);
      disarm_all();
    }
  }
  if (old && still_mine) cprof__sig_drop(&cpu_signal, old);
  else if (old) cprof__sig_forget(&cpu_signal, old);
  engine_give();
}

static void signal_taken(void) { move_signal(true); }

void cprof__cpu_signal_check(void) {
  if (atomic_load(&engine_hz) == 0 || cprof__sig_still_ours(&cpu_signal))
    return;
  move_signal(false);
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
  engine_take();
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
  engine_give();
  if (err) {
    cprof__agg_free(s->agg);
    cprof__free(s);
    return err;
  }
  engine_started();
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
  engine_take();
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
  bool idle = found && !others;
  if (idle) {
    atomic_store(&engine_hz, 0);
    disarm_all();
  }
  quiesce_handlers();
  /* Idle, the engine gives its signal back to the program. */
  int sig = atomic_load(&cpu_signal.signo);
  if (idle && sig) cprof__sig_drop(&cpu_signal, sig);
  if (found && keep) s->signo = sig;
  /* The profile is written outside the lock, so threads starting or
   * exiting meanwhile are not held up by symbolization; the names of
   * threads that already exited are copied for it. */
  size_t ngone = nexited;
  exited_name *gone = found && keep ? cprof__malloc(ngone * sizeof *gone + 1)
                                    : NULL;
  if (gone) memcpy(gone, exited, ngone * sizeof *gone);
  engine_give();
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
      .no_room = atomic_load(&s->no_room),
      .signo = s->signo,
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
  engine_take();
  if (atomic_load(&engine_hz) != 0 && timers_allowed())
    arm_thread(cprof__sys_gettid());
  engine_give();
}

void cprof__cpu_thread_exiting(void) {
  if (atomic_load(&engine_hz) == 0) return;
  pid_t tid = cprof__sys_gettid();
  engine_take();
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
  engine_give();
}
