/*
 * Thread sampling (thread_sample.h): the current stack of every thread of
 * the process, which the goroutine profile lists and the wall profile
 * samples at its rate. A thread is read, not interrupted, whenever it can
 * be: /proc/self/task/TID/syscall gives the
 * pc and stack pointer of a thread stopped in the kernel (blocked in a
 * system call, or sleeping or stopped anywhere else), its stack is copied
 * with process_vm_readv and walked here by the CFI walker
 * (cprof__stack_walk_remote), and the thread never notices. Only a thread
 * the kernel reports as running gets a signal, and it cannot be blocked
 * in a system call at that moment, so the signal interrupts no wait (the
 * window that remains is documented in docs/goroutine.md and counted by
 * the handler).
 *
 * The signal is one real-time signal (SIGRTMIN+5 unless
 * CPROF_THREADS_SIGNAL says another offset) with a handler that walks its
 * own stack into a request slot. All running threads of a collection are
 * asked at once, each through its own slot, and waited for together with
 * one deadline. A slot is static and every claim of it is a
 * compare-and-swap on (generation, state), so a handler that runs after
 * the collector gave up finds the request withdrawn (or another thread's)
 * and does nothing; nothing it could write to is ever freed.
 *
 * The handler is async-signal-safe: it takes no lock, allocates nothing,
 * calls only the stack walker, gettid and the fault-free reader, and
 * preserves errno. It is never installed over a handler the application
 * set for the same signal. Everything else runs in normal context under
 * collect_lock, which fork also takes, so a child never inherits a
 * collection in progress. So nothing under collect_lock may wait on a
 * file: a collection never calls the symbolizer (which opens objects and
 * debug files); the few function starts it needs come from the loaded
 * objects' .eh_frame_hdr, read with the fault-free reader
 * (cprof__cfi_fde_start). Names are given when a profile is written.
 *
 * A source: it calls capture and base only, and names no profile.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/fork.h"
#include "base/env.h"
#include "base/lock.h"
#include "base/mem.h"
#include "capture/saferead.h"
#include "capture/cfi.h"
#include "capture/stack.h"
#include "capture/interposers.h"
#include "capture/sample.h"
#include "capture/stacktab.h"
#include "base/proc.h"
#include "base/sig.h"
#include "base/sys.h"
#include "capture/taskread.h"
#include "capture/tasksample.h"
#include "source/signals.h"
#include "source/thread_sample.h"
#include "source/thread_scan.h"
#include "source/threads.h"

/* How long the collector waits for the running threads' answers, all of
 * them together. */
#define ANSWER_TIMEOUT_NS (50 * 1000 * 1000)
/* A profile's running thread that has not answered by then is waited for
 * while it has had less than STARVED_CPU_NS on a CPU since (its answer
 * comes when it runs, and on a loaded machine a runnable thread can wait
 * longer than that for a CPU), up to STARVED_TIMEOUT_NS in all. */
#define STARVED_CPU_NS (1000 * 1000)
#define STARVED_TIMEOUT_NS (1000 * 1000 * 1000)
/* The collector's sleep between its looks past the deadline (each reads
 * the starved threads' schedstat). */
#define STARVED_STEP_NS (2 * 1000 * 1000)
/* How long the collector sleeps between its looks at the threads it
 * asked. */
#define WAIT_STEP_NS (250 * 1000)
/* Perf events open at once (each maps a ring of five pages, which count
 * against the user's locked-memory allowance for perf). */
#define PERF_MAX 16
#define DEFAULT_SIGNAL_OFFSET 5
/* Running threads asked at once; more are asked in further rounds. */
#define SLOTS 64
/* Bytes of a blocked thread's stack the walk may copy (a page or two at a
 * time, as it reads them); deeper words are read one by one. */
#define STACK_COPY (32 * 1024)

/* The request slots' states, in the low two bits of their words. */
enum { REQ_IDLE = 0, REQ_WAITING = 1, REQ_WRITING = 2, REQ_DONE = 3 };

/* How each thread's stack was obtained (a record's v[2]). */
enum {
  GOT_ANSWER = 0,    /* a running thread, by the signal */
  GOT_SELF = 1,      /* the collecting thread */
  GOT_BLOCKED = 2,   /* running, but it blocks the signal: not taken */
  GOT_NO_ANSWER = 3, /* running, and did not answer in time */
  GOT_READ = 4,      /* stopped in the kernel: read from /proc */
  GOT_REFUSED = 5,   /* not running, and /proc refused its syscall file */
};

/* What ask_pending did with each pending thread, besides GOT_BLOCKED and
 * GOT_NO_ANSWER. */
enum { ASK_GONE = -2, ASK_DONE = -1, ASK_SIGNALLED = 100, ASK_PERF = 101 };

static struct slot {
  _Atomic uint64_t word; /* generation << 2 | state */
  _Atomic pid_t target;
  size_t n;
  uintptr_t pcs[CPROF__STACK_BUF];
} slots[SLOTS];

static CPROF__FORK_LOCK pthread_mutex_t collect_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int signo;          /* 0 until set up */
static cprof__thread_sample_stats last_stats; /* under collect_lock */
static int64_t perf_total, signalled_total; /* under collect_lock */
/* What precedes the return addresses the walks met, kept from one
 * collection to the next (stacks repeat): most return addresses a
 * collection checks, an earlier one checked, and each check is one to
 * four system calls. Valid per generation of the unwind tables
 * (stack.h); under collect_lock. */
static cprof__call_cache calls;
/* Signals that, by the handler's reading of what they interrupted, cut a
 * system call short (see check_interrupted). */
static _Atomic int64_t interrupted_calls;

/* Never called: their addresses stand, as one-frame stacks, for a thread
 * whose stack could not be taken. CPROF__DISTINCT keeps them distinct functions. */
CPROF__DISTINCT void cprof_thread_blocks_signal(void);
CPROF__DISTINCT void cprof_thread_did_not_answer(void);
CPROF__DISTINCT void cprof_thread_not_dumpable(void);
CPROF__DISTINCT void cprof_thread_blocks_signal(void) {
  __asm__ volatile("" ::: "memory");
}
CPROF__DISTINCT void cprof_thread_did_not_answer(void) {
  __asm__ volatile("nop" ::: "memory");
}
CPROF__DISTINCT void cprof_thread_not_dumpable(void) {
  __asm__ volatile("nop; nop" ::: "memory");
}


/* Whether the signal being handled interrupted a system call that now
 * returns EINTR: the interrupted pc follows a `syscall` instruction and
 * the result register holds -EINTR. That must not happen (only running
 * threads are signalled); it is counted so a test can tell if it does. */
CPROF__SIGNAL_SAFE static void check_interrupted(const void *uc) {
#if defined(__x86_64__)
  const ucontext_t *u = uc;
  if (u->uc_mcontext.gregs[REG_RAX] != -EINTR) return;
  unsigned char c[2];
  uintptr_t pc = (uintptr_t)u->uc_mcontext.gregs[REG_RIP];
  if (cprof__safe_read(pc - 2, c, 2) && c[0] == 0x0f && c[1] == 0x05)
    atomic_fetch_add(&interrupted_calls, 1);
#else
  (void)uc;
#endif
}

CPROF__SIGNAL_SAFE static void on_signal(int sig, siginfo_t *si, void *uc) {
  int saved_errno = errno;
  if (!cprof__sig_from_cprof(si)) {
    /* Not cprof's: the default action, as without cprof. */
    cprof__sig_forward(sig, si);
    errno = saved_errno;
    return;
  }
  pid_t self = cprof__sys_gettid();
  for (size_t i = 0; i < SLOTS; i++) {
    struct slot *s = &slots[i];
    uint64_t w = atomic_load(&s->word);
    if ((w & 3) != REQ_WAITING || atomic_load(&s->target) != self) continue;
    if (!atomic_compare_exchange_strong(&s->word, &w,
                                        (w & ~(uint64_t)3) | REQ_WRITING))
      continue;
    /* Too little stack left for a walk: the thread answers with an
     * empty stack rather than overrun its stack. */
    s->n = cprof__stack_room() >= CPROF__HANDLER_STACK
               ? cprof__stack_walk_ucontext(uc, s->pcs,
                                            CPROF__ARRAY_LEN(s->pcs))
               : 0;
    atomic_store(&s->word, (w & ~(uint64_t)3) | REQ_DONE);
    break;
  }
  check_interrupted(uc);
  errno = saved_errno;
}

static void before_fork(void) { cprof__lock(&collect_lock); }
static void after_fork(void) { cprof__unlock(&collect_lock); }

static void signal_taken(void);
/* The signal running threads are asked with where perf events are
 * refused: SIGRTMIN+5 while the program leaves it alone, else a free
 * real-time one, or exactly the one CPROF_THREADS_SIGNAL names
 * (source/signals.h). */
static cprof__sigown thread_signal = {
    .what = "thread sampling by signal",
    .handler = on_signal,
    .flags = SA_RESTART,
    .taken = signal_taken,
};

/* The program is taking the signal: the next collection uses another.
 * None of cprof's timers is armed outside a collection, and what is still
 * pending of them is discarded with the old signal. */
static void signal_taken(void) {
  cprof__lock(&collect_lock);
  int old = signo;
  signo = 0;
  if (old) cprof__sig_drop(&thread_signal, old);
  cprof__unlock(&collect_lock);
}

/* The signal for this collection, claimed again when the program took
 * the last one with a raw rt_sigaction or reset it; 0 when none is free.
 * collect_lock held. */
static int collection_signal(void) {
  if (signo && !cprof__sig_still_ours(&thread_signal)) {
    cprof__sig_forget(&thread_signal, signo);
    signo = 0;
  }
  if (!signo) signo = cprof__sig_claim(&thread_signal);
  return signo;
}

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void read_env(void) {
  long long off = DEFAULT_SIGNAL_OFFSET;
  if (cprof__env_int("CPROF_THREADS_SIGNAL", 3, SIGRTMAX - SIGRTMIN,
                     "using any free real-time signal", &off))
    thread_signal.fixed = SIGRTMIN + (int)off;
  thread_signal.preferred = SIGRTMIN + DEFAULT_SIGNAL_OFFSET;
}

void cprof__thread_sample_env_init(void) { pthread_once(&env_once, read_env); }

static void setup(void) {
  cprof__thread_sample_env_init();
  cprof__atfork(CPROF__FORK_THREAD_SAMPLE, before_fork, after_fork, after_fork);
}

/* Whether sig is in the thread's blocked or pending set (/proc's SigBlk
 * and SigPnd lines are hex masks, bit n-1 for signal n). */
static bool signal_in(const char *status, const char *field, int sig) {
  const char *p = strstr(status, field);
  if (!p) return false;
  unsigned long long mask = strtoull(p + strlen(field), NULL, 16);
  return (mask >> (sig - 1)) & 1;
}

static void pause_briefly(int64_t waited_ns) {
  if (waited_ns < 200 * 1000) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50 * 1000};
    nanosleep(&ts, NULL);
  }
}

static int list_threads(pid_t **out, size_t *count) {
  return cprof__proc_tids(out, count);
}

/* One collection's working state. */
typedef struct collection {
  cprof__records *out;
  cprof__thread_sample_stats st;
  int dirfd;            /* /proc/self/task */
  unsigned char *copy;  /* STACK_COPY bytes for a blocked thread's stack */
  cprof__call_cache *calls; /* shared by the walks, kept across collections */
  struct {
    pid_t tid;
    char state;
  } pending[SLOTS];
  size_t npending;
  bool sampler; /* the wall profile's: states as of the first look */
  int64_t wait_ns; /* how long running threads' answers are waited for */
  pid_t pid;       /* the process's, which is its main thread's tid */
  struct start_memo {
    uintptr_t pc, start;
  } *starts; /* START_MEMO function starts looked up, by pc; may be NULL */
} collection;

#define START_MEMO 1024

/* The first address of the function holding pc, or 0: from its object's
 * .eh_frame_hdr, read from memory (no file, no lock), remembered for the
 * rest of the collection, whose stacks share most of their frames. */
static uintptr_t func_start(collection *c, uintptr_t pc) {
  struct start_memo *m =
      c->starts ? &c->starts[(pc ^ (pc >> 12)) % START_MEMO] : NULL;
  if (m && m->pc == pc) return m->start;
  uintptr_t start;
  if (!cprof__cfi_fde_start(pc, &start)) start = 0;
  if (m) *m = (struct start_memo){pc, start};
  return start;
}

/* Leaves out the frames of cprof's own interposers (a thread waiting on a
 * mutex shows libc's pthread_mutex_lock and the application's caller, not
 * cprof's wrapper in between). */
static size_t drop_interposers(collection *c, uintptr_t *pcs, size_t n) {
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    uintptr_t fs =
        pcs[i] > CPROF__PC_SYNTHETIC_MAX ? func_start(c, pcs[i]) : 0;
    if (fs && kept + 1 < n && cprof__is_interposer(fs)) continue;
    pcs[kept++] = pcs[i];
  }
  return kept;
}

/* Whether the thread whose stack this is is left out: one of cprof's own,
 * or one cprof's table does not know that may be on its way into cprof's
 * trampoline, not yet noted (it may be one of cprof's own, and it runs
 * none of the program's code yet): one other than the main thread started
 * less than CPROF__SCAN_SETTLE_MS ago or not yet run on a CPU, or one with
 * a frame of the trampoline's on its stack. A thread on its way out stays
 * in the table, marked exiting. */
static bool left_out(collection *c, pid_t tid, const uintptr_t *pcs,
                     size_t n) {
  uint32_t sid;
  bool own;
  /* Looked up again: a thread first seen unknown may have noted itself
   * (as one of cprof's own) by the time its stack came. */
  if (cprof__task_lookup(tid, &sid, &own)) return own;
  /* Younger than the trampoline could take to note it (a sanitizer's
   * start wrapper runs first): on its way in. Not the main thread, which
   * no trampoline starts (and which is young in a short program). */
  if (tid != c->pid) {
    long age = cprof__task_age_ms(c->dirfd, tid);
    if (age >= 0 && age < CPROF__SCAN_SETTLE_MS) return true;
    /* Older, but not yet given a CPU (on a loaded machine a new thread can
     * wait longer than that): it has not reached the trampoline either. */
    if (cprof__task_has_run(c->dirfd, tid) == 0) return true;
  }
  uintptr_t a = cprof__thread_entry_start();
  uintptr_t b = cprof__thread_entry_spawn();
  for (size_t i = 0; i < n; i++) {
    if (pcs[i] <= CPROF__PC_SYNTHETIC_MAX) continue;
    uintptr_t fs = func_start(c, pcs[i]);
    if (fs && (fs == a || fs == b)) return true;
  }
  return false;
}

static int add_record(collection *c, pid_t tid, uintptr_t *pcs, size_t n,
                      char state, int how, long nr) {
  if (left_out(c, tid, pcs, n)) return 0;
  c->st.threads++;
  if (how == GOT_ANSWER || how == GOT_SELF || how == GOT_READ)
    c->st.answered++;
  if (how == GOT_READ) c->st.read++;
  if (how == GOT_BLOCKED || how == GOT_NO_ANSWER || how == GOT_REFUSED ||
      n == 0) {
    pcs[0] = how == GOT_BLOCKED   ? (uintptr_t)cprof_thread_blocks_signal
             : how == GOT_REFUSED ? (uintptr_t)cprof_thread_not_dumpable
                                  : (uintptr_t)cprof_thread_did_not_answer;
    n = 1;
  }
  n = drop_interposers(c, pcs, n);
  const int64_t v[4] = {1, state, how, nr + 1};
  const cprof__sample_at at = {.from = CPROF__SAMPLE_WALKED, .pcs = pcs,
                               .n = n, .cap = n};
  return cprof__records_add(c->out, cprof__sample_stack(&at, 0),
                            (uint32_t)tid, v, 4);
}

/* Walks a stack that is not this thread's through copy; a second time
 * when the first walk came to a frame whose record it must search for
 * (want_pc), now knowing where that function starts (the copy is kept). */
static size_t walk_other(collection *c, uintptr_t pc, uintptr_t sp,
                         uintptr_t fp,
                         int after_syscall, cprof__stack_copy *copy,
                         uintptr_t *pcs) {
  /* The first pass stops where a frame record would be searched for
   * without knowing where its function starts; the search is made once,
   * in the second. */
  copy->first_pass = 1;
  size_t n = cprof__stack_walk_remote(pc, sp, fp, after_syscall, copy, pcs,
                                      CPROF__STACK_BUF);
  copy->first_pass = 0;
  if (copy->want_pc) {
    copy->fs = func_start(c, copy->want_pc);
    copy->fs_pc = copy->fs ? copy->want_pc : 0;
    n = cprof__stack_walk_remote(pc, sp, fp, after_syscall, copy, pcs,
                                 CPROF__STACK_BUF);
  }
  return n;
}

/* A thread stopped in the kernel: its stack walked from /proc's pc and
 * sp, through a copy of its stack; recorded with the given state. */
static int read_thread(collection *c, pid_t tid, const cprof__task *t,
                       char state, long nr) {
  uintptr_t pcs[CPROF__STACK_BUF];
  cprof__stack_copy copy = {c->copy, t->sp, 0, c->copy ? STACK_COPY : 0,
                            c->calls, 0, 0, 0, 0, c->pid, 0};
  size_t n = walk_other(c, t->pc, t->sp, 0, t->nr >= 0, &copy, pcs);
  return add_record(c, tid, pcs, n, state, GOT_READ, nr);
}

/* A running thread's perf sample: walked from its registers through the
 * copy of its stack the kernel took. */
static int sampled_thread(collection *c, pid_t tid, const cprof__task_regs *r,
                          char state) {
  uintptr_t pcs[CPROF__STACK_BUF];
  cprof__stack_copy copy = {(void *)r->stack, r->sp, r->stack_len,
                            r->stack_len, c->calls, 0, 0, 0, 0, c->pid, 0};
  size_t n = walk_other(c, r->pc, r->sp, r->fp, 0, &copy, pcs);
  c->st.perf_answered++;
  return add_record(c, tid, pcs, n, state, GOT_ANSWER, -1);
}

/* The collecting thread itself: from the caller of the public function it
 * came through, or from here. */
static int self_thread(collection *c, pid_t tid) {
  uintptr_t pcs[CPROF__STACK_BUF];
  size_t n;
  const uintptr_t *frame = cprof__task_entry_frame;
  if (frame && frame[1] > CPROF__PC_SYNTHETIC_MAX)
    n = cprof__stack_walk_from(frame[1] - 1, frame[0], (uintptr_t)(frame + 2),
                               pcs, CPROF__ARRAY_LEN(pcs));
  else
    n = cprof__stack_walk_here(pcs, CPROF__ARRAY_LEN(pcs), 0);
  return add_record(c, tid, pcs, n, 'R', GOT_SELF, -1);
}

/* Withdraws the request in slot s of generation g: true when it was still
 * waiting (no handler will write it now); false when a handler claimed it
 * first, and is writing or has written it. */
static bool withdraw(struct slot *s, uint64_t g) {
  uint64_t w = g << 2 | REQ_WAITING;
  return atomic_compare_exchange_strong(&s->word, &w, g << 2 | REQ_IDLE);
}

/* Whether tid has gone to sleep in the kernel (t filled). */
static bool asleep(collection *c, pid_t tid, cprof__task *t) {
  return cprof__task_read(c->dirfd, tid, t) == 0 && t->stopped;
}

/* A running thread whose answer did not come: read from /proc if it has
 * gone to sleep (a sampler keeps the state of its first look), else
 * recorded as not answering. */
static int no_answer(collection *c, size_t i) {
  pid_t tid = c->pending[i].tid;
  char state = c->pending[i].state;
  cprof__task t;
  uintptr_t pcs[CPROF__STACK_BUF];
  if (asleep(c, tid, &t))
    return c->sampler ? read_thread(c, tid, &t, state, -1)
                      : read_thread(c, tid, &t, t.state, t.nr);
  return add_record(c, tid, pcs, 0, state,
                    t.refused && !t.running ? GOT_REFUSED : GOT_NO_ANSWER, -1);
}

/* cpu_at_deadline's marks: not read yet; given up on. */
#define NOT_READ (-1)
#define GAVE_UP (-2)

/* Past the deadline: whether to go on waiting, for some thread that was
 * still waited for (waited) and has had less than STARVED_CPU_NS on a
 * CPU since the first look past the deadline (its time then noted in
 * cpu_at_deadline). A thread that had that much and did not answer, one
 * that has never run, or one whose time cannot be read, is given up on
 * (GAVE_UP). */
static bool starved_wait(collection *c, size_t n, const bool *waited,
                         long long *cpu_at_deadline) {
  bool starved = false;
  for (size_t i = 0; i < n; i++) {
    if (!waited[i] || cpu_at_deadline[i] == GAVE_UP) continue;
    long long on = cprof__task_cpu_ns(c->dirfd, c->pending[i].tid);
    /* One never yet on a CPU has no stack of its own to wait for (and is
     * left out: left_out). */
    if (on <= 0 || (cpu_at_deadline[i] != NOT_READ &&
                   on - cpu_at_deadline[i] >= STARVED_CPU_NS)) {
      cpu_at_deadline[i] = GAVE_UP;
      continue;
    }
    if (cpu_at_deadline[i] == NOT_READ) cpu_at_deadline[i] = on;
    starved = true;
  }
  if (starved) c->st.starved_waits++;
  return starved;
}

/* Asks the pending (running) threads for their stacks, all at once, and
 * records each answer, or why there is none. No thread is sent a signal
 * while it could be waiting: each gets a perf event that samples it when
 * a timer interrupt finds it in user code (tasksample.h) or, where perf
 * events are refused, a one-shot timer on its own CPU clock whose signal
 * comes while it runs (cprof__task_ask_on_cpu). A profile's thread that
 * goes to sleep in the kernel before its answer is read from /proc
 * instead; a sampler's is waited for until its deadline, so that the
 * stack is of its next moment on a CPU. A profile's thread still waiting
 * for a CPU at the deadline is waited for longer (starved_wait). */
static int ask_pending(collection *c) {
  int err = 0;
  int64_t t0 = cprof__mono_ns();
  uint64_t gen[SLOTS];
  int asked[SLOTS];
  timer_t timers[SLOTS];
  cprof__task_sampler perf[SLOTS];
  size_t nperf = 0;
  int timers_ok = -1; /* unknown until a thread needs a timer */
  for (size_t i = 0; i < c->npending; i++) {
    pid_t tid = c->pending[i].tid;
    asked[i] = ASK_GONE;
    if (nperf < PERF_MAX && cprof__task_sample_open(tid, &perf[i]) == 0) {
      nperf++;
      c->st.perf++;
      asked[i] = ASK_PERF;
      continue;
    }
    if (errno == ESRCH) continue; /* gone */
    /* No signal free to ask it with, or timer_create not to be called
     * (a seccomp filter that kills for it): checked once a batch. */
    if (timers_ok < 0) timers_ok = cprof__timer_create_allowed();
    if (!signo || !timers_ok) {
      asked[i] = GOT_NO_ANSWER;
      c->st.no_timer++;
      continue;
    }
    char path[64], status[2048];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    if (cprof__proc_read(AT_FDCWD, path, status, sizeof status) <= 0) continue; /* gone */
    if (signal_in(status, "\nSigBlk:", signo)) {
      asked[i] = GOT_BLOCKED;
      continue;
    }
    if (signal_in(status, "\nSigPnd:", signo)) {
      asked[i] = GOT_NO_ANSWER; /* an earlier request is still undelivered */
      continue;
    }
    struct slot *s = &slots[i];
    uint64_t w = atomic_load(&s->word);
    if ((w & 3) == REQ_WRITING) { /* a late handler from an earlier round */
      asked[i] = GOT_NO_ANSWER;
      continue;
    }
    gen[i] = (w >> 2) + 1;
    atomic_store(&s->target, tid);
    atomic_store(&s->word, gen[i] << 2 | REQ_WAITING);
    if (cprof__task_ask_on_cpu(tid, signo, &timers[i]) != 0) {
      int e = errno;
      atomic_store(&s->word, gen[i] << 2 | REQ_IDLE);
      asked[i] = e == EINVAL || e == ESRCH ? ASK_GONE : GOT_NO_ANSWER;
      if (asked[i] == GOT_NO_ANSWER) c->st.no_timer++;
      continue;
    }
    c->st.signalled++;
    asked[i] = ASK_SIGNALLED;
  }
  /* Wait for every answer, with one deadline for all; a profile's thread
   * still waiting for a CPU then is waited for longer (starved_wait). */
  int64_t deadline = t0 + c->wait_ns;
  long long cpu_at_deadline[SLOTS];
  bool waited[SLOTS];
  for (size_t i = 0; i < c->npending; i++) {
    cpu_at_deadline[i] = NOT_READ;
    waited[i] = false;
  }
  for (;;) {
    bool waiting = false;
    for (size_t i = 0; i < c->npending; i++) {
      pid_t tid = c->pending[i].tid;
      cprof__task t;
      if (cpu_at_deadline[i] == GAVE_UP) continue;
      waited[i] = false;
      if (asked[i] == ASK_PERF) {
        cprof__task_regs r;
        if (cprof__task_sample_get(&perf[i], &r)) {
          if (!err) err = sampled_thread(c, tid, &r, c->pending[i].state);
          int64_t took = cprof__mono_ns() - t0;
          if (took > c->st.max_answer_ns) c->st.max_answer_ns = took;
        } else if (c->sampler || !asleep(c, tid, &t)) {
          waiting = waited[i] = true;
          continue;
        } else {
          c->st.slept++;
          if (!err) err = read_thread(c, tid, &t, t.state, t.nr);
        }
        cprof__task_sample_close(&perf[i]);
        asked[i] = ASK_DONE;
        continue;
      }
      if (asked[i] != ASK_SIGNALLED) continue;
      uint64_t w = atomic_load(&slots[i].word);
      if (w != (gen[i] << 2 | REQ_WAITING) && w != (gen[i] << 2 | REQ_WRITING))
        continue;
      waiting = waited[i] = true;
      if (!c->sampler && w == (gen[i] << 2 | REQ_WAITING) &&
          asleep(c, tid, &t) && withdraw(&slots[i], gen[i])) {
        timer_delete(timers[i]);
        asked[i] = ASK_DONE;
        c->st.slept++;
        if (!err) err = read_thread(c, tid, &t, t.state, t.nr);
      }
    }
    int64_t now = cprof__mono_ns();
    if (!waiting) break;
    if (now >= deadline &&
        (c->sampler || now >= t0 + STARVED_TIMEOUT_NS ||
         !starved_wait(c, c->npending, waited, cpu_at_deadline)))
      break;
    /* Answers come at the threads' timer interrupts: the collector sleeps
     * between its looks. */
    struct timespec ts = {0, now < deadline ? WAIT_STEP_NS : STARVED_STEP_NS};
    nanosleep(&ts, NULL);
  }
  for (size_t i = 0; i < c->npending; i++)
    if (asked[i] == ASK_SIGNALLED) timer_delete(timers[i]);
  for (size_t i = 0; i < c->npending; i++) {
    pid_t tid = c->pending[i].tid;
    char state = c->pending[i].state;
    uintptr_t pcs[CPROF__STACK_BUF];
    if (asked[i] == ASK_GONE || asked[i] == ASK_DONE) continue;
    if (asked[i] == ASK_PERF) {
      cprof__task_sample_close(&perf[i]);
      if (!err) err = no_answer(c, i);
      continue;
    }
    if (asked[i] != ASK_SIGNALLED) {
      if (!err) err = add_record(c, tid, pcs, 0, state, asked[i], -1);
      continue;
    }
    struct slot *s = &slots[i];
    /* Withdraw an unanswered request; if the handler claimed it
     * meanwhile, it is writing now and finishes shortly. */
    if (withdraw(s, gen[i])) {
      if (!err) err = no_answer(c, i);
      continue;
    }
    uint64_t w;
    int64_t until = cprof__mono_ns() + ANSWER_TIMEOUT_NS;
    while ((w = atomic_load(&s->word)) == (gen[i] << 2 | REQ_WRITING) &&
           cprof__mono_ns() < until)
      pause_briefly(ANSWER_TIMEOUT_NS);
    if (w != (gen[i] << 2 | REQ_DONE)) {
      if (!err) err = add_record(c, tid, pcs, 0, state, GOT_NO_ANSWER, -1);
      continue;
    }
    size_t n = s->n;
    memcpy(pcs, s->pcs, n * sizeof *pcs);
    atomic_store(&s->word, gen[i] << 2 | REQ_IDLE);
    int64_t took = cprof__mono_ns() - t0;
    if (took > c->st.max_answer_ns) c->st.max_answer_ns = took;
    if (!err) err = add_record(c, tid, pcs, n, state, GOT_ANSWER, -1);
  }
  c->npending = 0;
  return err;
}

static int one_thread(collection *c, pid_t tid, pid_t self) {
  uint32_t create_sid;
  bool own = false;
  if (cprof__task_lookup(tid, &create_sid, &own) && own) return 0;
  if (tid == self) return self_thread(c, tid);
  cprof__task t;
  /* A thread between two states (woken, not yet running) can briefly
   * read as neither running nor stopped: look again. */
  for (int tries = 0; tries < 3; tries++) {
    if (cprof__task_read(c->dirfd, tid, &t) != 0) return 0; /* exited */
    if (t.stopped) return read_thread(c, tid, &t, t.state, t.nr);
    if (t.running) break;
    if (t.state == 'Z' || t.state == 'X') return 0;
  }
  if (!t.running) {
    uintptr_t pcs[CPROF__STACK_BUF];
    if (t.refused) {
      static atomic_flag said = ATOMIC_FLAG_INIT;
      if (!atomic_flag_test_and_set(&said))
        cprof__warn("goroutine: the process is not dumpable (prctl "
                    "PR_SET_DUMPABLE 0): the kernel refuses "
                    "/proc/self/task/*/syscall, so threads waiting in it are "
                    "shown as cprof_thread_not_dumpable, without their stacks");
    }
    return add_record(c, tid, pcs, 0, t.state,
                      t.refused ? GOT_REFUSED : GOT_NO_ANSWER, -1);
  }
  c->pending[c->npending].tid = tid;
  c->pending[c->npending].state = t.state;
  if (++c->npending == SLOTS) return ask_pending(c);
  return 0;
}

static int collect(cprof__records *out, bool sampler, int64_t wait_ns) {
  pthread_once(&setup_once, setup);
  cprof__stacktab_init();
  pid_t *tids = NULL;
  size_t ntids = 0;
  cprof__lock(&collect_lock);
  collection_signal();
  int64_t t0 = cprof__mono_ns();
  out->time_ns = cprof__now_ns();
  collection c;
  memset(&c, 0, sizeof c);
  c.out = out;
  c.sampler = sampler;
  c.wait_ns = wait_ns;
  c.pid = getpid();
  c.dirfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  c.copy = cprof__malloc(STACK_COPY);
  c.calls = &calls;
  cprof__call_cache_round(c.calls);
  c.starts = cprof__calloc(START_MEMO, sizeof *c.starts);
  int err = c.dirfd < 0 ? CPROF_ESYS
                         : cprof__proc_tids_at(c.dirfd, &tids, &ntids);
  pid_t self = cprof__sys_gettid();
  for (size_t i = 0; !err && i < ntids; i++)
    err = one_thread(&c, tids[i], self);
  if (!err && c.npending) err = ask_pending(&c);
  if (c.dirfd >= 0) close(c.dirfd);
  cprof__free(c.copy);
  cprof__free(c.starts);
  c.st.total_ns = cprof__mono_ns() - t0;
  c.st.interrupted = atomic_load(&interrupted_calls);
  perf_total += c.st.perf;
  signalled_total += c.st.signalled;
  c.st.perf_total = perf_total;
  c.st.signalled_total = signalled_total;
  last_stats = c.st;
  cprof__unlock(&collect_lock);
  cprof__free(tids);
  return err;
}


int cprof__thread_sample_all(cprof__records *out) {
  /* Objects loaded since the last profile get their unwind tables now,
   * before the threads' stacks are walked. (The other profiles walk
   * nothing when they are written: their stacks were taken as they
   * happened. An exit dump used to refresh here for each profile, building
   * tables for the libraries the symbolizer had just loaded, 11% of the
   * dump of a program that exits at once.) */
  cprof__stack_refresh();
  return collect(out, false, ANSWER_TIMEOUT_NS);
}

int cprof__thread_sample_running(cprof__records *out, int64_t wait_ns) {
  return collect(out, true,
                 wait_ns > 0 && wait_ns < ANSWER_TIMEOUT_NS ? wait_ns
                                                            : ANSWER_TIMEOUT_NS);
}

void cprof__thread_sample_last_stats(cprof__thread_sample_stats *out) {
  cprof__lock(&collect_lock);
  *out = last_stats;
  cprof__unlock(&collect_lock);
}

long cprof__thread_sample_count(void) {
  pid_t *tids = NULL;
  size_t n = 0;
  if (list_threads(&tids, &n) != 0) return 0;
  long count = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t sid;
    bool own = false;
    if (!(cprof__task_lookup(tids[i], &sid, &own) && own)) count++;
  }
  cprof__free(tids);
  return count;
}
