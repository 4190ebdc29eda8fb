/*
 * The table of pthread and semaphore functions underneath cprof (real.h):
 * their names, versions and recursion fallbacks, and the lookup. Normal
 * context only; the lookup may allocate inside the dynamic loader.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "base/real.h"

/*
 * glibc's own __pthread_* entry points, used when a lookup recurses. They
 * are compatibility symbols (no default version), so they are bound to the
 * base version explicitly; on other architectures there is no fallback and
 * a recursive lookup fails the call with EAGAIN.
 */
#if defined(__x86_64__)
#define GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GLIBC_BASE "GLIBC_2.17"
#endif
#ifdef GLIBC_BASE
#define GLIBC_ALIAS(local, name) \
  __asm__(".symver " #local ", " #name "@" GLIBC_BASE)
extern int glibc_mutex_lock(pthread_mutex_t *m);
extern int glibc_mutex_trylock(pthread_mutex_t *m);
extern int glibc_mutex_unlock(pthread_mutex_t *m);
extern int glibc_rwlock_rdlock(pthread_rwlock_t *l);
extern int glibc_rwlock_tryrdlock(pthread_rwlock_t *l);
extern int glibc_rwlock_wrlock(pthread_rwlock_t *l);
extern int glibc_rwlock_trywrlock(pthread_rwlock_t *l);
extern int glibc_rwlock_unlock(pthread_rwlock_t *l);
GLIBC_ALIAS(glibc_mutex_lock, __pthread_mutex_lock);
GLIBC_ALIAS(glibc_mutex_trylock, __pthread_mutex_trylock);
GLIBC_ALIAS(glibc_mutex_unlock, __pthread_mutex_unlock);
GLIBC_ALIAS(glibc_rwlock_rdlock, __pthread_rwlock_rdlock);
GLIBC_ALIAS(glibc_rwlock_tryrdlock, __pthread_rwlock_tryrdlock);
GLIBC_ALIAS(glibc_rwlock_wrlock, __pthread_rwlock_wrlock);
GLIBC_ALIAS(glibc_rwlock_trywrlock, __pthread_rwlock_trywrlock);
GLIBC_ALIAS(glibc_rwlock_unlock, __pthread_rwlock_unlock);
#define FALLBACK(fn) ((void *)(fn))
#else
#define FALLBACK(fn) NULL
#endif


typedef struct real_fn_info {
  const char *name;
  const char *version; /* tried first with dlvsym, when set */
  void *fallback;      /* used while a lookup is in progress on the thread */
} real_fn_info;

/* x86-64's pthread_cond_* have an old (2.2.5) and a current (2.3.2)
 * version; plain dlsym may return the old one. Elsewhere dlvsym fails and
 * dlsym returns the default, current version. */
static const real_fn_info fn_info[CPROF__F_COUNT] = {
    [CPROF__F_MUTEX_LOCK] = {"pthread_mutex_lock", NULL, FALLBACK(glibc_mutex_lock)},
    [CPROF__F_MUTEX_TRYLOCK] = {"pthread_mutex_trylock", NULL,
                         FALLBACK(glibc_mutex_trylock)},
    [CPROF__F_MUTEX_TIMEDLOCK] = {"pthread_mutex_timedlock", NULL, NULL},
    [CPROF__F_MUTEX_CLOCKLOCK] = {"pthread_mutex_clocklock", NULL, NULL},
    [CPROF__F_MUTEX_UNLOCK] = {"pthread_mutex_unlock", NULL,
                        FALLBACK(glibc_mutex_unlock)},
    [CPROF__F_RW_RDLOCK] = {"pthread_rwlock_rdlock", NULL,
                     FALLBACK(glibc_rwlock_rdlock)},
    [CPROF__F_RW_TRYRDLOCK] = {"pthread_rwlock_tryrdlock", NULL,
                        FALLBACK(glibc_rwlock_tryrdlock)},
    [CPROF__F_RW_TIMEDRDLOCK] = {"pthread_rwlock_timedrdlock", NULL, NULL},
    [CPROF__F_RW_CLOCKRDLOCK] = {"pthread_rwlock_clockrdlock", NULL, NULL},
    [CPROF__F_RW_WRLOCK] = {"pthread_rwlock_wrlock", NULL,
                     FALLBACK(glibc_rwlock_wrlock)},
    [CPROF__F_RW_TRYWRLOCK] = {"pthread_rwlock_trywrlock", NULL,
                        FALLBACK(glibc_rwlock_trywrlock)},
    [CPROF__F_RW_TIMEDWRLOCK] = {"pthread_rwlock_timedwrlock", NULL, NULL},
    [CPROF__F_RW_CLOCKWRLOCK] = {"pthread_rwlock_clockwrlock", NULL, NULL},
    [CPROF__F_RW_UNLOCK] = {"pthread_rwlock_unlock", NULL,
                     FALLBACK(glibc_rwlock_unlock)},
    [CPROF__F_COND_WAIT] = {"pthread_cond_wait", "GLIBC_2.3.2", NULL},
    [CPROF__F_COND_TIMEDWAIT] = {"pthread_cond_timedwait", "GLIBC_2.3.2", NULL},
    [CPROF__F_COND_CLOCKWAIT] = {"pthread_cond_clockwait", NULL, NULL},
    [CPROF__F_SEM_WAIT] = {"sem_wait", NULL, NULL},
    [CPROF__F_SEM_TRYWAIT] = {"sem_trywait", NULL, NULL},
    [CPROF__F_SEM_TIMEDWAIT] = {"sem_timedwait", NULL, NULL},
    [CPROF__F_SEM_CLOCKWAIT] = {"sem_clockwait", NULL, NULL},
    [CPROF__F_BARRIER_WAIT] = {"pthread_barrier_wait", NULL, NULL},
    [CPROF__F_JOIN] = {"pthread_join", NULL, NULL},
    [CPROF__F_TRYJOIN] = {"pthread_tryjoin_np", NULL, NULL},
    [CPROF__F_SIGACTION] = {"sigaction", NULL, NULL},
};

_Atomic(void *) cprof__real_fns[CPROF__F_COUNT];
static __thread int resolving CPROF__TLS;

void *cprof__real_resolve(int f) {
  const real_fn_info *fi = &fn_info[f];
  if (resolving) return fi->fallback;
  resolving = 1;
  void *p = dlsym(RTLD_NEXT, fi->name);
  if (fi->version) {
    /* Take the versioned symbol only from the object dlsym found: when a
     * sanitizer's interceptor comes next, it must stay in the chain (it
     * picks libc's version itself). Usually both are the same pointer,
     * which spares the two dladdr calls (a symbol-table search each, a
     * third of cprof's start-up instructions). */
    void *v = dlvsym(RTLD_NEXT, fi->name, fi->version);
    Dl_info pi, vi;
    if (!p || p == v ||
        (v && dladdr(p, &pi) && dladdr(v, &vi) &&
         pi.dli_fbase == vi.dli_fbase))
      p = v ? v : p;
  }
  resolving = 0;
  if (!p) p = fi->fallback;
  if (p) atomic_store_explicit(&cprof__real_fns[f], p, memory_order_release);
  return p;
}

/* What a call to a function that cannot be found does: fail with EAGAIN.
 * Called through the caller's pointer type; the SysV and AAPCS64 calling
 * conventions make the extra arguments harmless. */
int cprof__real_missing(void) { return EAGAIN; }

void cprof__real_init(void) {
  for (int f = 0; f < CPROF__F_COUNT; f++) cprof__real(f);
}
