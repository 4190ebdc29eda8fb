/*
 * Starts threads the way jemalloc starts its background threads: through
 * the pthread_create that dlsym(RTLD_NEXT) finds from this library, which
 * is libc's, not cprof's interposer (cprof comes first in the global
 * scope, this library after it). For test/progs/plain_dlsym_thread.c,
 * which loads it with dlopen.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *,
                         void *(*)(void *), void *);

int next_thread_create(pthread_t *t, void *(*fn)(void *), void *arg) {
  create_fn create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
  if (!create) return ENOSYS;
  return create(t, NULL, fn, arg);
}
