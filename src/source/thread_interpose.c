/*
 * The pthread_create interposer (threads.h), which feeds the threadcreate
 * profile (profile/threadcreate.c).
 * The exported pthread_create shadows libc's both when the library is
 * linked (-lcprof puts it ahead of libc) and when it is preloaded; it calls
 * the next definition found by dlsym(RTLD_NEXT), so an allocator's or a
 * sanitizer's own interposer still runs. It records the creating stack,
 * counts it, and starts the thread in a trampoline. Normal context only; if
 * anything of cprof's fails, the thread is still created exactly as the
 * application asked.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "capture/agg.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/fork.h"
#include "capture/interposers.h"
#include "capture/sample.h"
#include "capture/stack.h"
#include "capture/stacktab.h"
#include "capture/taskread.h"
#include "source/threads.h"

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *,
                                 void *(*)(void *), void *);

static _Atomic(pthread_create_fn) real_create;
static cprof__agg *creations; /* threadcreate: count per creating stack */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Distinct creating stacks kept; more are counted as drops. */
#define THREADCREATE_STACKS 4096

static void *spawned_main(void *p);
static void *cprof__thread_main(void *p);

static void init_once_fn(void) {
  cprof__stacktab_init();
  /* For the tail-call frames (profile.c). */
  static const uintptr_t mine[] = {(uintptr_t)pthread_create};
  cprof__interposers_register(mine, CPROF__ARRAY_LEN(mine));
  cprof__thread_entry_register((uintptr_t)cprof__thread_main,
                               (uintptr_t)spawned_main);
  creations = cprof__agg_new(1, THREADCREATE_STACKS);
  atomic_store(&real_create,
               (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create"));
}

void cprof__threads_init(void) { pthread_once(&init_once, init_once_fn); }

/* The sources' start and exit hooks (threads.h), appended once each. */
#define MAX_HOOKS 4
typedef struct thread_hooks {
  void (*on_start)(void);
  void (*on_exit)(void);
} thread_hooks;
static thread_hooks hooks[MAX_HOOKS];
static _Atomic size_t nhooks;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;

void cprof__threads_hooks(void (*on_start)(void), void (*on_exit)(void)) {
  cprof__lock(&hooks_lock);
  size_t n = atomic_load(&nhooks);
  bool known = false;
  for (size_t i = 0; i < n; i++)
    known |= hooks[i].on_start == on_start && hooks[i].on_exit == on_exit;
  if (!known && n < MAX_HOOKS) {
    hooks[n] = (thread_hooks){on_start, on_exit};
    atomic_store_explicit(&nhooks, n + 1, memory_order_release);
  }
  cprof__unlock(&hooks_lock);
}

static void run_hooks(bool start) {
  size_t n = atomic_load_explicit(&nhooks, memory_order_acquire);
  for (size_t i = 0; i < n; i++) {
    void (*f)(void) = start ? hooks[i].on_start : hooks[i].on_exit;
    if (f) f();
  }
}

typedef struct thread_start {
  void *(*fn)(void *);
  void *arg;
  bool cprof_thread; /* created by cprof's own code: guarded for life */
  const cprof_labels *labels; /* the creator's, which the thread inherits */
  uint32_t create_sid; /* the creating stack, or CPROF__TASK_NO_STACK */
  const char *name; /* a thread of cprof's own: the name it gives itself */
} thread_start;

static pid_t own_tid(void) { return (pid_t)syscall(SYS_gettid); }

static void thread_exiting(void *arg) {
  const thread_start *start = arg;
  cprof__task_exiting(own_tid());
  cprof__guard_enter();
  run_hooks(false);
  cprof__stack_unregister_thread();
  cprof__guard_exit();
  if (start->cprof_thread) cprof__guard_exit();
}

static void *cprof__thread_main(void *p) {
  thread_start start = *(thread_start *)p;
  /* For the goroutine profile: its "created by" line, and cprof's own
   * threads left out; first, so that a collection finds it noted (one
   * that looks before, or after its exit is noted, leaves it out:
   * goroutine.c). */
  cprof__task_note(own_tid(), start.create_sid, start.cprof_thread);
  cprof__free(p);
  /* A thread created by cprof's own code (the HTTP server's connection
   * threads, through libmicrohttpd) is cprof's: it is not profiled. */
  if (start.cprof_thread) cprof__guard_enter();
  cprof__guard_enter();
  cprof__stack_register_thread();
  run_hooks(true);
  cprof__guard_exit();
  cprof_labels_push(start.labels);
  void *ret;
  pthread_cleanup_push(thread_exiting, &start);
  ret = start.fn(start.arg);
  pthread_cleanup_pop(1);
  return ret;
}


CPROF_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                                void *(*fn)(void *), void *arg) {
  int saved_errno = errno;
  cprof__threads_init();
  pthread_create_fn real = atomic_load(&real_create);
  if (!real) return EAGAIN;

  bool cprof_thread = cprof__guarded();
  cprof__stack_id sid = CPROF__TASK_NO_STACK;
  if (creations && !cprof_thread) {
    cprof__stack_refresh_try();
    /* From pthread_create's caller. */
    const cprof__sample_at at = {.from = CPROF__SAMPLE_HERE, .skip = 1};
    sid = cprof__sample_stack(&at, 0);
  }
  thread_start *start = cprof__malloc(sizeof *start);
  int rc;
  /* A thread a library starts from cprof's code, with no attributes of
   * its own, gets the small stack cprof's threads have. */
  pthread_attr_t small;
  if (cprof_thread && !attr && pthread_attr_init(&small) == 0) {
    if (cprof__thread_stack_attr(&small) == 0) attr = &small;
    else pthread_attr_destroy(&small);
  }
  if (start) {
    *start = (thread_start){fn, arg, cprof_thread, cprof_labels_current(),
                            sid, NULL};
    rc = real(thread, attr, cprof__thread_main, start);
    if (rc != 0) cprof__free(start);
  } else {
    rc = real(thread, attr, fn, arg);
  }
  if (attr == &small) pthread_attr_destroy(&small);
  if (rc == 0 && creations && !cprof_thread) {
    const int64_t one = 1;
    cprof__agg_add(creations, sid, 0, &one);
  }
  errno = saved_errno;
  return rc;
}

int cprof__thread_stack_attr(pthread_attr_t *attr) {
  size_t size = CPROF__THREAD_STACK;
  if (size < (size_t)PTHREAD_STACK_MIN) size = (size_t)PTHREAD_STACK_MIN;
  return pthread_attr_setstacksize(attr, size);
}

/* The blocks of spawns whose threads have not taken them yet: a process
 * that forks (or exits) right after a spawn leaves its block to no thread
 * (in a fork child, none of the parent's threads runs), and a pointer here
 * keeps leak checkers from reporting it. */
#define SPAWNS_PENDING 8
static _Atomic(thread_start *) spawn_pending[SPAWNS_PENDING];

static void spawn_track(thread_start *start, bool add) {
  for (int i = 0; i < SPAWNS_PENDING; i++) {
    thread_start *want = add ? NULL : start;
    if (atomic_compare_exchange_strong(&spawn_pending[i], &want,
                                       add ? start : NULL))
      return;
  }
}

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
/* A thread started in a fork child may be given a stack that a thread of
 * the parent was running on at the fork (glibc keeps those stacks for
 * reuse in the child), with that thread's live frames' redzones still
 * marked in AddressSanitizer's shadow: the new thread's first frames
 * there were reported as stack-buffer-overflows. The stack below the
 * thread's first frame (top) is the new thread's own: its shadow is
 * cleared (losing only the checks of that first frame's own redzones).
 * CPROF__THREAD_STACK less 64 KiB lies below top: the thread's TLS and
 * descriptor sit at the top of its stack. */
__attribute__((noinline)) static void stack_shadow_clear(char *top) {
  size_t span = CPROF__THREAD_STACK - 64 * 1024;
  __asan_unpoison_memory_region(top - span, span);
}
#else
static void stack_shadow_clear(char *top) { (void)top; }
#endif

static void *spawned_main(void *p) {
  stack_shadow_clear(__builtin_frame_address(0));
  /* The thread names itself: naming it from its creator
   * (pthread_setname_np) writes /proc/self/task/TID/comm, an open whose
   * entries the kernel walks again when the process is reaped. */
  const char *name = ((const thread_start *)p)->name;
  if (name) prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
  /* Started by a fork child's handler: nothing until every handler of
   * cprof's has run (base/fork.h). */
  cprof__fork_child_wait();
  pid_t tid = own_tid();
  cprof__task_note(tid, CPROF__TASK_NO_STACK, true);
  thread_start start = *(thread_start *)p;
  spawn_track(p, false);
  cprof__free(p);
  cprof__guard_enter();
  cprof__stack_register_thread();
  void *ret = start.fn(start.arg);
  cprof__task_exiting(tid);
  return ret;
}

int cprof__thread_spawn(pthread_t *thread, void *(*fn)(void *), void *arg,
                        const char *name) {
  cprof__threads_init();
  pthread_create_fn real = atomic_load(&real_create);
  if (!real) return EAGAIN;
  thread_start *start = cprof__malloc(sizeof *start);
  if (!start) return ENOMEM;
  *start = (thread_start){fn, arg, true, NULL, CPROF__TASK_NO_STACK, name};
  spawn_track(start, true);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  bool small = pthread_attr_init(&attr) == 0;
  if (small && cprof__thread_stack_attr(&attr) != 0) {
    pthread_attr_destroy(&attr);
    small = false;
  }
  /* Guarded, so that what libc allocates for the thread (its TLS vector)
   * comes from cprof's own heap, as everything it allocates later does. */
  cprof__guard_enter();
  int rc = real(thread, small ? &attr : NULL, spawned_main, start);
  /* A static TLS too large for the small stack: the default one. */
  if (rc == EINVAL && small) rc = real(thread, NULL, spawned_main, start);
  cprof__guard_exit();
  if (small) pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    spawn_track(start, false);
    cprof__free(start);
  }
  return rc;
}

cprof__agg *cprof__threads_creations(void) {
  cprof__threads_init();
  return creations;
}
