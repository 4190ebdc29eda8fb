/*
 * Threads read from /proc and the table of threads cprof saw start
 * (taskread.h). The /proc readers run in normal context, in the collector;
 * they never signal, stop or otherwise disturb the thread they read: the
 * kernel reports a blocked thread's system call, stack pointer and pc in
 * /proc/self/task/TID/syscall (reading our own threads needs no ptrace
 * permission); the walker (stack.c) copies the stack with
 * process_vm_readv, which reports an unmapped page instead of faulting. The table is a fixed,
 * lock-free open-addressing array, written by the thread trampolines
 * (threads.c) and read by the collector.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/proc.h"
#include "base/sig.h"
#include "capture/stack.h"
#include "capture/taskread.h"

__thread void *cprof__task_entry_frame CPROF__TLS;

/* Parses a syscall file: "running", "-1 SP PC", or "NR A1..A6 SP PC". */
static void parse_syscall(const char *s, cprof__task *t) {
  t->running = strncmp(s, "running", 7) == 0;
  t->stopped = false;
  t->nr = -1;
  if (t->running) return;
  char *end;
  long nr = strtol(s, &end, 10);
  if (end == s) return;
  unsigned long long v[8];
  int n = 0;
  for (const char *p = end; n < 8;) {
    while (*p == ' ') p++;
    if (*p == '\0' || *p == '\n') break;
    v[n++] = strtoull(p, &end, 16);
    if (end == p) break;
    p = end;
  }
  if ((nr == -1 && n == 2) || (nr >= 0 && n == 8)) {
    t->nr = nr;
    t->sp = (uintptr_t)v[n - 2];
    t->pc = (uintptr_t)v[n - 1];
    t->stopped = t->sp != 0 && t->pc != 0;
  }
}

/* The path of thread tid's /proc file `file`, relative to dirfd (an open
 * /proc/self/task) or absolute for AT_FDCWD. */
static void task_file(char *path, size_t size, int dirfd, pid_t tid,
                      const char *file) {
  if (dirfd == AT_FDCWD)
    snprintf(path, size, "/proc/self/task/%d/%s", (int)tid, file);
  else
    snprintf(path, size, "%d/%s", (int)tid, file);
}

char cprof__task_state(int dirfd, pid_t tid, char *name, size_t size) {
  char path[64], buf[512];
  if (name && size) name[0] = '\0';
  task_file(path, sizeof path, dirfd, tid, "stat");
  if (cprof__proc_read_line(dirfd, path, buf, sizeof buf) <= 0) return '?';
  /* "TID (COMM) S ...": the name may hold ')' and spaces, so it ends at
   * the last ')'. */
  const char *open = strchr(buf, '(');
  const char *p = strrchr(buf, ')');
  if (!p || !open || open > p) return '?';
  if (name && size) {
    size_t n = (size_t)(p - open - 1);
    if (n >= size) n = size - 1;
    memcpy(name, open + 1, n);
    name[n] = '\0';
  }
  return p[1] == ' ' && p[2] ? p[2] : '?';
}

long cprof__task_age_ms(int dirfd, pid_t tid) {
  char path[64], buf[512];
  task_file(path, sizeof path, dirfd, tid, "stat");
  if (cprof__proc_read_line(dirfd, path, buf, sizeof buf) < 0) return -1;
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  if (!p) return -1;
  unsigned long long start = 0;
  /* After ")": state is field 3, starttime field 22. */
  int field = 2;
  for (p++; *p && field < 22; p++)
    if (*p == ' ') field++;
  if (field != 22 || sscanf(p, "%llu", &start) != 1) return -1;
  long hz = sysconf(_SC_CLK_TCK);
  struct timespec now;
  if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return -1;
  long long now_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  return (long)(now_ms - (long long)(start * 1000 / (unsigned long long)hz));
}

long long cprof__task_cpu_ns(int dirfd, pid_t tid) {
  char path[64], buf[128];
  task_file(path, sizeof path, dirfd, tid, "schedstat");
  unsigned long long on_cpu;
  if (cprof__proc_read_line(dirfd, path, buf, sizeof buf) <= 0 ||
      sscanf(buf, "%llu", &on_cpu) != 1 || on_cpu > (unsigned long long)LLONG_MAX)
    return -1;
  return (long long)on_cpu;
}

int cprof__task_has_run(int dirfd, pid_t tid) {
  long long on_cpu = cprof__task_cpu_ns(dirfd, tid);
  return on_cpu < 0 ? -1 : on_cpu > 0;
}

int cprof__task_read(int dirfd, pid_t tid, cprof__task *out) {
  char path[64], buf[512];
  memset(out, 0, sizeof *out);
  out->state = '?';
  out->nr = -1;
  task_file(path, sizeof path, dirfd, tid, "syscall");
  ssize_t got = cprof__proc_read_line(dirfd, path, buf, sizeof buf);
  if (got <= 0) {
    if (got == 0 || (errno != EACCES && errno != EPERM)) return -1;
    out->state = cprof__task_state(dirfd, tid, NULL, 0);
    if (out->state == '?') return -1;
    out->refused = true;
    out->running = out->state == 'R';
    return 0;
  }
  parse_syscall(buf, out);
  /* The state letter costs a second file: read only where the syscall
   * file does not tell (a thread stopped outside a system call, or
   * between states); a thread in a system call is left '?', for the
   * writer to read when it prints states. */
  if (out->running)
    out->state = 'R';
  else if (!out->stopped || out->nr < 0)
    out->state = cprof__task_state(dirfd, tid, NULL, 0);
  return 0;
}

int cprof__task_ask_on_cpu(pid_t tid, int signo, timer_t *out) {
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = signo;
  sev.sigev_value.sival_int = CPROF__SIG_COOKIE;
  sev.sigev_notify_thread_id = tid;
  if (timer_create(cprof__thread_cpu_clock(tid), &sev, out) != 0) return -1;
  /* Relative to the thread's clock now: it expires as soon as the thread
   * has run 1 ns more, which the kernel notices at its next tick on a CPU
   * (an absolute time already past would fire here, at once). */
  struct itimerspec its = {{0, 0}, {0, 1}};
  if (timer_settime(*out, 0, &its, NULL) != 0) {
    int e = errno;
    timer_delete(*out);
    errno = e;
    return -1;
  }
  return 0;
}

static const struct {
  long nr;
  const char *name;
} syscalls[] = {
#define X(n) {SYS_##n, #n},
    X(read) X(write) X(readv) X(writev) X(pread64) X(pwrite64) X(preadv)
    X(pwritev) X(openat) X(close) X(ppoll) X(pselect6) X(epoll_pwait)
    X(clock_nanosleep) X(futex) X(accept) X(accept4) X(connect) X(recvfrom)
    X(recvmsg) X(recvmmsg) X(sendto) X(sendmsg) X(sendmmsg) X(rt_sigsuspend)
    X(rt_sigtimedwait) X(msgrcv) X(msgsnd) X(semop) X(semtimedop) X(wait4)
    X(waitid) X(io_getevents) X(flock) X(fcntl) X(ioctl) X(fsync)
    X(fdatasync) X(sync) X(mmap) X(munmap) X(mprotect) X(madvise) X(brk)
    X(clone) X(exit) X(exit_group) X(sched_yield) X(getrandom) X(splice)
    X(sendfile) X(msync) X(mq_timedreceive) X(mq_timedsend) X(nanosleep)
    X(epoll_wait) X(select) X(poll) X(pause) X(open)
#ifdef SYS_io_uring_enter
    X(io_uring_enter)
#endif
#ifdef SYS_epoll_pwait2
    X(epoll_pwait2)
#endif
#undef X
};

const char *cprof__syscall_name(long nr) {
  for (size_t i = 0; i < CPROF__ARRAY_LEN(syscalls); i++)
    if (syscalls[i].nr == nr) return syscalls[i].name;
  return NULL;
}

const char *cprof__task_state_name(char c) {
  switch (c) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk wait";
    case 'T': return "stopped";
    case 't': return "tracing stop";
    case 'Z': return "zombie";
    case 'X': return "dead";
    case 'I': return "idle";
    case 'P': return "parked";
    default: return "unknown";
  }
}

/*
 * The thread table: slots of one 64-bit word, info << 32 | tid, so that a
 * thread's tid and what is known of it are published and read together
 * (with two words, a lookup between a new thread's claim of a slot and its
 * info could read the slot's previous info: one of cprof's connection
 * threads, just started, read as the application's). info = own << 31 |
 * exiting << 30 | creating stack id (CPROF__TASK_NO_STACK masked to 30
 * bits when unknown). A slot's tid is 0 when never used and DEAD when
 * forgotten; a thread that exits is marked exiting and keeps its slot (a
 * collection that finds it on its way out still knows it, cprof's own
 * threads stay out), until a new thread of the same tid takes it over or
 * a new thread finds, on its probe path, that the tid is gone and takes
 * the slot.
 */
#define TABLE_SLOTS 16384
#define MAX_PROBE 64
#define DEAD (-1)
#define OWN_BIT 0x80000000u
#define EXITING_BIT 0x40000000u
#define SID_MASK 0x3fffffffu

static _Atomic uint64_t table[TABLE_SLOTS];

static size_t slot_of(pid_t tid) {
  return (size_t)(((uint32_t)tid * 2654435761u) >> 18) & (TABLE_SLOTS - 1);
}

static pid_t word_tid(uint64_t w) { return (pid_t)(int32_t)(uint32_t)w; }
static uint32_t word_info(uint64_t w) { return (uint32_t)(w >> 32); }

/* Whether thread tid of this process is gone. */
static bool gone(pid_t tid) {
  return syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH;
}

void cprof__task_note(pid_t tid, uint32_t create_sid, bool own) {
  uint32_t info = (own ? OWN_BIT : 0) | (create_sid & SID_MASK);
  uint64_t want = (uint64_t)info << 32 | (uint32_t)tid;
  size_t at = slot_of(tid);
  int saved_errno = errno;
  for (int i = 0; i < MAX_PROBE; i++, at = (at + 1) & (TABLE_SLOTS - 1)) {
    uint64_t w = atomic_load(&table[at]);
    /* The slot is this tid's (an earlier thread's of the same tid) or free
     * to take; a failed exchange reloads w and looks at the slot again. */
    for (;;) {
      pid_t cur = word_tid(w);
      bool mine = cur == tid || cur == 0 || cur == DEAD ||
                  ((word_info(w) & EXITING_BIT) && gone(cur));
      if (!mine) break;
      if (atomic_compare_exchange_strong(&table[at], &w, want)) goto noted;
    }
  }
noted:
  errno = saved_errno;
}

void cprof__task_exiting(pid_t tid) {
  size_t at = slot_of(tid);
  for (int i = 0; i < MAX_PROBE; i++, at = (at + 1) & (TABLE_SLOTS - 1)) {
    pid_t cur = word_tid(atomic_load(&table[at]));
    if (cur == 0) return;
    if (cur == tid) {
      /* Still running, so no other thread takes the slot meanwhile. */
      atomic_fetch_or(&table[at], (uint64_t)EXITING_BIT << 32);
      return;
    }
  }
}

bool cprof__task_lookup(pid_t tid, uint32_t *create_sid, bool *own) {
  size_t at = slot_of(tid);
  for (int i = 0; i < MAX_PROBE; i++, at = (at + 1) & (TABLE_SLOTS - 1)) {
    uint64_t w = atomic_load(&table[at]);
    pid_t cur = word_tid(w);
    if (cur == 0) return false;
    if (cur == tid) {
      uint32_t info = word_info(w);
      *own = (info & OWN_BIT) != 0;
      *create_sid = (info & SID_MASK) == SID_MASK ? CPROF__TASK_NO_STACK
                                                  : (info & SID_MASK);
      return true;
    }
  }
  return false;
}
