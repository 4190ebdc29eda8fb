/*
 * The goroutine ("threads") profile (goroutine.h). It owns one real-time
 * signal, its handler and a single static request slot. The collector
 * asks threads one at a time: it publishes (generation, target tid) in the
 * slot, sends the signal with tgkill and waits, with a deadline, for the
 * handler to post the stack. The slot is static and every claim of it is a
 * compare-and-swap on (generation, state), so a handler that runs after the
 * collector gave up finds the request withdrawn (or another thread's) and
 * does nothing; nothing it could write to is ever freed.
 *
 * The handler is async-signal-safe: it takes no lock, allocates nothing,
 * calls only the stack walker and gettid, and preserves errno. It is never
 * installed over a handler the application set for the same signal.
 * Everything else runs in normal context under collect_lock, which fork
 * also takes, so a child never inherits a collection in progress.
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

#include "base/env.h"
#include "profile/goroutine.h"
#include "base/mem.h"
#include "encode/writer.h"
#include "capture/stack.h"
#include "capture/stacktab.h"
#include "base/sys.h"
#include "encode/symbolize.h"
#include "source/threads.h"
#include "base/lock.h"

/* How long the collector waits for one thread's answer. */
#define ANSWER_TIMEOUT_NS (20 * 1000 * 1000)
#define DEFAULT_SIGNAL_OFFSET 5

/* The request slot's states, in the low two bits of its word. */
enum { REQ_IDLE = 0, REQ_WAITING = 1, REQ_WRITING = 2, REQ_DONE = 3 };

/* How each thread's stack was obtained (a record's v[2]). */
enum { GOT_ANSWER = 0, GOT_SELF = 1, GOT_BLOCKED = 2, GOT_NO_ANSWER = 3 };

static struct {
  _Atomic uint64_t word; /* generation << 2 | state */
  _Atomic pid_t target;
  size_t n;
  uintptr_t pcs[CPROF__STACK_BUF];
} req;

static pthread_mutex_t collect_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int signo;          /* 0 until set up */
static int setup_err;      /* 0, or why the profile is unavailable */
static cprof__goroutine_stats last_stats; /* under collect_lock */

/* Never called: their addresses stand, as one-frame stacks, for a thread
 * whose stack could not be taken. CPROF__DISTINCT keeps them distinct functions. */
CPROF__DISTINCT void cprof_thread_blocks_signal(void);
CPROF__DISTINCT void cprof_thread_did_not_answer(void);
CPROF__DISTINCT void cprof_thread_blocks_signal(void) {
  __asm__ volatile("" ::: "memory");
}
CPROF__DISTINCT void cprof_thread_did_not_answer(void) {
  __asm__ volatile("nop" ::: "memory");
}

static pid_t gettid_raw(void) { return (pid_t)cprof__sys4(SYS_gettid, 0, 0, 0, 0); }

/*
 * Threads blocked inside libc (a futex wait, a read) are usually stopped in
 * code built without frame pointers that reuses the frame-pointer register,
 * so the frame walk ends at the interrupted pc. The handler then scans the
 * stack above the stack pointer for the first word that is an address in
 * an executable mapping (a return address) followed, higher up, by a
 * plausible frame record {frame pointer above it, return address}, and
 * walks on from there. The mappings are copied here by the collector
 * before it asks any thread, so the handler only reads a static array.
 */
#define EXEC_RANGES 256
#define SCAN_BYTES (16 * 1024)
static struct {
  uintptr_t lo, hi;
} exec_ranges[EXEC_RANGES];
static _Atomic size_t nexec;

static bool in_exec(uintptr_t a) {
  size_t n = atomic_load_explicit(&nexec, memory_order_acquire);
  for (size_t i = 0; i < n; i++)
    if (a >= exec_ranges[i].lo && a < exec_ranges[i].hi) return true;
  return false;
}

/* Reads the word at a, probing each new page first; false if unreadable.
 * The scan reads other frames' memory, which the sanitizers would flag. */
__attribute__((no_sanitize("address", "thread"))) static bool read_word(
    uintptr_t a, uintptr_t *page_ok, uintptr_t *out) {
  uintptr_t page = a & ~(uintptr_t)4095;
  if (page != *page_ok) {
    if (!cprof__stack_readable(a & ~(uintptr_t)15)) return false;
    *page_ok = page;
  }
  *out = *(const uintptr_t *)a;
  return true;
}

/* True when the code before a looks like a call: call rel32 (E8), or an
 * indirect call through a register or memory (FF /2, 2 to 7 bytes). The
 * code is copied by the fault-free reader: its library may be unloaded
 * while the handler runs. */
static bool is_return_address(uintptr_t a) {
  if (!in_exec(a) || !in_exec(a - 7)) return false;
  unsigned char c[8]; /* c[8 - k] is the byte at a - k */
  if (!cprof__safe_read(a - 8, c, sizeof c)) return false;
  if (c[8 - 5] == 0xe8) return true;
  for (int len = 2; len <= 7; len++)
    if (c[8 - len] == 0xff && ((c[8 - len + 1] >> 3) & 7) == 2) return true;
  return false;
}

/* A frame record at x: {a frame pointer above x, a return address}. */
CPROF__SIGNAL_SAFE static bool plausible_record(uintptr_t x, uintptr_t *page_ok) {
  uintptr_t f, r;
  return read_word(x, page_ok, &f) && f > x &&
         f - x <= ((uintptr_t)1 << 20) && (f & 7) == 0 &&
         read_word(x + 8, page_ok, &r) && in_exec(r);
}

/* pcs[0] is the interrupted pc. The frames between the stack pointer and
 * the first frame record (fp when it is plausible, else the first
 * plausible record found above sp) belong to code without frame records:
 * every word there that is a return address is kept, then the chain from
 * the record is walked. A stale return address can slip in. */
static size_t scan_walk(uintptr_t sp, uintptr_t fp, uintptr_t *pcs,
                        size_t max) {
  uintptr_t page_ok = 0, x = 0, r, f;
  size_t n = 1;
  sp &= ~(uintptr_t)7;
  if (fp > sp && fp - sp < SCAN_BYTES && (fp & 7) == 0 &&
      plausible_record(fp, &page_ok))
    x = fp;
  for (uintptr_t y = sp; !x && y < sp + SCAN_BYTES; y += 8)
    if (plausible_record(y, &page_ok)) x = y;
  if (!x) return n;
  for (uintptr_t y = sp; y < x && n + 2 < max; y += 8)
    if (read_word(y, &page_ok, &r) && is_return_address(r)) pcs[n++] = r - 1;
  if (!read_word(x, &page_ok, &f) || !read_word(x + 8, &page_ok, &r))
    return n;
  return n + cprof__stack_walk_from(r - 1, f, x + 16, pcs + n, max - n);
}

/* The interrupted thread's stack: the CFI walk, which steps through libc's
 * frames by their rows; with CPROF_UNWIND=fp, the frame walk when it
 * stopped in the main executable and the scan when it stopped in a library
 * (libc is built without frame pointers). */
static size_t walk_interrupted(const void *uc, uintptr_t *pcs, size_t max) {
#if defined(__x86_64__)
  const ucontext_t *u = uc;
  uintptr_t pc = (uintptr_t)u->uc_mcontext.gregs[REG_RIP];
  if (cprof__stack_mode() == CPROF__UNWIND_FP && atomic_load(&nexec) > 0 &&
      !(pc >= exec_ranges[0].lo && pc < exec_ranges[0].hi)) {
    pcs[0] = pc;
    return scan_walk((uintptr_t)u->uc_mcontext.gregs[REG_RSP],
                     (uintptr_t)u->uc_mcontext.gregs[REG_RBP], pcs, max);
  }
#endif
  return cprof__stack_walk_ucontext(uc, pcs, max);
}

/* Copies the executable mappings for the handler's scan. Normal context;
 * collect_lock held. */
static void snapshot_exec_ranges(void) {
  cprof__sym_lock();
  cprof__sym_refresh();
  size_t n = cprof__sym_nmappings();
  if (n > EXEC_RANGES) n = EXEC_RANGES;
  atomic_store(&nexec, 0);
  for (size_t i = 0; i < n; i++) {
    const cprof__sym_mapping *m = cprof__sym_mapping_at(i);
    exec_ranges[i].lo = (uintptr_t)m->start;
    exec_ranges[i].hi = (uintptr_t)m->limit;
  }
  atomic_store_explicit(&nexec, n, memory_order_release);
  cprof__sym_unlock();
}

CPROF__SIGNAL_SAFE static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)si;
  int saved_errno = errno;
  uint64_t w = atomic_load(&req.word);
  if ((w & 3) == REQ_WAITING && atomic_load(&req.target) == gettid_raw() &&
      atomic_compare_exchange_strong(&req.word, &w,
                                     (w & ~(uint64_t)3) | REQ_WRITING)) {
    /* Too little stack left for a walk: the thread answers with an
     * empty stack rather than overrun its stack. */
    req.n = cprof__stack_room() >= CPROF__HANDLER_STACK
                ? walk_interrupted(uc, req.pcs, CPROF__ARRAY_LEN(req.pcs))
                : 0;
    atomic_store(&req.word, (w & ~(uint64_t)3) | REQ_DONE);
  }
  errno = saved_errno;
}

static void before_fork(void) { cprof__lock(&collect_lock); }
static void after_fork(void) { cprof__unlock(&collect_lock); }

static void setup(void) {
  long long off = DEFAULT_SIGNAL_OFFSET;
  if (!cprof__env_int("CPROF_THREADS_SIGNAL", 3, SIGRTMAX - SIGRTMIN,
                      "using the default SIGRTMIN+5", &off))
    off = DEFAULT_SIGNAL_OFFSET;
  int sig = SIGRTMIN + (int)off;
  struct sigaction old;
  if (sigaction(sig, NULL, &old) != 0) {
    setup_err = CPROF_ESYS;
    return;
  }
  bool taken = (old.sa_flags & SA_SIGINFO)
                   ? old.sa_sigaction != on_signal
                   : old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN;
  if (taken) {
    cprof__warn("goroutine profile disabled: the program has its own "
                "handler for SIGRTMIN+%d (set CPROF_THREADS_SIGNAL to "
                "another offset)",
                (int)off);
    setup_err = CPROF_ESYS;
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, NULL) != 0) {
    setup_err = CPROF_ESYS;
    return;
  }
  pthread_atfork(before_fork, after_fork, after_fork);
  signo = sig;
}

/* Reads a small /proc file into buf (NUL-terminated); returns its length
 * or -1. */
static ssize_t read_proc(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len + 1 < size) {
    ssize_t r = read(fd, buf + len, size - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

/* The state letter of /proc/self/task/<tid>/stat, or '?'. */
static char thread_state(pid_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  if (read_proc(path, buf, sizeof buf) <= 0) return '?';
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

/* Whether sig is in the thread's blocked or pending set (/proc's SigBlk
 * and SigPnd lines are hex masks, bit n-1 for signal n). */
static bool signal_in(const char *status, const char *field, int sig) {
  const char *p = strstr(status, field);
  if (!p) return false;
  unsigned long long mask = strtoull(p + strlen(field), NULL, 16);
  return (mask >> (sig - 1)) & 1;
}

static const char *state_name(char c) {
  switch (c) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk sleep";
    case 'T': return "stopped";
    case 't': return "tracing stop";
    case 'Z': return "zombie";
    case 'X': return "dead";
    case 'I': return "idle";
    case 'P': return "parked";
    default: return "unknown";
  }
}

static void pause_briefly(int64_t waited_ns) {
  if (waited_ns < 200 * 1000) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Waits until the request word leaves `from`; returns the last word seen.
 * Gives up at the deadline. */
static uint64_t wait_word(uint64_t from, int64_t t0, int64_t deadline) {
  uint64_t w;
  while ((w = atomic_load(&req.word)) == from) {
    int64_t now = cprof__mono_ns();
    if (now >= deadline) break;
    pause_briefly(now - t0);
  }
  return w;
}

/* Asks tid for its stack. Returns GOT_ANSWER with pcs filled, GOT_NO_ANSWER,
 * or -1 when the thread no longer exists. collect_lock held. */
static int ask(pid_t tid, uintptr_t *pcs, size_t *n, int64_t *took) {
  int64_t t0 = cprof__mono_ns();
  uint64_t w = atomic_load(&req.word);
  if ((w & 3) == REQ_WRITING) /* a late handler from an earlier request */
    w = wait_word(w, t0, t0 + ANSWER_TIMEOUT_NS);
  if ((w & 3) == REQ_WRITING) return GOT_NO_ANSWER;
  uint64_t gen = (w >> 2) + 1;
  atomic_store(&req.target, tid);
  atomic_store(&req.word, gen << 2 | REQ_WAITING);
  if (syscall(SYS_tgkill, getpid(), tid, signo) != 0) {
    int gone = errno == ESRCH;
    atomic_store(&req.word, gen << 2 | REQ_IDLE);
    return gone ? -1 : GOT_NO_ANSWER;
  }
  w = wait_word(gen << 2 | REQ_WAITING, t0, t0 + ANSWER_TIMEOUT_NS);
  if (w == (gen << 2 | REQ_WAITING)) {
    /* Withdraw the request; if the handler claimed it meanwhile, it is
     * writing now and will finish shortly. */
    if (atomic_compare_exchange_strong(&req.word, &w, gen << 2 | REQ_IDLE))
      return GOT_NO_ANSWER;
  }
  if (w == (gen << 2 | REQ_WRITING))
    w = wait_word(w, t0, cprof__mono_ns() + ANSWER_TIMEOUT_NS);
  if (w != (gen << 2 | REQ_DONE)) return GOT_NO_ANSWER;
  *n = req.n;
  memcpy(pcs, req.pcs, *n * sizeof *pcs);
  atomic_store(&req.word, gen << 2 | REQ_IDLE);
  *took = cprof__mono_ns() - t0;
  return GOT_ANSWER;
}

/* The thread ids of the process, from /proc/self/task. */
static int list_threads(pid_t **out, size_t *count) {
  cprof__guard_enter();
  DIR *d = opendir("/proc/self/task");
  cprof__guard_exit();
  if (!d) return CPROF_ESYS;
  pid_t *v = NULL;
  size_t len = 0, cap = 0;
  int err = 0;
  struct dirent *e;
  while (!err && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (len == cap) {
      cap = cap ? cap * 2 : 64;
      pid_t *nv = cprof__realloc(v, cap * sizeof *nv);
      if (!nv) {
        err = CPROF_ENOMEM;
        break;
      }
      v = nv;
    }
    v[len++] = (pid_t)atoi(e->d_name);
  }
  cprof__guard_enter();
  closedir(d);
  cprof__guard_exit();
  if (err) {
    cprof__free(v);
    return err;
  }
  *out = v;
  *count = len;
  return 0;
}

static int one_thread(pid_t tid, pid_t self, cprof__records *out,
                      cprof__goroutine_stats *st) {
  uintptr_t pcs[CPROF__STACK_BUF];
  size_t n = 0;
  int64_t took = 0;
  int how;
  char path[64], status[2048];
  char state = thread_state(tid);
  snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
  if (tid == self) {
    n = cprof__stack_walk_here(pcs, CPROF__ARRAY_LEN(pcs), 0);
    how = GOT_SELF;
  } else if (read_proc(path, status, sizeof status) <= 0) {
    return 0; /* exited since it was listed */
  } else if (signal_in(status, "\nSigBlk:", signo)) {
    how = GOT_BLOCKED;
  } else if (signal_in(status, "\nSigPnd:", signo)) {
    how = GOT_NO_ANSWER; /* an earlier request is still undelivered */
  } else {
    how = ask(tid, pcs, &n, &took);
    if (how < 0) return 0;
  }
  st->threads++;
  if (how == GOT_ANSWER || how == GOT_SELF) st->answered++;
  if (took > st->max_answer_ns) st->max_answer_ns = took;
  if (how == GOT_BLOCKED || how == GOT_NO_ANSWER) {
    pcs[0] = how == GOT_BLOCKED ? (uintptr_t)cprof_thread_blocks_signal
                                : (uintptr_t)cprof_thread_did_not_answer;
    n = 1;
  }
  const int64_t v[3] = {1, state, how};
  return cprof__records_add(out, cprof__stacktab_intern(pcs, n),
                            (uint32_t)tid, v, 3);
}

static int goroutine_collect(cprof__records *out) {
  pthread_once(&setup_once, setup);
  if (setup_err) return setup_err;
  cprof__stacktab_init();
  pid_t *tids = NULL;
  size_t ntids = 0;
  cprof__lock(&collect_lock);
  snapshot_exec_ranges();
  int64_t t0 = cprof__mono_ns();
  out->time_ns = cprof__now_ns();
  cprof__goroutine_stats st = {0};
  int err = list_threads(&tids, &ntids);
  pid_t self = gettid_raw();
  for (size_t i = 0; !err && i < ntids; i++)
    err = one_thread(tids[i], self, out, &st);
  st.total_ns = cprof__mono_ns() - t0;
  last_stats = st;
  cprof__unlock(&collect_lock);
  cprof__free(tids);
  return err;
}

void cprof__goroutine_last_stats(cprof__goroutine_stats *out) {
  cprof__lock(&collect_lock);
  *out = last_stats;
  cprof__unlock(&collect_lock);
}

static long goroutine_entries(void) {
  pid_t *tids = NULL;
  size_t n = 0;
  if (list_threads(&tids, &n) != 0) return 0;
  cprof__free(tids);
  return (long)n;
}

/* Frame k of pcs as a Go traceback prints it: "func(...)" then
 * "\tfile:line +0xoff", the offset on the outermost (physical) frame; a
 * function its call left by a tail call first, as an inlined one. */
static int write_frame(cprof_buf *out, const uintptr_t *pcs, size_t k) {
  uintptr_t pc = pcs[k];
  const cprof__sym_result *r = cprof__sym_lookup(pc);
  if (!r || r->nframes == 0)
    return cprof__buf_printf(out, "?(...)\n\t? pc=%#llx\n",
                             (unsigned long long)pc);
  int err = 0;
  const cprof__sym_frame *outer = &r->frames[r->nframes - 1];
  const cprof__sym_frame *tail = cprof__tail_callee(pcs, k, false);
  if (tail)
    err = cprof__buf_printf(out, "%s(...)\n\t%s:%d\n", tail->name,
                            tail->file[0] ? tail->file : "?", tail->line);
  for (int f = 0; !err && f < r->nframes; f++) {
    const cprof__sym_frame *fr = &r->frames[f];
    err = cprof__buf_printf(out, "%s(...)\n\t%s:%d", fr->name,
                            fr->file[0] ? fr->file : "?", fr->line);
    if (!err && f == r->nframes - 1)
      err = cprof__buf_printf(
          out, " +%#llx",
          (unsigned long long)(outer->start && pc >= outer->start
                                   ? pc - outer->start
                                   : 0));
    if (!err) err = cprof__buf_printf(out, "\n");
  }
  return err;
}

static void thread_name(pid_t tid, char *name, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
  if (read_proc(path, name, size) <= 0) {
    snprintf(name, size, "?");
    return;
  }
  name[strcspn(name, "\n")] = '\0';
}

static int write_threads(const cprof__records *recs, const cprof_sink *sink) {
  cprof_buf out = {0};
  int err = 0;
  cprof__text_begin();
  for (size_t i = 0; !err && i < recs->len; i++) {
    const cprof__record *r = &recs->v[i];
    char name[64];
    thread_name((pid_t)r->tag, name, sizeof name);
    err = cprof__buf_printf(&out, "goroutine %u [%s, name=%s]:\n",
                            (unsigned)r->tag, state_name((char)r->v[1]),
                            name);
    const uintptr_t *pcs;
    size_t n = cprof__stacktab_get(r->sid, &pcs);
    n = cprof__visible_depth(pcs, n);
    for (size_t k = 0; !err && k < n; k++) err = write_frame(&out, pcs, k);
    if (!err) err = cprof__buf_printf(&out, "\n");
  }
  cprof__text_end();
  return cprof__text_flush(&out, err, sink);
}

static int goroutine_write(const cprof__records *recs, int debug,
                           int64_t duration_ns, const cprof_sink *sink) {
  if (debug >= 2) return write_threads(recs, sink);
  return cprof__write_count_profile("goroutine", recs, debug, duration_ns,
                                    sink);
}

const cprof__profile_def cprof__goroutine_profile = {
    .name = "goroutine",
    .alias = "threads", /* cprof's name for what Go calls goroutines */
    .max_debug = 2,
    .description = "Stack traces of all current goroutines. Use debug=2 as "
                   "a query parameter to export in the same format as an "
                   "unrecovered panic.",
    .supports_delta = false,
    .entries = goroutine_entries,
    .collect = goroutine_collect,
    .write = goroutine_write,
};
