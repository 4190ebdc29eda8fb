/* Loading optional libraries on first use (dynload.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/fork.h"
#include "cprof.h"
#include "base/dynload.h"
#include "base/mem.h"
#include "base/lock.h"

static CPROF__FORK_LOCK pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Fork: a child must not inherit the lock held by a thread that does not
 * exist there (one in the middle of a dlopen). Fork takes it when it is
 * free, without waiting, and hands it over; otherwise the child gets a
 * free lock, and a library whose loading had not finished is loaded again
 * there when first used. */
static CPROF__FORK_DATA bool held_at_fork;

static void before_fork(void) {
  held_at_fork = ((int (*)(pthread_mutex_t *))cprof__real(
                     CPROF__F_MUTEX_TRYLOCK))(&lock) == 0;
}

static void parent_after_fork(void) {
  if (held_at_fork) cprof__unlock(&lock);
}

static void child_after_fork(void) {
  if (held_at_fork)
    cprof__unlock(&lock);
  else
    pthread_mutex_init(&lock, NULL);
}

static void fork_init(void) {
  cprof__atfork(CPROF__FORK_DYNLOAD, before_fork, parent_after_fork,
                child_after_fork);
}

static int load(cprof__dynlib *lib) {
  void *h = NULL;
  const char *err = "no soname to try";
  for (const char *const *s = lib->sonames; *s && !h; s++) {
    /* RTLD_LOCAL: cprof reaches its symbols through the handle, and the
     * program's own symbol lookups stay as they were. */
    h = dlopen(*s, RTLD_NOW | RTLD_LOCAL);
    if (!h) err = dlerror();
  }
  if (!h) {
    snprintf(lib->why, sizeof lib->why, "cannot load %s: %s", lib->sonames[0],
             err ? err : "unknown error");
    return CPROF_EUNSUPPORTED;
  }
  for (size_t i = 0; i < lib->nsyms; i++) {
    *lib->syms[i].slot = dlsym(h, lib->syms[i].name);
    if (!*lib->syms[i].slot) {
      snprintf(lib->why, sizeof lib->why, "%s has no %s", lib->sonames[0],
               lib->syms[i].name);
      /* The handle stays open: the library may be in use elsewhere in the
       * program, and unloading it buys nothing. */
      return CPROF_EUNSUPPORTED;
    }
  }
  return 0;
}

int cprof__dynload(cprof__dynlib *lib) {
  /* dlopen runs the library's constructors, which allocate: none of that
   * is the application's. */
  fork_init();
  cprof__guard_enter();
  cprof__lock(&lock);
  if (lib->state == 0) lib->state = load(lib) == 0 ? 1 : -1;
  int rc = lib->state == 1 ? 0 : CPROF_EUNSUPPORTED;
  cprof__unlock(&lock);
  cprof__guard_exit();
  return rc;
}
