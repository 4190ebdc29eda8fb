/*
 * A program that uses signals the way real programs do, while cprof
 * profiles it (linked). Each mode exits 0 when the program got exactly
 * what it would have got without cprof; counts and findings go to stderr,
 * a profile (when the mode writes one) to stdout.
 *
 *   sighost reset          cprof at 1000 Hz; the program resets SIGPROF to
 *                          SIG_DFL, then every signal (a daemon's start-up
 *                          loop), and goes on working
 *   sighost itimer SECS    the program counts its own ITIMER_PROF SIGPROFs
 *                          at 100 Hz over SECS of CPU ("own N, cprof's M,
 *                          cpu S, process P": P the process's CPU time,
 *                          which the itimer counts); with
 *                          SIGHOST_PROFILE=1 cprof
 *                          profiles at 1000 Hz meanwhile
 *   sighost install HOW    cprof at 1000 Hz; the program installs its SIGPROF
 *                          handler with HOW (sigaction, sigset, bsd_signal,
 *                          sysv_signal or raw: rt_sigaction itself), then
 *                          runs ITIMER_PROF at 100 Hz for 0.5 s of CPU
 *   sighost sigwait HOW    every signal blocked; cprof at 1000 Hz; the
 *                          program alternates work and a wait for the full
 *                          set (HOW: sigtimedwait, sigwaitinfo, sigwait,
 *                          signalfd); it must receive only its own
 *                          signal (a SIGUSR1 to itself each round)
 *   sighost watchdog       cprof at 100 Hz; the program arms ITIMER_PROF
 *                          for 0.5 s of CPU with SIGPROF's default action
 *                          and loops: it must die of SIGPROF
 *   sighost threads        the goroutine profile's signal (CPROF_PERF_EVENTS=0
 *                          makes it ask running threads with one): the
 *                          program then installs its own handler on
 *                          SIGRTMIN+5, resets it, takes cprof's new signal
 *                          with a raw rt_sigaction; profiles in between
 *                          must neither reach its handler nor kill it
 *   sighost seccomp WHEN   a seccomp filter that kills the process on
 *                          timer_create, installed before (WHEN=before) or
 *                          after (after) cprof's CPU profile starts; one
 *                          that allows it (allow), or raises SIGSYS for it,
 *                          which the program handles (trap); a thread is
 *                          started and goroutine profiles taken (profile on
 *                          stdout when one ran)
 *   sighost coroutine      a makecontext coroutine on a 16 KiB-ish stack
 *                          with a guard page, run deep, under cprof at
 *                          1000 Hz (its size is set by the kernel's
 *                          signal frame, measured)
 *   sighost trivial        the same coroutine under the program's own
 *                          trivial SIGPROF handler at 1000 Hz, no cprof
 *   sighost which [own]    cprof at 1000 Hz for 0.2 s of CPU: prints the
 *                          signals holding a handler that is not the
 *                          program's, and SIGRTMIN; with "own", the
 *                          program has its own SIGPROF handler first
 *   sighost takeall        cprof at 1000 Hz; the program installs its own
 *                          handler on SIGPROF and every real-time signal:
 *                          cprof moves until none is left, then stops
 *   sighost exec WHERE N   N more environment variables, then an exec of
 *                          /bin/sh from a crash handler on an 8 KiB
 *                          alternate stack (WHERE=altstack) or from a
 *                          thread with a 64 KiB stack (thread); run with a
 *                          CPROF_ setting, so cprof rebuilds the
 *                          environment for the exec; the shell prints
 *                          what it got
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "cprof.h"

/* Still in glibc, no longer declared by its headers. */
extern __sighandler_t bsd_signal(int sig, __sighandler_t handler);

#ifndef AT_MINSIGSTKSZ
#define AT_MINSIGSTKSZ 51
#endif

static volatile uint64_t sink;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The process's CPU time, all threads: what ITIMER_PROF counts. */
static double process_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void burn(double secs) {
  double end = cpu_now() + secs;
  while (cpu_now() < end)
    for (int i = 0; i < 20000; i++) sink = sink * 6364136223846793005ull + 1;
}

static _Atomic int own_signals, cprof_signals;

static void counting(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  if (si->si_code == SI_TIMER)
    atomic_fetch_add(&cprof_signals, 1);
  else
    atomic_fetch_add(&own_signals, 1);
}

static void counting_plain(int sig) {
  (void)sig;
  atomic_fetch_add(&own_signals, 1);
}

static int start_cpu(int hz) {
  int err = cprof_cpu_start(hz);
  if (err) fprintf(stderr, "cprof_cpu_start: %s\n", cprof_strerror(err));
  return err;
}

static int stop_cpu(void) {
  cprof_sink out = cprof_sink_fd(STDOUT_FILENO);
  int err = cprof_cpu_stop(&out);
  if (err) fprintf(stderr, "cprof_cpu_stop: %s\n", cprof_strerror(err));
  return err;
}

/* The kernel's struct sigaction, for raw rt_sigaction. */
struct ksigaction {
  void *handler;
  unsigned long flags;
  void *restorer;
  unsigned long mask;
};

/* The handler on each signal (NULL for SIG_DFL and SIG_IGN; glibc's own,
 * below SIGRTMIN, left out), read through libc's sigaction (or a
 * sanitizer's, which reports the handlers as installed, where the kernel
 * has its own wrapper), not cprof's, which shows the program what it left
 * on a signal cprof holds. */
static void handlers_now(void *out[65]) {
  int (*real)(int, const struct sigaction *, struct sigaction *) =
      (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
  for (int s = 1; s < 65; s++) {
    struct sigaction k;
    out[s] = NULL;
    if (s == SIGKILL || s == SIGSTOP || (s > 31 && s < SIGRTMIN) || !real ||
        real(s, NULL, &k) != 0)
      continue;
    void *h = (k.sa_flags & SA_SIGINFO) ? (void *)k.sa_sigaction : (void *)k.sa_handler;
    if (h != (void *)SIG_DFL && h != (void *)SIG_IGN) out[s] = h;
  }
}

/* The number of signals with a handler other than own. */
static int foreign_handlers(void *own) {
  void *h[65];
  handlers_now(h);
  int n = 0;
  for (int s = 1; s < 65; s++)
    if (h[s] && h[s] != own) n++;
  return n;
}

static int mode_reset(void) {
  int before = foreign_handlers(NULL);
  if (start_cpu(1000)) return 1;
  /* What the program reads back of cprof's signal is what it left. */
  struct sigaction cur;
  sigaction(SIGPROF, NULL, &cur);
  fprintf(stderr, "SIGPROF reads as %s while cprof holds it, %d handlers not the program's\n",
          cur.sa_handler == SIG_DFL ? "SIG_DFL" : "a handler",
          foreign_handlers(NULL) - before);
  burn(0.2);
  signal(SIGPROF, SIG_DFL);
  burn(0.2);
  for (int s = 1; s < 65; s++)
    if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
  burn(0.2);
  fprintf(stderr, "survived the resets\n");
  return stop_cpu() ? 1 : 0;
}

static void run_itimer(double secs) {
  struct itimerval it = {{0, 10000}, {0, 10000}};
  setitimer(ITIMER_PROF, &it, NULL);
  burn(secs);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
}

static int mode_itimer(double secs) {
  const char *p = getenv("SIGHOST_PROFILE");
  bool profile = p && strcmp(p, "1") == 0;
  int before = foreign_handlers(NULL);
  if (profile && start_cpu(1000)) return 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = counting;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);
  double t0 = cpu_now(), p0 = process_now();
  run_itimer(secs);
  double used = cpu_now() - t0, process = process_now() - p0;
  if (profile && stop_cpu()) return 1;
  fprintf(stderr, "own %d, cprof's %d, cpu %.3f, process %.3f\n",
          atomic_load(&own_signals), atomic_load(&cprof_signals), used, process);
  fprintf(stderr, "after the profile: %d handlers not the program's\n",
          foreign_handlers((void *)counting) - before);
  return 0;
}

/* Installs h on sig with rt_sigaction itself, borrowing libc's restorer
 * from a disposition libc installed on SIGUSR2. */
static int raw_install(int sig, void (*h)(int, siginfo_t *, void *)) {
  struct sigaction tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.sa_sigaction = h;
  tmp.sa_flags = SA_SIGINFO;
  sigaction(SIGUSR2, &tmp, NULL);
  struct ksigaction k;
  if (syscall(SYS_rt_sigaction, SIGUSR2, NULL, &k, 8) != 0) return -1;
  signal(SIGUSR2, SIG_DFL);
  k.handler = (void *)h;
  k.flags |= SA_SIGINFO | SA_RESTART;
  return (int)syscall(SYS_rt_sigaction, sig, &k, NULL, 8);
}

static int mode_install(const char *how) {
  if (start_cpu(1000)) return 1;
  burn(0.1);
  if (strcmp(how, "sigaction") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = counting;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
  } else if (strcmp(how, "sigset") == 0) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    sigset(SIGPROF, counting_plain);
#pragma GCC diagnostic pop
  } else if (strcmp(how, "bsd_signal") == 0) {
    bsd_signal(SIGPROF, counting_plain);
  } else if (strcmp(how, "sysv_signal") == 0) {
    sysv_signal(SIGPROF, counting_plain);
  } else if (strcmp(how, "raw") == 0) {
    if (raw_install(SIGPROF, counting) != 0) {
      perror("rt_sigaction");
      return 1;
    }
  } else {
    return 2;
  }
  double t0 = cpu_now();
  run_itimer(0.5);
  double used = cpu_now() - t0;
  if (stop_cpu()) return 1;
  fprintf(stderr, "own %d, cprof's %d, cpu %.3f\n", atomic_load(&own_signals),
          atomic_load(&cprof_signals), used);
  return 0;
}

static int mode_sigwait(const char *how) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  int fd = -1;
  if (strcmp(how, "signalfd") == 0) {
    /* A daemon's usual set: the signals it handles, SIGPROF among them
     * (its own profiler's). */
    sigset_t mine;
    sigemptyset(&mine);
    sigaddset(&mine, SIGUSR1);
    sigaddset(&mine, SIGPROF);
    sigaddset(&mine, SIGTERM);
    fd = signalfd(-1, &mine, SFD_CLOEXEC);
    if (fd < 0) return 1;
  }
  if (start_cpu(1000)) return 1;
  int got_own = 0, got_other = 0;
  double t0 = cpu_now();
  for (int round = 0; round < 150; round++) {
    burn(0.005);
    kill(getpid(), SIGUSR1);
    int sig = -1;
    if (strcmp(how, "sigtimedwait") == 0) {
      struct timespec ts = {0, 20000000};
      sig = sigtimedwait(&all, NULL, &ts);
    } else if (strcmp(how, "sigwaitinfo") == 0) {
      siginfo_t si;
      sig = sigwaitinfo(&all, &si);
    } else if (strcmp(how, "sigwait") == 0) {
      if (sigwait(&all, &sig) != 0) sig = -1;
    } else if (fd >= 0) {
      struct signalfd_siginfo si;
      if (read(fd, &si, sizeof si) == (ssize_t)sizeof si) sig = (int)si.ssi_signo;
    }
    if (sig == SIGUSR1)
      got_own++;
    else
      got_other++;
  }
  double used = cpu_now() - t0;
  int err = stop_cpu();
  fprintf(stderr, "own %d, other %d, cpu %.3f\n", got_own, got_other, used);
  return err || got_other ? 1 : 0;
}

static int mode_watchdog(void) {
  if (start_cpu(100)) return 1;
  struct itimerval it = {{0, 0}, {0, 500000}};
  setitimer(ITIMER_PROF, &it, NULL);
  burn(10);
  fprintf(stderr, "the watchdog never fired\n");
  return 1;
}

static atomic_bool spin_on = true;

static atomic_bool spinning;

static void *spinner(void *arg) {
  (void)arg;
  atomic_store(&spinning, true);
  while (atomic_load(&spin_on)) sink = sink * 31 + 7;
  return NULL;
}

static int goroutine_profile(void) {
  cprof_buf buf = {0};
  cprof_sink s = cprof_sink_buf(&buf);
  int err = cprof_profile_write("goroutine", 1, &s);
  int spin = buf.data && memmem(buf.data, buf.len, "spinner", 7) != NULL;
  cprof_buf_free(&buf);
  if (err) fprintf(stderr, "goroutine: %s\n", cprof_strerror(err));
  return err ? -1 : spin;
}

static int mode_threads(void) {
  pthread_t t;
  pthread_create(&t, NULL, spinner, NULL);
  /* A thread that has not run yet, or started less than 20 ms ago, is
   * left out of the profile (docs/goroutine.md): on a loaded machine the
   * spinner's first run can come late. */
  while (!atomic_load(&spinning)) usleep(1000);
  usleep(30000);
  int a = goroutine_profile();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = counting;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGRTMIN + 5, &sa, NULL);
  int b = goroutine_profile();
  signal(SIGRTMIN + 5, SIG_DFL);
  int c = goroutine_profile();
  /* Whatever real-time signal cprof is on now, take them all with the
   * system call itself. */
  for (int s = SIGRTMIN; s <= SIGRTMAX; s++) raw_install(s, counting);
  int d = goroutine_profile();
  atomic_store(&spin_on, false);
  pthread_join(t, NULL);
  fprintf(stderr,
          "spinner seen %d %d %d %d; the program's handler got %d of cprof's "
          "signals\n",
          a, b, c, d, atomic_load(&cprof_signals));
  return a >= 0 && b >= 0 && c >= 0 && d >= 0 && atomic_load(&cprof_signals) == 0
             ? 0
             : 1;
}

/* A filter whose action for timer_create is action (everything else is
 * allowed). */
static void filter_timer_create(unsigned action) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_timer_create, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, action),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
              &prog) != 0)
    perror("seccomp");
}

static void kill_on_timer_create(void) { filter_timer_create(SECCOMP_RET_KILL_PROCESS); }

static _Atomic int sigsys_runs;
static void on_sigsys(int sig) {
  (void)sig;
  atomic_fetch_add(&sigsys_runs, 1);
}

static void *short_worker(void *arg) {
  (void)arg;
  burn(0.05);
  return NULL;
}

static int mode_seccomp(const char *when) {
  bool before = strcmp(when, "before") == 0, after = strcmp(when, "after") == 0;
  /* allow: a filter that lets timer_create through (a container's);
   * trap: one that raises SIGSYS for it, which a sandbox's handler of the
   * program's would emulate: cprof must not set that handler off. */
  if (strcmp(when, "allow") == 0) filter_timer_create(SECCOMP_RET_ALLOW);
  if (strcmp(when, "trap") == 0) {
    signal(SIGSYS, on_sigsys);
    filter_timer_create(SECCOMP_RET_TRAP);
  }
  if (before) kill_on_timer_create();
  int err = cprof_cpu_start(100);
  fprintf(stderr, "start: %s\n", cprof_strerror(err));
  if (after) kill_on_timer_create();
  pthread_t t;
  pthread_create(&t, NULL, short_worker, NULL);
  pthread_join(t, NULL);
  atomic_store(&spin_on, true);
  pthread_create(&t, NULL, spinner, NULL);
  int g = goroutine_profile();
  atomic_store(&spin_on, false);
  pthread_join(t, NULL);
  burn(0.2);
  int stop = err ? err : stop_cpu();
  fprintf(stderr, "survived; goroutine profile %s; the program's SIGSYS handler ran %d times\n",
          g >= 0 ? "written" : "failed", atomic_load(&sigsys_runs));
  bool refused = before || strcmp(when, "trap") == 0;
  return (refused ? err != 0 : err == 0 && stop == 0) && g >= 0 &&
                 atomic_load(&sigsys_runs) == 0
             ? 0
             : 1;
}

/* The coroutine: recurses until co_keep bytes are left below its stack
 * pointer, read at each level (the frames take more than their pads),
 * then burns CPU there. */
static ucontext_t main_ctx, co_ctx;
static uintptr_t co_low, co_keep;

__attribute__((noinline)) static void deep(void) {
  volatile char pad[512];
  pad[0] = 1;
  if ((uintptr_t)pad - co_low > co_keep + sizeof pad)
    deep();
  else
    burn(0.3);
  sink += (uint64_t)pad[0];
}

static void co_main(void) { deep(); }

static void trivial(int sig) {
  (void)sig;
  sink++;
}

/* The bytes a signal takes of the stack it lands on: the kernel's frame
 * and a trivial handler's, measured on an alternate stack. AT_MINSIGSTKSZ
 * is not that: it counts the state a process may come to use, such as a
 * Xeon's 8 KiB of AMX tiles (11,952 bytes where the frame is 3.5 KiB). */
static volatile uintptr_t frame_at;

static void note_frame(int sig) {
  (void)sig;
  volatile char here = 0;
  frame_at = (uintptr_t)&here;
}

static long signal_frame(void) {
  size_t len = 64 * 1024;
  unsigned char *alt = mmap(NULL, len, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (alt == MAP_FAILED) return -1;
  stack_t ss = {.ss_sp = alt, .ss_size = len, .ss_flags = 0}, old;
  struct sigaction sa = {.sa_handler = note_frame, .sa_flags = SA_ONSTACK},
                   prev;
  sigemptyset(&sa.sa_mask);
  long frame = -1;
  if (sigaltstack(&ss, &old) == 0) {
    if (sigaction(SIGURG, &sa, &prev) == 0) {
      frame_at = 0;
      raise(SIGURG);
      if (frame_at) frame = (long)((uintptr_t)alt + len - frame_at);
      sigaction(SIGURG, &prev, NULL);
    }
    sigaltstack(&old, NULL);
  }
  munmap(alt, len);
  return frame;
}

static int mode_coroutine(bool with_cprof) {
  /* A 16 KiB stack, run deep enough to leave below its deepest frame
   * room for the kernel's signal frame and a small handler (1 KiB), no
   * more: a handler that needs a few KiB does not fit. burn()'s own calls
   * (clock_gettime through the vDSO) are given 512 bytes more. */
  static long frame;
  frame = signal_frame();
  if (frame <= 0) return 1;
  static size_t page = 4096, size = 16384;
  static unsigned char *m;
  m = mmap(NULL, size + page, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 1;
  mprotect(m, page, PROT_NONE); /* the guard page, below the stack */
  co_low = (uintptr_t)m + page;
  co_keep = (uintptr_t)frame + 1024 + 512;
  getcontext(&co_ctx);
  co_ctx.uc_stack.ss_sp = m + page;
  co_ctx.uc_stack.ss_size = size;
  co_ctx.uc_link = &main_ctx;
  makecontext(&co_ctx, co_main, 0);
  if (with_cprof) {
    if (start_cpu(1000)) return 1;
  } else {
    signal(SIGPROF, trivial);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &it, NULL);
  }
  for (int i = 0; i < 3; i++) {
    makecontext(&co_ctx, co_main, 0);
    swapcontext(&main_ctx, &co_ctx);
  }
  fprintf(stderr, "coroutine stack %zu bytes, %zu kept, signal frame %ld: "
          "survived\n", size, (size_t)co_keep, frame);
  if (with_cprof) return stop_cpu() ? 1 : 0;
  return 0;
}

static int mode_which(bool own) {
  if (own) signal(SIGPROF, counting_plain);
  void *before[65], *during[65];
  handlers_now(before);
  int err = start_cpu(1000);
  fprintf(stderr, "SIGRTMIN is %d\n", SIGRTMIN);
  if (err) return 0;
  handlers_now(during);
  for (int s = 1; s < 65; s++)
    if (during[s] && during[s] != before[s])
      fprintf(stderr, "cprof's signal: %d\n", s);
  burn(0.2);
  return stop_cpu() ? 1 : 0;
}

static int mode_takeall(void) {
  if (start_cpu(1000)) return 1;
  burn(0.1);
  signal(SIGPROF, counting_plain);
  for (int s = SIGRTMIN; s <= SIGRTMAX; s++) signal(s, counting_plain);
  burn(0.1);
  int stop = stop_cpu();
  fprintf(stderr, "took every signal; the program's handlers got %d signals\n",
          atomic_load(&own_signals));
  return stop == 0 && atomic_load(&own_signals) == 0 ? 0 : 1;
}

static void exec_shell(void) {
  char *argv[] = {"sh", "-c",
                  "echo \"exec'd: CPROF_UNWIND=$CPROF_UNWIND, $(env | grep -c "
                  "'^SIGHOST_V') variables\"",
                  NULL};
  execv("/bin/sh", argv);
  _exit(127);
}

static void on_crash(int sig) {
  (void)sig;
  exec_shell();
}

static void *exec_thread(void *arg) {
  (void)arg;
  exec_shell();
  return NULL;
}

static int mode_exec(const char *where, int n) {
  char name[32];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "SIGHOST_V%d", i);
    setenv(name, "x", 1);
  }
  if (strcmp(where, "altstack") == 0) {
    /* 8 KiB with a guard page below, as a crash handler's stack is. */
    unsigned char *m = mmap(NULL, 4096 + 8192, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 1;
    mprotect(m, 4096, PROT_NONE);
    stack_t ss = {.ss_sp = m + 4096, .ss_size = 8192, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
    raise(SIGSEGV);
  } else {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 65536);
    pthread_t t;
    pthread_create(&t, &attr, exec_thread, NULL);
    pthread_join(t, NULL);
  }
  return 1;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  const char *arg = argc > 2 ? argv[2] : "";
  if (strcmp(mode, "reset") == 0) return mode_reset();
  if (strcmp(mode, "itimer") == 0) return mode_itimer(atof(arg));
  if (strcmp(mode, "install") == 0) return mode_install(arg);
  if (strcmp(mode, "sigwait") == 0) return mode_sigwait(arg);
  if (strcmp(mode, "watchdog") == 0) return mode_watchdog();
  if (strcmp(mode, "threads") == 0) return mode_threads();
  if (strcmp(mode, "seccomp") == 0) return mode_seccomp(arg);
  if (strcmp(mode, "coroutine") == 0) return mode_coroutine(true);
  if (strcmp(mode, "trivial") == 0) return mode_coroutine(false);
  if (strcmp(mode, "takeall") == 0) return mode_takeall();
  if (strcmp(mode, "which") == 0) return mode_which(strcmp(arg, "own") == 0);
  if (strcmp(mode, "exec") == 0 && argc > 3) return mode_exec(arg, atoi(argv[3]));
  fprintf(stderr, "usage: sighost MODE [ARG] (see the source)\n");
  return 2;
}
