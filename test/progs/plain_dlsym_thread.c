/*
 * A thread cprof's pthread_create never sees, for
 * test/e2e/threads_unseen.sh: libnextthread.so (loaded with dlopen from
 * DIR, the first argument) starts it through dlsym(RTLD_NEXT,
 * "pthread_create"), as jemalloc starts its background threads. It burns
 * CPU in next_burn while the main thread burns some in main_burn; at the
 * end the program prints the CPU time each one used in main (the window
 * the profile and the measure share; what the runtime and the loader did
 * before main is left out) and the process's whole:
 *   pid PID
 *   thread TID NS
 *   main TID NS
 *   process NS
 * With `fork` it does all that in a fork child (a pre-fork server's
 * worker) and the parent only waits for it.
 * Usage: plain_dlsym_thread DIR [THREAD_SECONDS [MAIN_SECONDS [fork]]]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static int64_t cpu_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until the calling thread has used the CPU seconds given. */
static void burn(double seconds) {
  int64_t until = cpu_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)(seconds * 1e9);
  uint64_t x = 1;
  while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < until)
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ull + 1;
  sink = x;
}

static double thread_seconds = 1.5, main_seconds = 1.0;
static int64_t thread_cpu;
static pid_t thread_tid;

__attribute__((noinline)) static void next_burn(void) { burn(thread_seconds); }
__attribute__((noinline)) static void main_burn(void) { burn(main_seconds); }

static void *thread_main(void *arg) {
  (void)arg;
  thread_tid = (pid_t)syscall(SYS_gettid);
  next_burn();
  thread_cpu = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  return NULL;
}

static int run(const char *dir) {
  int64_t main_start = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  char path[4096];
  snprintf(path, sizeof path, "%s/libnextthread.so", dir);
  void *lib = dlopen(path, RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  int (*create)(pthread_t *, void *(*)(void *), void *) =
      (int (*)(pthread_t *, void *(*)(void *), void *))dlsym(lib, "next_thread_create");
  pthread_t t;
  if (!create || create(&t, thread_main, NULL) != 0) {
    fprintf(stderr, "cannot start the thread\n");
    return 1;
  }
  main_burn();
  pthread_join(t, NULL);
  printf("pid %d\n", (int)getpid());
  printf("thread %d %lld\n", (int)thread_tid, (long long)thread_cpu);
  printf("main %d %lld\n", (int)syscall(SYS_gettid),
         (long long)(cpu_ns(CLOCK_THREAD_CPUTIME_ID) - main_start));
  printf("process %lld\n", (long long)cpu_ns(CLOCK_PROCESS_CPUTIME_ID));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR [THREAD_SECONDS [MAIN_SECONDS [fork]]]\n",
            argv[0]);
    return 2;
  }
  if (argc > 2) thread_seconds = atof(argv[2]);
  if (argc > 3) main_seconds = atof(argv[3]);
  if (argc > 4 && strcmp(argv[4], "fork") == 0) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) exit(run(argv[1]));
    int status;
    if (waitpid(pid, &status, 0) != pid) return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  return run(argv[1]);
}
