/*
 * Loading optional libraries on first use: a library that loads resolves
 * every symbol and calls through; a missing library or a missing symbol is
 * CPROF_EUNSUPPORTED with a reason naming it, and the first result sticks.
 * A fork while another thread's first load registers the fork handlers
 * leaves the child a load that works.
 */
#include <cprof.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/dynload.h"
#include "base/fork.h"
#include "testutil.h"

/* The first load registers dynload's fork handlers, and a registration
 * waits while a fork is under way (the registration lock is held across
 * it). Here a fork is held open, by a prepare handler put in a slot no
 * unit test uses (the process tree's), until another thread's first load
 * has begun and waited a while; the child then loads a library itself,
 * under an alarm. A once around the registration, running in the parent
 * at the fork, is inherited running by the child under ThreadSanitizer,
 * whose pthread_once (unlike glibc's) does not start over there: the
 * child's load waited for ever (e2e/children_fork timed out). */
static atomic_int fork_stage;

static void slow_prepare(void) {
  atomic_store(&fork_stage, 1);
  struct timespec ts = {0, 200 * 1000000};
  nanosleep(&ts, NULL); /* the loader thread is in its first load now */
}

static void *first_load(void *arg) {
  (void)arg;
  while (atomic_load(&fork_stage) == 0) sched_yield();
  void *f = NULL;
  const cprof__dynsym syms[] = {{"zlibVersion", &f}};
  static const char *const names[] = {"libz.so.1", NULL};
  cprof__dynlib lib = {names, syms, 1, 0, ""};
  return (void *)(intptr_t)cprof__dynload(&lib);
}

static void test_fork_during_first_load(void) {
  if (cprof__atfork(CPROF__FORK_TREE, slow_prepare, NULL, NULL) != 0) {
    printf("skip: the tree's fork slot is taken in this process\n");
    return;
  }
  pthread_t t;
  CHECK(pthread_create(&t, NULL, first_load, NULL) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    void *f = NULL;
    const cprof__dynsym syms[] = {{"zlibVersion", &f}};
    static const char *const names[] = {"libz.so.1", NULL};
    cprof__dynlib lib = {names, syms, 1, 0, ""};
    _exit(cprof__dynload(&lib) == 0 && f ? 0 : 1);
  }
  CHECK(pid > 0);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  if (WIFSIGNALED(st))
    fprintf(stderr, "the child's load did not return: signal %d\n",
            WTERMSIG(st));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  void *rc = NULL;
  CHECK(pthread_join(t, &rc) == 0 && rc == NULL);
}

static void test_loads(void) {
  /* zlib: libcprof already depends on it, so it is always there. */
  __typeof__(zlibVersion) *version = NULL;
  __typeof__(crc32) *crc = NULL;
  const cprof__dynsym syms[] = {{"zlibVersion", (void **)&version},
                                {"crc32", (void **)&crc}};
  static const char *const names[] = {"libcprof-missing.so.9", "libz.so.1",
                                      NULL};
  cprof__dynlib lib = {names, syms, CPROF__ARRAY_LEN(syms), 0, ""};
  CHECK_EQ_INT(cprof__dynload(&lib), 0);
  CHECK(version != NULL && crc != NULL);
  if (version) CHECK_STREQ(version(), zlibVersion());
  if (crc) CHECK_EQ_INT(crc(0, (const unsigned char *)"abc", 3), 0x352441c2);
  CHECK_EQ_INT(cprof__dynload(&lib), 0); /* again: the same answer */
}

static void test_missing_library(void) {
  void *f = NULL;
  const cprof__dynsym syms[] = {{"anything", &f}};
  static const char *const names[] = {"libcprof-missing.so.9", NULL};
  cprof__dynlib lib = {names, syms, 1, 0, ""};
  CHECK_EQ_INT(cprof__dynload(&lib), CPROF_EUNSUPPORTED);
  CHECK(strstr(lib.why, "cannot load libcprof-missing.so.9") != NULL);
  CHECK(f == NULL);
  CHECK_EQ_INT(cprof__dynload(&lib), CPROF_EUNSUPPORTED);
}

static void test_missing_symbol(void) {
  void *a = NULL, *b = NULL;
  const cprof__dynsym syms[] = {{"zlibVersion", &a},
                                {"cprof_no_such_function", &b}};
  static const char *const names[] = {"libz.so.1", NULL};
  cprof__dynlib lib = {names, syms, 2, 0, ""};
  CHECK_EQ_INT(cprof__dynload(&lib), CPROF_EUNSUPPORTED);
  CHECK_STREQ(lib.why, "libz.so.1 has no cprof_no_such_function");
}

int main(void) {
  /* First: it needs the process's first load. */
  RUN(test_fork_during_first_load);
  RUN(test_loads);
  RUN(test_missing_library);
  RUN(test_missing_symbol);
  return TEST_RESULT();
}
