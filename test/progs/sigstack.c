/*
 * Programs that run signal handlers on small or exhausted stacks, with
 * cprof's CPU profile at 1000 Hz. Modes:
 *   sigstack altstack BYTES [LOCALS]
 *                             the program's own SA_ONSTACK handler burns CPU
 *                             (with LOCALS bytes of locals) on an alternate
 *                             stack of BYTES while SIGPROF ticks at 1000 Hz;
 *                             cprof's signal must wait until the handler
 *                             returns, so nothing of cprof's lands on that
 *                             stack. Prints the deepest use of the alternate
 *                             stack with and without the profile
 *                             ("altstack use: N bytes ...") and how many
 *                             handler runs ended with cprof's signal held
 *                             back ("deferred: ...").
 *   sigstack frame            prints AT_MINSIGSTKSZ, the kernel's signal
 *                             frame on this machine
 *   sigstack minimum          prints the smallest alternate stack, from
 *                             AT_MINSIGSTKSZ up, that sigaltstack takes here
 *                             (a kernel may refuse one below its older
 *                             constant MINSIGSTKSZ, 2,048 bytes on x86-64,
 *                             where AT_MINSIGSTKSZ is smaller)
 *   sigstack overflow N       a thread with a 64 KiB stack overflows it N
 *                             times, recovering each time with sigaltstack,
 *                             a SIGSEGV handler and siglongjmp, while
 *                             SIGPROF keeps arriving.
 * Exit status 0 when the program survived intact; messages on stderr.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef AT_MINSIGSTKSZ
#define AT_MINSIGSTKSZ 51
#endif

#include "cprof.h"

#define CANARY 0xa5
#define BELOW 16384

static unsigned char *region; /* [BELOW canary bytes][altstack] */
static size_t alt_size;
static volatile uint64_t burn_sink;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t handler_locals;
static int deferred_runs;

/* The program's own handler: 20 ms of CPU on the alternate stack, with
 * handler_locals bytes of locals in use. Notes whether a SIGPROF came
 * due meanwhile and was held back (pending at its end). */
static void on_usr1(int sig) {
  (void)sig;
  volatile char *locals = handler_locals ? __builtin_alloca(handler_locals) : NULL;
  for (size_t i = 0; i < handler_locals; i += 64) locals[i] = (char)i;
  double t0 = cpu_now();
  while (cpu_now() - t0 < 0.02) burn_sink = burn_sink * 31 + 7;
  sigset_t pending;
  if (sigpending(&pending) == 0 && sigismember(&pending, SIGPROF)) deferred_runs++;
}

/* The lowest byte of the alternate stack that no longer holds the fill
 * pattern, as a depth from its top. */
static size_t deepest_use(void) {
  unsigned char *alt = region + BELOW;
  for (size_t i = 0; i < alt_size; i++)
    if (alt[i] != CANARY) return alt_size - i;
  return 0;
}

static size_t run_handlers(int rounds) {
  size_t deepest = 0;
  for (int r = 0; r < rounds; r++) {
    memset(region + BELOW, CANARY, alt_size);
    raise(SIGUSR1);
    size_t d = deepest_use();
    if (d > deepest) deepest = d;
  }
  return deepest;
}

static int altstack(size_t bytes) {
  alt_size = bytes;
  region = malloc(BELOW + bytes);
  if (!region) return 1;
  memset(region, CANARY, BELOW + bytes);
  stack_t ss = {.ss_sp = region + BELOW, .ss_size = bytes, .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0) {
    perror("sigaltstack");
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGUSR1, &sa, NULL);

  /* What the handler calls is bound first: the dynamic linker's lazy
   * binding, on the alternate stack, would take more than the handler
   * (its resolver saves the whole extended register state there: 6.2 KB
   * deep in all with AVX-512, for an unbound sigismember). */
  sigset_t pending;
  (void)cpu_now();
  (void)sigpending(&pending);
  (void)sigismember(&pending, SIGPROF);
  size_t plain = run_handlers(10);
  for (size_t i = 0; i < BELOW; i++)
    if (region[i] != CANARY) {
      fprintf(stderr, "without the profile, the program's own handler wrote %zu bytes below the alternate stack\n",
              BELOW - i);
      return 2;
    }
  deferred_runs = 0;
  if (cprof_cpu_start(1000) != 0) {
    fprintf(stderr, "cprof_cpu_start failed\n");
    return 1;
  }
  /* The program reads its handler's mask back as it set it; the kernel
   * has cprof's signal in it. */
  struct sigaction back;
  sigaction(SIGUSR1, NULL, &back);
  struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } k;
  syscall(SYS_rt_sigaction, SIGUSR1, NULL, &k, 8);
  printf("mask read back %s SIGPROF; the kernel's %s it\n",
         sigismember(&back.sa_mask, SIGPROF) ? "holds" : "lacks",
         (k.mask >> (SIGPROF - 1)) & 1 ? "holds" : "lacks");
  size_t profiled = run_handlers(50);
  cprof_buf buf = {0};
  cprof_sink sink = cprof_sink_buf(&buf);
  int err = cprof_cpu_stop(&sink);
  cprof_buf_free(&buf);
  for (size_t i = 0; i < BELOW; i++)
    if (region[i] != CANARY) {
      fprintf(stderr, "memory %zu bytes below the alternate stack was written\n",
              BELOW - i);
      return 1;
    }
  printf("altstack use: %zu bytes without the profile, %zu with it\n", plain,
         profiled);
  printf("deferred: %d of 50 handler runs ended with cprof's signal held back\n",
         deferred_runs);
  return err != 0;
}

static __thread sigjmp_buf recover_at;
static volatile size_t depth_reached;

static void on_segv(int sig) {
  (void)sig;
  siglongjmp(recover_at, 1);
}

/* Recurses until the stack runs out (the limit is never reached: a
 * 64 KiB stack ends long before). */
static volatile size_t depth_limit = SIZE_MAX;

__attribute__((noinline)) static size_t recurse(size_t n) {
  volatile char pad[256];
  pad[0] = (char)n;
  depth_reached = n;
  if (n >= depth_limit) return pad[0];
  return recurse(n + 1) + pad[0];
}

static void *overflow_thread(void *arg) {
  int rounds = *(int *)arg;
  static unsigned char alt[65536];
  stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  for (volatile int r = 0; r < rounds; r++) {
    if (sigsetjmp(recover_at, 1) == 0) recurse(0);
  }
  return NULL;
}

static int overflow(int rounds) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_segv;
  sa.sa_flags = SA_ONSTACK | SA_NODEFER;
  sigaction(SIGSEGV, &sa, NULL);
  if (cprof_cpu_start(1000) != 0) return 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 65536);
  pthread_t t;
  if (pthread_create(&t, &attr, overflow_thread, &rounds) != 0) return 1;
  pthread_join(t, NULL);
  cprof_buf buf = {0};
  cprof_sink sink = cprof_sink_buf(&buf);
  int err = cprof_cpu_stop(&sink);
  cprof_buf_free(&buf);
  printf("recovered %d overflows (depth %zu)\n", rounds, (size_t)depth_reached);
  return err != 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "altstack") == 0) {
    if (argc > 3) handler_locals = (size_t)atol(argv[3]);
    return altstack((size_t)atol(argv[2]));
  }
  if (argc == 2 && strcmp(argv[1], "frame") == 0) {
    printf("%ld\n", (long)getauxval(AT_MINSIGSTKSZ));
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "minimum") == 0) {
    static char probe[65536];
    size_t size = (size_t)getauxval(AT_MINSIGSTKSZ);
    stack_t ss = {.ss_sp = probe, .ss_size = size, .ss_flags = 0};
    while (size <= sizeof probe && sigaltstack(&ss, NULL) != 0)
      ss.ss_size = size += 16;
    if (size > sizeof probe) {
      perror("sigaltstack");
      return 1;
    }
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    printf("%zu\n", size);
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "overflow") == 0)
    return overflow(atoi(argv[2]));
  fprintf(stderr, "usage: sigstack altstack BYTES [LOCALS] | frame | minimum "
                  "| overflow N\n");
  return 2;
}
