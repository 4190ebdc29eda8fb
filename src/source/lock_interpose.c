/*
 * The pthread interposers that feed the mutex and block profiles
 * (lock_interpose.h; the profiles themselves are profile/contention.c). Each exported function shadows libc's, linked or
 * preloaded, and calls the next definition (libc's, or a sanitizer's)
 * found once with dlsym(RTLD_NEXT) or dlvsym for versioned symbols. If a
 * lookup recurses (dlsym can allocate, and an allocator can lock), the
 * mutex and rwlock functions fall back to glibc's exported __pthread_*
 * aliases.
 *
 * The interposers run on the application's hottest paths, so they must
 * never allocate, take a lock of their own, or change errno; when both
 * profiles are off they do one relaxed load and a branch before calling
 * the real function. Recording (stack walk, intern, aggregate) is lock-free
 * and allocation-free. Tables are allocated in normal context, when a
 * profile is switched on, never on a lock path.
 *
 * Mutex attribution: a waiter registers in a small lock-free side table
 * keyed by the lock's address before it blocks; an unlocker that finds
 * waiters registered walks its own stack and leaves the stack id in the
 * slot; the waiter, once it holds the lock, charges its measured wait to
 * that id. So a wait is charged to the last explicit unlock before the
 * waiter got the lock, as Go charges it to the unlock that woke the waiter.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/fork.h"
#include "capture/agg.h"
#include "source/lock_interpose.h"
#include "base/env.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/real.h"
#include "base/rng.h"
#include "capture/interposers.h"
#include "capture/stack.h"
#include "capture/labels.h"
#include "capture/sample.h"
#include "capture/stacktab.h"

/* Distinct stacks each profile keeps; more are counted as drops. */
#define CONTENTION_STACKS 8192

/* The waiter side table: a power of two, probed linearly a few slots. */
#define WAIT_SLOTS 4096
#define WAIT_PROBES 8
#define WAITERS_MASK ((uint64_t)0xffff)


/* The switches the interposers read: any_on guards the lock paths,
 * mutex_on the unlock paths, block_on the wait-only paths. */
static _Atomic bool any_on, mutex_on, block_on;
static _Atomic int mutex_fraction;
static _Atomic long long block_rate;
static _Atomic(cprof__agg *) block_agg, mutex_agg;
static pthread_mutex_t settings_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct wait_slot {
  _Atomic uint64_t state; /* lock address << 16 | waiters; 0 = free */
  _Atomic cprof__stack_id unlocker;
} wait_slot;
static wait_slot wait_table[WAIT_SLOTS];
/* Set once a slot has been taken: until then a fork child need not look
 * at the table (reading its 16 untouched pages faults each in). */
static atomic_bool wait_used;

static __thread uint64_t rnd_state CPROF__TLS;


typedef int (*mutex_fn)(pthread_mutex_t *);
typedef int (*mutex_timed_fn)(pthread_mutex_t *, const struct timespec *);
typedef int (*mutex_clock_fn)(pthread_mutex_t *, clockid_t,
                              const struct timespec *);
typedef int (*rw_fn)(pthread_rwlock_t *);
typedef int (*rw_timed_fn)(pthread_rwlock_t *, const struct timespec *);
typedef int (*rw_clock_fn)(pthread_rwlock_t *, clockid_t,
                           const struct timespec *);
typedef int (*cond_fn)(pthread_cond_t *, pthread_mutex_t *);
typedef int (*cond_timed_fn)(pthread_cond_t *, pthread_mutex_t *,
                             const struct timespec *);
typedef int (*cond_clock_fn)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                             const struct timespec *);
typedef int (*sem_fn)(sem_t *);
typedef int (*sem_timed_fn)(sem_t *, const struct timespec *);
typedef int (*sem_clock_fn)(sem_t *, clockid_t, const struct timespec *);
typedef int (*barrier_fn)(pthread_barrier_t *);
typedef int (*join_fn)(pthread_t, void **);

/* A missing function (a lookup that recursed where glibc has no alias)
 * fails the call rather than crash. */
#define CALL(f, type, ...) (((type)cprof__real(f))(__VA_ARGS__))

/* Where an interposer was called from: the caller's pc (as a call site),
 * its frame pointer and the lowest address its frames can be at, read from
 * the interposer's own frame record {saved frame pointer, return address}
 * (the layout on x86-64 and AArch64 alike). */
typedef struct frame_ref {
  uintptr_t pc, fp, sp;
} frame_ref;

static inline frame_ref frame_of(const void *frame) {
  const uintptr_t *rec = frame;
  return (frame_ref){rec[1] - 1, rec[0], (uintptr_t)frame + 2 * sizeof *rec};
}

/* Must be expanded in the exported function itself. */
#define CALLER_FRAME() frame_of(__builtin_frame_address(0))

/* Calls a slow path with the interposer's frame; the empty asm keeps the
 * call out of tail position, so the frame outlives it. */
#define SLOW_PATH(call)                     \
  do {                                      \
    int rc_ = (call);                       \
    __asm__ volatile("" ::: "memory");      \
    return rc_;                             \
  } while (0)
#define HERE __builtin_frame_address(0)

static cprof__stack_id intern_at(frame_ref at) {
  const cprof__sample_at from = {
      .from = CPROF__SAMPLE_FRAME, .pc = at.pc, .fp = at.fp, .sp = at.sp};
  return cprof__sample_stack(&from, CPROF__SAMPLE_LABELS);
}

static uint64_t rnd(void) {
  if (!rnd_state) rnd_state = cprof__rng_seed((uint64_t)syscall(SYS_gettid));
  return cprof__rng_next(&rnd_state);
}

bool cprof__block_weigh(int64_t d, int64_t rate, uint64_t rnd_value,
                        int64_t *count, int64_t *delay) {
  if (rate <= 0) return false;
  if (d <= 0) d = 1;
  /* Go's blocksampled: an event shorter than the rate is kept with
   * probability about d/rate ... */
  if (rate > d && (int64_t)(rnd_value % (uint64_t)rate) > d) return false;
  /* ... and then stands for rate/d events of rate ns each (saveblockevent),
   * which keeps both sums unbiased. */
  if (d < rate) {
    *count = rate * CPROF__CONTENTION_UNIT / d;
    *delay = rate;
  } else {
    *count = CPROF__CONTENTION_UNIT;
    *delay = d;
  }
  return true;
}

/* Waits and unlocks inside cprof (its own locks, its own threads) are the
 * profiler's business, not the program's: neither profile records them. */
static void record_block(int64_t d, frame_ref at) {
  if (cprof__guarded()) return;
  long long rate = atomic_load_explicit(&block_rate, memory_order_relaxed);
  cprof__agg *agg = atomic_load_explicit(&block_agg, memory_order_acquire);
  int64_t v[2];
  if (!agg || !cprof__block_weigh(d, rate, rnd(), &v[0], &v[1])) return;
  cprof__agg_add(agg, intern_at(at), 0, v);
}

/* Go's mutexevent: 1 in fraction events, each standing for fraction. */
static void record_mutex(int64_t d, cprof__stack_id unlocker) {
  if (cprof__guarded()) return;
  int frac = atomic_load_explicit(&mutex_fraction, memory_order_relaxed);
  cprof__agg *agg = atomic_load_explicit(&mutex_agg, memory_order_acquire);
  if (frac <= 0 || !agg) return;
  if (frac > 1 && rnd() % (uint64_t)frac != 0) return;
  if (d < 0) d = 0;
  if (unlocker == CPROF__STACK_NONE) {
    const uintptr_t pc = CPROF__PC_UNSEEN_UNLOCKER;
    unlocker = cprof__stacktab_intern(&pc, 1);
  }
  /* The wait is the waiter's: its labels, on the unlocker's stack. */
  unlocker = cprof__labels_restack(unlocker);
  const int64_t v[2] = {(int64_t)frac * CPROF__CONTENTION_UNIT,
                        (int64_t)frac * d};
  cprof__agg_add(agg, unlocker, 0, v);
}

static size_t slot_hash(uintptr_t key) {
  return cprof__hash_word((uint64_t)key, 12) & (WAIT_SLOTS - 1);
}

/* Registers a waiter on the lock at key; returns its slot or -1 when the
 * address does not fit or the probe window is full. */
static int waiter_enter(uintptr_t key) {
  if (key == 0 || key >> 48) return -1;
  size_t h = slot_hash(key);
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < WAIT_PROBES; i++) {
      size_t idx = (h + i) & (WAIT_SLOTS - 1);
      wait_slot *s = &wait_table[idx];
      uint64_t st = atomic_load(&s->state);
      for (;;) {
        if (st >> 16 == key && (st & WAITERS_MASK) != WAITERS_MASK) {
          if (atomic_compare_exchange_weak(&s->state, &st, st + 1))
            return (int)idx;
        } else if (st == 0 && pass == 1) {
          if (atomic_compare_exchange_weak(&s->state, &st,
                                           (uint64_t)key << 16 | 1)) {
            if (!atomic_load_explicit(&wait_used, memory_order_relaxed))
              atomic_store(&wait_used, true);
            atomic_store(&s->unlocker, CPROF__STACK_NONE);
            return (int)idx;
          }
        } else {
          break;
        }
      }
    }
  }
  return -1;
}

/* Unregisters a waiter; returns the stack of the last unlock it saw. */
static cprof__stack_id waiter_exit(int idx) {
  wait_slot *s = &wait_table[idx];
  cprof__stack_id sid = atomic_load(&s->unlocker);
  uint64_t st = atomic_load(&s->state);
  for (;;) {
    uint64_t next = (st & WAITERS_MASK) == 1 ? 0 : st - 1;
    if (atomic_compare_exchange_weak(&s->state, &st, next)) break;
  }
  return sid;
}

/* An unlock: when waiters are registered on this lock, leave them the
 * unlocker's stack. */
__attribute__((noinline)) static void note_unlock(uintptr_t key,
                                                  const void *frame) {
  if (key == 0 || key >> 48 || cprof__guarded()) return;
  size_t h = slot_hash(key);
  for (size_t i = 0; i < WAIT_PROBES; i++) {
    wait_slot *s = &wait_table[(h + i) & (WAIT_SLOTS - 1)];
    uint64_t st = atomic_load_explicit(&s->state, memory_order_relaxed);
    if (st >> 16 == key && (st & WAITERS_MASK) != 0) {
      atomic_store(&s->unlocker, intern_at(frame_of(frame)));
      return;
    }
  }
}

/* A timed wait on a lock that a try could not take. */
typedef struct wait_ctx {
  int64_t t0;
  int slot;
} wait_ctx;

static void wait_begin(wait_ctx *w, const void *lock) {
  w->slot = lock && atomic_load_explicit(&mutex_on, memory_order_relaxed)
                ? waiter_enter((uintptr_t)lock)
                : -1;
  w->t0 = cprof__mono_ns();
}

static void wait_end(const wait_ctx *w, frame_ref at, bool acquired) {
  int64_t d = cprof__mono_ns() - w->t0;
  cprof__stack_id unlocker =
      w->slot >= 0 ? waiter_exit(w->slot) : CPROF__STACK_NONE;
  record_block(d, at);
  if (acquired && w->slot >= 0) record_mutex(d, unlocker);
}

/* A wait that is only a block event (condition, semaphore, barrier). */
static void wait_only_end(int64_t t0, frame_ref at) {
  record_block(cprof__mono_ns() - t0, at);
}

/* The exported interposers: never inlined, since CALLER_FRAME() reads
 * their own frame. */
#define INTERPOSER CPROF_EXPORT __attribute__((noinline))

/* The fast path: the switch is off and the real function is known. */
#define FAST(flag, f, type, ...)                                       \
  do {                                                                 \
    void *p_ = atomic_load_explicit(&cprof__real_fns[f], memory_order_relaxed); \
    if (CPROF__LIKELY(                                                 \
            !atomic_load_explicit(&(flag), memory_order_relaxed) && p_)) \
      return ((type)p_)(__VA_ARGS__);                                  \
  } while (0)

#define OFF(flag) \
  CPROF__LIKELY(!atomic_load_explicit(&(flag), memory_order_relaxed))

/* The slow paths are noinline so the fast paths stay a load, a branch and
 * a tail call. */
__attribute__((noinline)) static int mutex_lock_slow(pthread_mutex_t *m,
                                                     const void *frame) {
  if (OFF(any_on)) return CALL(CPROF__F_MUTEX_LOCK, mutex_fn, m);
  int rc = CALL(CPROF__F_MUTEX_TRYLOCK, mutex_fn, m);
  if (rc != EBUSY) return rc;
  wait_ctx w;
  wait_begin(&w, m);
  rc = CALL(CPROF__F_MUTEX_LOCK, mutex_fn, m);
  wait_end(&w, frame_of(frame), rc == 0);
  return rc;
}

INTERPOSER int pthread_mutex_lock(pthread_mutex_t *m) {
  FAST(any_on, CPROF__F_MUTEX_LOCK, mutex_fn, m);
  SLOW_PATH(mutex_lock_slow(m, HERE));
}

__attribute__((noinline)) static int mutex_timed_slow(
    pthread_mutex_t *m, clockid_t clock, const struct timespec *abs,
    bool with_clock, const void *frame) {
  int rc = CALL(CPROF__F_MUTEX_TRYLOCK, mutex_fn, m);
  if (rc != EBUSY) return rc;
  wait_ctx w;
  wait_begin(&w, m);
  rc = with_clock ? CALL(CPROF__F_MUTEX_CLOCKLOCK, mutex_clock_fn, m, clock, abs)
                  : CALL(CPROF__F_MUTEX_TIMEDLOCK, mutex_timed_fn, m, abs);
  wait_end(&w, frame_of(frame), rc == 0);
  return rc;
}

INTERPOSER int pthread_mutex_timedlock(pthread_mutex_t *m,
                                         const struct timespec *abs) {
  if (OFF(any_on)) return CALL(CPROF__F_MUTEX_TIMEDLOCK, mutex_timed_fn, m, abs);
  SLOW_PATH(mutex_timed_slow(m, CLOCK_REALTIME, abs, false, HERE));
}

INTERPOSER int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock,
                                         const struct timespec *abs) {
  if (OFF(any_on))
    return CALL(CPROF__F_MUTEX_CLOCKLOCK, mutex_clock_fn, m, clock, abs);
  SLOW_PATH(mutex_timed_slow(m, clock, abs, true, HERE));
}

__attribute__((noinline)) static int mutex_unlock_slow(pthread_mutex_t *m,
                                                       const void *frame) {
  if (!OFF(mutex_on)) note_unlock((uintptr_t)m, frame);
  return CALL(CPROF__F_MUTEX_UNLOCK, mutex_fn, m);
}

INTERPOSER int pthread_mutex_unlock(pthread_mutex_t *m) {
  FAST(mutex_on, CPROF__F_MUTEX_UNLOCK, mutex_fn, m);
  SLOW_PATH(mutex_unlock_slow(m, HERE));
}

/* Read and write locks share one slow path: kind picks the functions. */
typedef struct rw_kind {
  int try_fn, lock_fn, timed_fn, clock_fn;
} rw_kind;
static const rw_kind RD = {CPROF__F_RW_TRYRDLOCK, CPROF__F_RW_RDLOCK, CPROF__F_RW_TIMEDRDLOCK,
                           CPROF__F_RW_CLOCKRDLOCK};
static const rw_kind WR = {CPROF__F_RW_TRYWRLOCK, CPROF__F_RW_WRLOCK, CPROF__F_RW_TIMEDWRLOCK,
                           CPROF__F_RW_CLOCKWRLOCK};

/* mode: 0 untimed, 1 timed (CLOCK_REALTIME), 2 with a clock. */
__attribute__((noinline)) static int rw_slow(pthread_rwlock_t *l,
                                             const rw_kind *k, int mode,
                                             clockid_t clock,
                                             const struct timespec *abs,
                                             const void *frame) {
  if (OFF(any_on) && mode == 0) return CALL(k->lock_fn, rw_fn, l);
  int rc = CALL(k->try_fn, rw_fn, l);
  if (rc != EBUSY) return rc;
  wait_ctx w;
  wait_begin(&w, l);
  if (mode == 0)
    rc = CALL(k->lock_fn, rw_fn, l);
  else if (mode == 1)
    rc = CALL(k->timed_fn, rw_timed_fn, l, abs);
  else
    rc = CALL(k->clock_fn, rw_clock_fn, l, clock, abs);
  wait_end(&w, frame_of(frame), rc == 0);
  return rc;
}

INTERPOSER int pthread_rwlock_rdlock(pthread_rwlock_t *l) {
  FAST(any_on, CPROF__F_RW_RDLOCK, rw_fn, l);
  SLOW_PATH(rw_slow(l, &RD, 0, 0, NULL, HERE));
}

INTERPOSER int pthread_rwlock_wrlock(pthread_rwlock_t *l) {
  FAST(any_on, CPROF__F_RW_WRLOCK, rw_fn, l);
  SLOW_PATH(rw_slow(l, &WR, 0, 0, NULL, HERE));
}

INTERPOSER int pthread_rwlock_timedrdlock(pthread_rwlock_t *l,
                                            const struct timespec *abs) {
  if (OFF(any_on)) return CALL(CPROF__F_RW_TIMEDRDLOCK, rw_timed_fn, l, abs);
  SLOW_PATH(rw_slow(l, &RD, 1, 0, abs, HERE));
}

INTERPOSER int pthread_rwlock_timedwrlock(pthread_rwlock_t *l,
                                            const struct timespec *abs) {
  if (OFF(any_on)) return CALL(CPROF__F_RW_TIMEDWRLOCK, rw_timed_fn, l, abs);
  SLOW_PATH(rw_slow(l, &WR, 1, 0, abs, HERE));
}

INTERPOSER int pthread_rwlock_clockrdlock(pthread_rwlock_t *l,
                                            clockid_t clock,
                                            const struct timespec *abs) {
  if (OFF(any_on)) return CALL(CPROF__F_RW_CLOCKRDLOCK, rw_clock_fn, l, clock, abs);
  SLOW_PATH(rw_slow(l, &RD, 2, clock, abs, HERE));
}

INTERPOSER int pthread_rwlock_clockwrlock(pthread_rwlock_t *l,
                                            clockid_t clock,
                                            const struct timespec *abs) {
  if (OFF(any_on)) return CALL(CPROF__F_RW_CLOCKWRLOCK, rw_clock_fn, l, clock, abs);
  SLOW_PATH(rw_slow(l, &WR, 2, clock, abs, HERE));
}

__attribute__((noinline)) static int rw_unlock_slow(pthread_rwlock_t *l,
                                                    const void *frame) {
  if (!OFF(mutex_on)) note_unlock((uintptr_t)l, frame);
  return CALL(CPROF__F_RW_UNLOCK, rw_fn, l);
}

INTERPOSER int pthread_rwlock_unlock(pthread_rwlock_t *l) {
  FAST(mutex_on, CPROF__F_RW_UNLOCK, rw_fn, l);
  SLOW_PATH(rw_unlock_slow(l, HERE));
}

/* Condition waits always block, so they are timed whole (re-acquiring the
 * mutex included, as Go's sync.Cond.Wait is). The wait releases the mutex
 * inside libc, where no unlock interposer sees it: the caller is noted as
 * its unlocker first, so that the threads it held up are charged to it.
 * mode: 0 untimed, 1 timed (CLOCK_REALTIME), 2 with a clock. */
__attribute__((noinline)) static int cond_slow(pthread_cond_t *c,
                                               pthread_mutex_t *m, int mode,
                                               clockid_t clock,
                                               const struct timespec *abs,
                                               const void *frame) {
  if (!OFF(mutex_on)) note_unlock((uintptr_t)m, frame);
  const bool timed = !OFF(block_on);
  const int64_t t0 = timed ? cprof__mono_ns() : 0;
  int rc;
  if (mode == 0)
    rc = CALL(CPROF__F_COND_WAIT, cond_fn, c, m);
  else if (mode == 1)
    rc = CALL(CPROF__F_COND_TIMEDWAIT, cond_timed_fn, c, m, abs);
  else
    rc = CALL(CPROF__F_COND_CLOCKWAIT, cond_clock_fn, c, m, clock, abs);
  if (timed) wait_only_end(t0, frame_of(frame));
  return rc;
}

INTERPOSER int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
  if (OFF(any_on)) return CALL(CPROF__F_COND_WAIT, cond_fn, c, m);
  SLOW_PATH(cond_slow(c, m, 0, 0, NULL, HERE));
}

INTERPOSER int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                        const struct timespec *abs) {
  if (OFF(any_on)) return CALL(CPROF__F_COND_TIMEDWAIT, cond_timed_fn, c, m, abs);
  SLOW_PATH(cond_slow(c, m, 1, 0, abs, HERE));
}

INTERPOSER int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m,
                                        clockid_t clock,
                                        const struct timespec *abs) {
  if (OFF(any_on))
    return CALL(CPROF__F_COND_CLOCKWAIT, cond_clock_fn, c, m, clock, abs);
  SLOW_PATH(cond_slow(c, m, 2, clock, abs, HERE));
}

/* Semaphores report errors through errno: a failed try must not leave its
 * EAGAIN behind, and recording must not disturb the wait's errno. */
__attribute__((noinline)) static int sem_slow(sem_t *s, int mode,
                                              clockid_t clock,
                                              const struct timespec *abs,
                                              const void *frame) {
  int saved = errno;
  if (CALL(CPROF__F_SEM_TRYWAIT, sem_fn, s) == 0) return 0;
  errno = saved;
  int64_t t0 = cprof__mono_ns();
  int rc = mode == 0   ? CALL(CPROF__F_SEM_WAIT, sem_fn, s)
           : mode == 1 ? CALL(CPROF__F_SEM_TIMEDWAIT, sem_timed_fn, s, abs)
                       : CALL(CPROF__F_SEM_CLOCKWAIT, sem_clock_fn, s, clock, abs);
  saved = errno;
  wait_only_end(t0, frame_of(frame));
  errno = saved;
  return rc;
}

INTERPOSER int sem_wait(sem_t *s) {
  if (OFF(block_on)) return CALL(CPROF__F_SEM_WAIT, sem_fn, s);
  SLOW_PATH(sem_slow(s, 0, 0, NULL, HERE));
}

INTERPOSER int sem_timedwait(sem_t *s, const struct timespec *abs) {
  if (OFF(block_on)) return CALL(CPROF__F_SEM_TIMEDWAIT, sem_timed_fn, s, abs);
  SLOW_PATH(sem_slow(s, 1, 0, abs, HERE));
}

INTERPOSER int sem_clockwait(sem_t *s, clockid_t clock,
                               const struct timespec *abs) {
  if (OFF(block_on)) return CALL(CPROF__F_SEM_CLOCKWAIT, sem_clock_fn, s, clock, abs);
  SLOW_PATH(sem_slow(s, 2, clock, abs, HERE));
}

INTERPOSER int pthread_barrier_wait(pthread_barrier_t *b) {
  if (OFF(block_on)) return CALL(CPROF__F_BARRIER_WAIT, barrier_fn, b);
  int64_t t0 = cprof__mono_ns();
  int rc = CALL(CPROF__F_BARRIER_WAIT, barrier_fn, b);
  wait_only_end(t0, CALLER_FRAME());
  return rc;
}

/* A join of a thread that already finished is not a wait: try first. */
__attribute__((noinline)) static int join_slow(pthread_t t, void **ret,
                                               const void *frame) {
  int rc = CALL(CPROF__F_TRYJOIN, join_fn, t, ret);
  if (rc != EBUSY) return rc;
  int64_t t0 = cprof__mono_ns();
  rc = CALL(CPROF__F_JOIN, join_fn, t, ret);
  wait_only_end(t0, frame_of(frame));
  return rc;
}

INTERPOSER int pthread_join(pthread_t t, void **ret) {
  if (OFF(block_on)) return CALL(CPROF__F_JOIN, join_fn, t, ret);
  SLOW_PATH(join_slow(t, ret, HERE));
}

/* Settings. */

static cprof__agg *ensure_agg(_Atomic(cprof__agg *) *slot) {
  cprof__agg *a = atomic_load(slot);
  if (!a) {
    a = cprof__agg_new(2, CONTENTION_STACKS);
    if (a) atomic_store(slot, a);
  }
  return a;
}

/* settings_lock held. */
static void update_switches(void) {
  bool m = atomic_load(&mutex_fraction) > 0;
  bool b = atomic_load(&block_rate) > 0;
  atomic_store(&mutex_on, m);
  atomic_store(&block_on, b);
  atomic_store(&any_on, m || b);
}

int cprof_set_mutex_profile_fraction(int rate) {
  if (rate < 0) return atomic_load(&mutex_fraction);
  cprof__lock(&settings_lock);
  cprof__stacktab_init();
  if (rate > 0) ensure_agg(&mutex_agg);
  int prev = atomic_exchange(&mutex_fraction, rate);
  update_switches();
  cprof__unlock(&settings_lock);
  return prev;
}

int cprof_set_block_profile_rate(long long rate_ns) {
  if (rate_ns < 0) rate_ns = 0;
  cprof__lock(&settings_lock);
  cprof__stacktab_init();
  int err = 0;
  if (rate_ns > 0 && !ensure_agg(&block_agg)) err = CPROF_ENOMEM;
  if (!err) atomic_store(&block_rate, rate_ns);
  update_switches();
  cprof__unlock(&settings_lock);
  return err;
}

long long cprof_block_profile_rate(void) { return atomic_load(&block_rate); }

bool cprof__mutex_profile_enabled(void) {
  return atomic_load_explicit(&mutex_fraction, memory_order_relaxed) > 0;
}

bool cprof__block_profile_enabled(void) {
  return atomic_load_explicit(&block_rate, memory_order_relaxed) > 0;
}

static void child_after_fork(void) {
  /* Waiters registered by threads that do not exist in the child would
   * make every unlock of their locks walk a stack; forget them. Only the
   * slots in use are written: a write to each of the table's 16 pages
   * would copy it, in every fork child. */
  if (!atomic_load(&wait_used)) return;
  for (size_t i = 0; i < WAIT_SLOTS; i++) {
    if (atomic_load_explicit(&wait_table[i].state, memory_order_relaxed))
      atomic_store(&wait_table[i].state, 0);
    if (atomic_load_explicit(&wait_table[i].unlocker, memory_order_relaxed) !=
        CPROF__STACK_NONE)
      atomic_store(&wait_table[i].unlocker, CPROF__STACK_NONE);
  }
}

void cprof__contention_env_init(void) {
  cprof__real_init();
  /* The lock and wait interposers, as a program's calls reach them, for
   * the tail-call frames (profile.c). */
  static const uintptr_t mine[] = {
      (uintptr_t)pthread_join,
      (uintptr_t)pthread_mutex_lock, (uintptr_t)pthread_mutex_timedlock,
      (uintptr_t)pthread_mutex_clocklock, (uintptr_t)pthread_mutex_unlock,
      (uintptr_t)pthread_rwlock_rdlock, (uintptr_t)pthread_rwlock_wrlock,
      (uintptr_t)pthread_rwlock_timedrdlock,
      (uintptr_t)pthread_rwlock_timedwrlock,
      (uintptr_t)pthread_rwlock_clockrdlock,
      (uintptr_t)pthread_rwlock_clockwrlock, (uintptr_t)pthread_rwlock_unlock,
      (uintptr_t)pthread_cond_wait, (uintptr_t)pthread_cond_timedwait,
      (uintptr_t)pthread_cond_clockwait, (uintptr_t)sem_wait,
      (uintptr_t)sem_timedwait, (uintptr_t)sem_clockwait,
      (uintptr_t)pthread_barrier_wait};
  cprof__interposers_register(mine, CPROF__ARRAY_LEN(mine));
  cprof__atfork(CPROF__FORK_LOCKS, NULL, NULL, child_after_fork);
  long long v;
  if (cprof__env_int("CPROF_MUTEX_FRACTION", 0, INT_MAX,
                     "mutex profile disabled", &v))
    cprof_set_mutex_profile_fraction((int)v);
  if (cprof__env_int("CPROF_BLOCK_RATE", 0, LLONG_MAX,
                     "block profile disabled", &v))
    cprof_set_block_profile_rate(v);
}

/* For the profiles (profile/contention.c). */
cprof__agg *cprof__contention_agg(bool mutex) {
  return atomic_load(mutex ? &mutex_agg : &block_agg);
}

int cprof__mutex_fraction(void) { return atomic_load(&mutex_fraction); }
