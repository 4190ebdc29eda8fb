/*
 * Dumps on termination and signals (dump.h). The configuration comes from
 * the grammar in dumpspec.c; the rates a spec gives are set when dumps are
 * configured. Listed profiles are collected from the start (a windowed
 * profile, cpu, runs as its own window until the dump). Every profile is
 * handled through its registry definition; none is named here.
 *
 * Signals. On SIGTERM, SIGINT and SIGUSR1 the handler records the request
 * (SIGUSR1 requests are one flag, however many arrive, so a storm of them
 * costs one more dump at most) and wakes the dumper thread through a
 * futex, which never blocks; the dumper blocks every signal and writes each
 * profile as a PEM block. Then the signal's previous disposition happens:
 * SIGUSR1 returns at once and the program carries on (installed with
 * SA_RESTART), the CPU window restarting; a terminating signal whose
 * disposition was the default waits in the handler for the dump (at most
 * DUMP_WAIT_MS), then restores the default and re-raises, so the
 * interrupted thread never runs the program's code again and the parent
 * sees the process die of the signal; a handler the program had installed
 * is called once the dump is done (waiting at most DUMP_WAIT_MS), installed
 * with the program's own SA_RESTART choice. The handler may call only
 * CPROF__SIGNAL_SAFE code, atomics, futexes and the async-signal-safe
 * functions test/e2e/signal_calls.sh allows (raise, getpid; the default
 * disposition goes back with the raw rt_sigaction),
 * plus the program's own handler, through its pointer. At normal exit an atexit
 * handler dumps on the exiting thread, with the dump signals held off.
 *
 * _exit and _Exit are interposed (src/exit.c): in the process that configured dumps,
 * they ask the dumper for the final dump, as a terminating signal does,
 * and wait for it (at most DUMP_WAIT_MS) before the real one runs; only
 * getpid, atomics and futexes, since _exit may be called from a signal
 * handler. Anywhere else (a fork child, which calls _exit to skip its
 * parent's exit-time work; a vfork child, sharing its parent's memory)
 * they do nothing but exit.
 *
 * Fork. A fork child keeps dumping: its atfork handler starts a dumper of
 * its own and windows of its own (the CPU profile from zero at the fork),
 * and its blocks carry its own pid. It inherits the symbolizer's state
 * (encode/symbolize.c); so that there is something to inherit, the
 * parent's dumper names the recorded stacks after a fork (warm_symbols). It holds no descriptor on the stderr it
 * inherited (a daemon that closes its standard descriptors must not keep
 * its starter's pipe open): it writes to fd 2 while fd 2 is the same file.
 * A child that tries to exec is being replaced and no longer dumps. The
 * dump state belongs to the pid recorded by configure or the atfork
 * handler: in any other process (a vfork child, a child of a raw clone)
 * the handlers and exit hooks leave everything alone.
 *
 * Output. CPROF_DUMP_OUT is opened without blocking and created 0600; a
 * FIFO with no reader yet is opened again at each dump. Otherwise dumps go
 * to a descriptor of cprof's own on the stderr the program had when dumps
 * were configured (a non-blocking description of its own for a pipe or a
 * terminal, else a duplicate), never to whatever fd 2 is later. A
 * descriptor is checked against the file it was opened on before each
 * block, so one the program closed and reused is never written to. A write
 * that makes no progress for DUMP_STALL_MS ends the dump, and a dump stops
 * writing DUMP_WAIT_MS after it started. SIGPIPE from a reader that went
 * away is blocked around the writes and taken back, so it never reaches the
 * program.
 *
 * The handler is async-signal-safe: atomics, futex, clock_gettime,
 * rt_sigaction, pthread_sigmask, raise, getpid, exit_group and errno only
 * (and _exit adds gettid). Everything else runs on the dumper thread or at
 * exit.
 */
#include <dlfcn.h>
#include <link.h>
#include <sys/auxv.h>
#include <ucontext.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/fork.h"
#include "profile/custom.h"
#include "sink/dump.h"
#include "sink/dumpspec.h"
#include "base/env.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/sig.h"
#include "base/sys.h"
#include "base/text.h"
#include "base/hmap.h"
#include "capture/stacktab.h"
#include "encode/symbolize.h"
#include "encode/writer.h"
#include "capture/stack.h"
#include "sink/profilez.h"
#include "profile/registry.h"
#include "sink/tree.h"
#include "source/signals.h"
#include "source/threads.h"

/* How long a terminating signal waits for its dump before the program
 * dies (or its own handler is called) anyway, and how long a dump may
 * spend writing. */
#define DUMP_WAIT_MS 5000
/* A write that makes no progress for this long is abandoned, and the rest
 * of that dump with it. */
#define DUMP_STALL_MS 2000
/* cprof's own descriptors are moved at or above this number, out of the
 * way of programs that expect low numbers to be free. */
#define PRIVATE_FD_MIN 100
/* After a fork, the parent's dumper resolves the addresses of the stacks
 * recorded so far, at most this many distinct ones (half the symbolizer's
 * cache, which starts over beyond it), and again after a later fork only
 * when new stacks were recorded and not within WARM_INTERVAL_MS of the
 * last time. */
#define WARM_MAX_PCS 16384
#define WARM_INTERVAL_MS 1000

/* The signals that dump (CPROF_DUMP_SIGNALS; SIGTERM, SIGINT and SIGUSR1
 * when unset), set once when dumps are configured, before any handler is
 * installed. SIGTERM, SIGINT and SIGHUP make the final dump; the others
 * dump and let the program carry on. */
#define MAX_DUMP_SIGNALS 8
static int dump_signals[MAX_DUMP_SIGNALS] = {SIGTERM, SIGINT, SIGUSR1};
static size_t ndump_signals = 3;
static char dump_signal_names[MAX_DUMP_SIGNALS][16] = {"SIGTERM", "SIGINT",
                                                       "SIGUSR1"};
/* Dump signals whose disposition the program set itself (a bit per index
 * of dump_signals): they are the program's now. The dumper says so once
 * for each (lost_said). */
static _Atomic unsigned lost_signals;
static unsigned lost_said;

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static cprof__dump_spec spec;
/* The windows of the windowed profiles the spec lists (cpu), by item;
 * under dump_lock. */
static void *windows[CPROF__DUMP_MAX_ITEMS];
/* In a fork child, the parent's handles: never used (their profiles
 * released them at the fork), but one the parent's dumper had in hand
 * (stopped, being written) is still allocated in the child's copy of the
 * memory, and stays referenced here rather than lost. */
static void *parent_windows[CPROF__DUMP_MAX_ITEMS];
static unsigned long long seq; /* dumps written, for the Seq header */
static atomic_bool configured;
static atomic_bool terminating; /* the final dump (signal or exit) began */
/* The process that configured dumps, and the one the dump state belongs
 * to now (a fork child's, once its atfork handler ran). */
static _Atomic pid_t origin_pid, self_pid;
static atomic_bool exec_tried; /* this fork child tried to exec */
static struct sigaction previous[MAX_DUMP_SIGNALS];
static bool installed[MAX_DUMP_SIGNALS];

/* What the handlers ask for. wake_word changes with every request and is
 * the futex the dumper sleeps on; final_done is set once the final dump is
 * over and is the futex terminating handlers wait on. */
static CPROF__FORK_DATA _Atomic int wake_word;
/* A dump signal that lets the program carry on asked for a dump; which
 * one, for the blocks' reason. */
static atomic_bool again_pending;
/* A dump asked for by cprof__dump_now: its reason, and a count of the
 * dumps it made, which cprof__dump_now waits on. */
static _Atomic(const char *) now_reason;
static _Atomic int now_done;
static _Atomic int again_sig;
static _Atomic int term_sig; /* the first terminating signal, or 0 */
static atomic_bool exit_pending; /* _exit asked for the final dump */
static _Atomic int final_done;
static _Atomic pid_t final_tid; /* the thread writing the final dump */
static CPROF__FORK_DATA atomic_bool warm_pending; /* this process forked: warm the symbolizer */

/* Where dumps go. */
typedef struct dump_out {
  int fd; /* -1: none */
  dev_t dev;
  ino_t ino;        /* the file fd was opened on */
  bool socket;      /* written with send(MSG_DONTWAIT | MSG_NOSIGNAL) */
  bool never_waits; /* a non-blocking description of cprof's own, or a file */
  bool fifo;
} dump_out;

static dump_out file_out = {.fd = -1}; /* CPROF_DUMP_OUT */
static dump_out err_out = {.fd = -1};  /* cprof's own stderr */
static char *out_path;                 /* CPROF_DUMP_OUT */
static bool fifo_pending;              /* out_path: a FIFO to open again */
/* In a fork child: fd 2, while it is the file err_out was opened on. */
static bool stderr_borrowed;
static dump_out borrowed_out = {.fd = -1};

CPROF__SIGNAL_SAFE static int signal_index(int sig) {
  for (size_t i = 0; i < ndump_signals; i++)
    if (dump_signals[i] == sig) return (int)i;
  return -1;
}

static const char *signal_name(int sig) {
  int idx = signal_index(sig);
  return idx >= 0 ? dump_signal_names[idx] : "exit";
}

/* True for the dump signals that end the process (the final dump). */
CPROF__SIGNAL_SAFE static bool ends_process(int sig) {
  return sig == SIGTERM || sig == SIGINT || sig == SIGHUP;
}

CPROF__SIGNAL_SAFE static void futex_wait(_Atomic int *word, int val, const struct timespec *rel) {
  syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, val, rel, NULL, 0);
}

CPROF__SIGNAL_SAFE static void futex_wake(_Atomic int *word) {
  syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Appends data as base64 in lines of 64 characters, as PEM has it. */
static int append_base64(cprof_buf *out, const unsigned char *data,
                         size_t len) {
  int err = 0;
  for (size_t i = 0; i < len && !err; i += CPROF__BASE64_LINE_BYTES) {
    size_t n = len - i < CPROF__BASE64_LINE_BYTES ? len - i
                                                  : CPROF__BASE64_LINE_BYTES;
    char line[4 * CPROF__BASE64_LINE_BYTES / 3 + 1];
    size_t col = cprof__base64(data + i, n, line);
    line[col++] = '\n';
    err = cprof__buf_append(out, line, col);
  }
  return err;
}

/* Moves fd to a number at or above PRIVATE_FD_MIN (keeping it where it is
 * when the limit on descriptors forbids). */
static int move_high(int fd) {
  int hi = fcntl(fd, F_DUPFD_CLOEXEC, PRIVATE_FD_MIN);
  if (hi < 0) return fd;
  close(fd);
  return hi;
}

static bool out_set(dump_out *o, int fd, bool nonblocking) {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  o->fd = fd;
  o->dev = st.st_dev;
  o->ino = st.st_ino;
  o->socket = S_ISSOCK(st.st_mode);
  o->fifo = S_ISFIFO(st.st_mode);
  o->never_waits = nonblocking || S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
  return true;
}

/* Takes cprof's own descriptor on the current stderr. For a pipe or a
 * terminal it is a description of its own, opened anew through /proc, that
 * can be non-blocking without making the program's stderr so; otherwise
 * (a file, a socket, or when that fails) a duplicate. */
static void keep_stderr(void) {
  struct stat st;
  if (err_out.fd >= 0 || fstat(STDERR_FILENO, &st) != 0) return;
  int fd = -1;
  bool own = false;
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat again;
    if (fd >= 0 && (fstat(fd, &again) != 0 || again.st_dev != st.st_dev ||
                    again.st_ino != st.st_ino)) {
      close(fd);
      fd = -1;
    }
    if (fd >= 0) {
      own = true;
      fd = move_high(fd);
    }
  }
  if (fd < 0) fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, PRIVATE_FD_MIN);
  if (fd < 0) fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return;
  if (!out_set(&err_out, fd, own)) {
    close(fd);
    return;
  }
  /* cprof's own lines follow the dumps there. */
  cprof__warn_redirect(fd);
}

static int open_out(const char *path, int flags) {
  return open(path,
              O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | flags,
              0600);
}

/* Opens CPROF_DUMP_OUT: created 0600, and never waiting for a FIFO's
 * reader (the program would not reach main). */
static void open_dump_out(const char *path) {
  char q[CPROF__QUOTED_SIZE];
  cprof__quoted(q, sizeof q, path);
  out_path = cprof__strdup(path);
  int fd = open_out(path, O_CREAT);
  if (fd >= 0) {
    fd = move_high(fd);
    if (out_set(&file_out, fd, true)) return;
    close(fd);
  }
  int e = errno;
  struct stat st;
  if (e == ENXIO && stat(path, &st) == 0 && S_ISFIFO(st.st_mode) &&
      out_path) {
    fifo_pending = true;
    cprof__warn("CPROF_DUMP_OUT=%s: a FIFO with no reader yet; dumping to "
                "stderr until one opens it",
                q);
    return;
  }
  cprof__warn("CPROF_DUMP_OUT=%s: %s; dumping to stderr", q, strerror(e));
}

/* The output for this dump; dump_lock held. A FIFO that had no reader is
 * tried again, without waiting. */
static dump_out *current_out(void) {
  if (file_out.fd < 0 && fifo_pending) {
    int fd = open_out(out_path, 0);
    if (fd >= 0) {
      fd = move_high(fd);
      if (out_set(&file_out, fd, true))
        fifo_pending = false;
      else
        close(fd);
    }
  }
  if (file_out.fd >= 0) return &file_out;
  if (!stderr_borrowed) return &err_out;
  /* A fork child's stderr: fd 2, shared with the program (so written in
   * pieces a pipe takes at once), only while it is the same file. */
  struct stat st;
  borrowed_out.fd = -1;
  if (fstat(STDERR_FILENO, &st) == 0 && st.st_dev == err_out.dev &&
      st.st_ino == err_out.ino)
    out_set(&borrowed_out, STDERR_FILENO, false);
  return &borrowed_out;
}

/* Waits until fd takes more bytes: 0, CPROF_ECANCELED when stall_end or
 * deadline (monotonic ns) comes first, CPROF_EIO when the reader is
 * gone. */
static int wait_writable(int fd, int64_t stall_end, int64_t deadline) {
  int64_t end = stall_end < deadline ? stall_end : deadline;
  for (;;) {
    int64_t now = cprof__mono_ns();
    if (now >= end) return CPROF_ECANCELED;
    struct pollfd pfd = {fd, POLLOUT, 0};
    int r = poll(&pfd, 1, (int)((end - now + 999999) / 1000000));
    if (r > 0)
      return (pfd.revents & POLLOUT) ? 0 : CPROF_EIO;
    if (r < 0 && errno != EINTR) return CPROF_EIO;
  }
}

/* Writes all of data to o: in one write(2) whenever the output takes it
 * whole (a file always does). Returns 0; CPROF_EIO when the output is gone
 * or broken; CPROF_ECANCELED when it stalled for DUMP_STALL_MS or the
 * dump's deadline passed. */
static int write_out(dump_out *o, const char *data, size_t len,
                     int64_t deadline) {
  struct stat st;
  if (o->fd < 0) return CPROF_EIO;
  if (fstat(o->fd, &st) != 0 || st.st_dev != o->dev || st.st_ino != o->ino) {
    /* The program closed it and may have reused its number: the number is
     * the program's now, never to be written to or closed by cprof. */
    o->fd = -1;
    return CPROF_EIO;
  }
  cprof__write_guard g;
  cprof__write_guard_begin(&g);
  int failed_errno = 0;
  int err = 0;
  int64_t stall_end = cprof__mono_ns() + DUMP_STALL_MS * 1000000LL;
  while (len > 0 && !err) {
    size_t chunk = len;
    if (!o->never_waits && !o->socket) {
      /* A blocking description shared with the program: wait until the
       * pipe has room, then write no more than it takes at once. */
      if (chunk > PIPE_BUF) chunk = PIPE_BUF;
      if ((err = wait_writable(o->fd, stall_end, deadline)) != 0) break;
    }
    ssize_t n = o->socket
                    ? send(o->fd, data, chunk, MSG_DONTWAIT | MSG_NOSIGNAL)
                    : write(o->fd, data, chunk);
    if (n > 0) {
      data += n;
      len -= (size_t)n;
      stall_end = cprof__mono_ns() + DUMP_STALL_MS * 1000000LL;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      err = wait_writable(o->fd, stall_end, deadline);
    } else {
      failed_errno = n < 0 ? errno : 0;
      err = CPROF_EIO;
    }
  }
  cprof__write_guard_end(&g, failed_errno);
  return err;
}

/* Writes one profile's bytes as a PEM block, in one write(2) when the
 * output takes it whole, so lines the program logs at the same time cannot
 * land inside it. */
static int write_block(dump_out *o, const char *name, int debug,
                       const char *reason, const cprof_buf *data,
                       int64_t deadline) {
  char upper[32];
  size_t i;
  for (i = 0; name[i] && i + 1 < sizeof upper; i++)
    upper[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
  upper[i] = '\0';
  char when[CPROF__UTC_TEXT];
  cprof__utc_text((int64_t)time(NULL), when);

  cprof_buf out = {0};
  int err = cprof__buf_printf(&out,
                              "-----BEGIN PPROF %s-----\n"
                              "Profile: %s\nPid: %d\nTime: %s\nReason: %s\n"
                              "Debug: %d\nSeq: %llu\n\n",
                              upper, name, (int)getpid(), when, reason, debug,
                              ++seq);
  if (!err) err = append_base64(&out, data->data, data->len);
  if (!err) err = cprof__buf_printf(&out, "-----END PPROF %s-----\n", upper);
  if (!err) err = write_out(o, (const char *)out.data, out.len, deadline);
  cprof_buf_free(&out);
  return err;
}

/* Starts item i's window for dumps; dump_lock held or not yet shared. A
 * window stays in the process that started it: a fork child starts its
 * own (child_after_fork), so that what the parent's dumper was doing with
 * its windows at the fork (one stopped, its successor not yet started)
 * never reaches the child. */
static void start_window(size_t i) {
  const cprof__profile_def *def = cprof__profile_find(spec.items[i].name);
  long long rate = spec.items[i].has_rate ? spec.items[i].rate : 0;
  int err = def->window->start(rate, &windows[i]);
  if (err) {
    windows[i] = NULL;
    cprof__warn("%s profile for dumps: %s", def->name, cprof_strerror(err));
  }
}

/* Writes every listed profile; dump_lock held. The CPU window ends here
 * and, when the program carries on, a new one starts. Once the output has
 * failed, the rest of the dump is not even collected. */
/* The dump item "custom": a block per custom profile (profile/custom.h). */
static void dump_custom(dump_out *o, int debug, const char *reason,
                        int64_t deadline, int *out_err) {
  for (size_t i = 0; !*out_err && i < cprof__custom_count(); i++) {
    const char *name = cprof__custom_name(i);
    cprof_buf data = {0};
    cprof_sink sink = cprof_sink_buf(&data);
    int err = cprof_profile_write(name, debug, &sink);
    if (!err)
      *out_err = write_block(o, name, debug, reason, &data, deadline);
    else
      cprof__warn("dump of %s failed: %s", name, cprof_strerror(err));
    cprof_buf_free(&data);
  }
}

static void dump_all(const char *reason, bool restart_cpu) {
  int64_t deadline = cprof__mono_ns() + DUMP_WAIT_MS * 1000000LL;
  dump_out *o = current_out();
  int out_err = o->fd < 0 ? CPROF_EIO : 0;
  cprof__sym_hold_saves();
  for (size_t i = 0; i < spec.n; i++) {
    const cprof__dump_item *it = &spec.items[i];
    cprof_buf data = {0};
    cprof_sink sink = cprof_sink_buf(&data);
    int err;
    const cprof__profile_def *def = cprof__profile_find(it->name);
    if (!def) { /* "custom": every custom profile, one block each */
      if (!out_err) dump_custom(o, it->debug, reason, deadline, &out_err);
      continue;
    }
    if (def->window) {
      if (!windows[i]) continue;
      err = def->window->stop(windows[i], out_err ? NULL : &sink);
      windows[i] = NULL;
      if (restart_cpu) start_window(i);
    } else if (out_err) {
      continue;
    } else {
      err = cprof_profile_write(it->name, it->debug, &sink);
    }
    if (!err && !out_err)
      out_err = write_block(o, it->name, it->debug, reason, &data, deadline);
    else if (err)
      cprof__warn("dump of %s failed: %s", it->name, cprof_strerror(err));
    cprof_buf_free(&data);
  }
  cprof__sym_release_saves();
  /* A broken stderr cannot be told about itself; a broken file can. */
  if (out_err && o == &file_out)
    cprof__warn("dump to CPROF_DUMP_OUT %s",
                out_err == CPROF_ECANCELED ? "abandoned: no progress for 2 s"
                                           : "failed: the output is gone");
}

/* The final dump, once, whichever of a terminating signal and exit comes
 * first; then every terminating handler waiting for it is released. */
static void final_dump(const char *reason) {
  atomic_store(&final_tid, (pid_t)syscall(SYS_gettid));
  cprof__lock(&dump_lock);
  if (!atomic_exchange(&terminating, true)) dump_all(reason, false);
  cprof__unlock(&dump_lock);
  atomic_store(&final_done, 1);
  futex_wake(&final_done);
}

/* Signal handler side: records the request and wakes the dumper. */
CPROF__SIGNAL_SAFE static void request_dump(int sig) {
  if (!ends_process(sig)) {
    atomic_store(&again_sig, sig);
    atomic_store(&again_pending, true);
  } else {
    int none = 0;
    atomic_compare_exchange_strong(&term_sig, &none, sig);
  }
  atomic_fetch_add(&wake_word, 1);
  futex_wake(&wake_word);
}

/* Waits, at most DUMP_WAIT_MS, until the final dump is over. Signal-safe. */
CPROF__SIGNAL_SAFE static void wait_final(void) {
  int64_t end = cprof__mono_ns() + DUMP_WAIT_MS * 1000000LL;
  while (!atomic_load(&final_done)) {
    int64_t left = end - cprof__mono_ns();
    if (left <= 0) return;
    struct timespec rel = {(time_t)(left / 1000000000),
                           (long)(left % 1000000000)};
    futex_wait(&final_done, 0, &rel);
  }
}

/* Puts the default disposition back and lets the signal end the process,
 * so the parent sees it die of it. Signal-safe. */
CPROF__SIGNAL_SAFE static _Noreturn void die_of(int sig) {
  cprof__sig_default(sig);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, NULL);
  raise(sig);
  /* A signal the kernel would not deliver (it cannot happen for these)
   * must still end the process as asked (not through cprof's _exit,
   * which would wait for the dump again). */
  for (;;) syscall(SYS_exit_group, 128 + sig);
}

/* True in the process the dump state belongs to (not in a vfork child,
 * nor a child that fork's handlers did not run in). Signal-safe. */
CPROF__SIGNAL_SAFE static bool own_process(void) {
  return atomic_load(&configured) && getpid() == atomic_load(&self_pid);
}

/*
 * The dynamic loader's code, [ldso_lo, ldso_hi), found at configuration.
 * A terminating signal can land on a thread inside it, holding its lock
 * (_dl_fini at exit, dlopen running a library's constructors, dlsym): the
 * thread then waits here for a final dump that must not call into the
 * loader, or both wait until the dump's time is up and the process dies
 * with nothing written (e2e/fork_dumps_signals, seen with gdb: a child's
 * dumper in dlsym, its main thread in _dl_fini).
 */
static _Atomic uintptr_t ldso_lo, ldso_hi;
static atomic_bool loader_busy;

static int ldso_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  unsigned long base = getauxval(AT_BASE);
  if (base == 0 || info->dlpi_addr != base) return 0;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (a < lo) lo = a;
    if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
  }
  if (lo < hi) {
    atomic_store(&ldso_lo, lo);
    atomic_store(&ldso_hi, hi);
  }
  return 1;
}

/* Whether the interrupted thread's stack has a frame in the loader's code:
 * its pc, and when the stack has room for the walk, its callers. */
CPROF__SIGNAL_SAFE static bool in_loader(const void *uc) {
  uintptr_t lo = atomic_load(&ldso_lo), hi = atomic_load(&ldso_hi);
  if (!uc || lo >= hi) return false;
  uintptr_t pcs[32];
  size_t n = 0;
  if (cprof__stack_room() >= CPROF__HANDLER_STACK) {
    n = cprof__stack_walk_ucontext(uc, pcs, CPROF__ARRAY_LEN(pcs));
  } else {
#if defined(__x86_64__)
    pcs[0] = (uintptr_t)((const ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
    n = 1;
#endif
  }
  for (size_t i = 0; i < n; i++)
    if (pcs[i] >= lo && pcs[i] < hi) return true;
  return false;
}

CPROF__SIGNAL_SAFE static void on_dump_signal(int sig, siginfo_t *si, void *uc) {
  int saved_errno = errno;
  int idx = signal_index(sig);
  bool live = own_process();
  bool terminal = ends_process(sig);
  if (live && terminal && in_loader(uc)) atomic_store(&loader_busy, true);
  if (live) request_dump(sig);
  if (idx >= 0 && cprof__sig_is_function(&previous[idx])) {
    /* The program's own handler runs after the dump, as it would have run
     * without cprof. */
    const struct sigaction *prev = &previous[idx];
    if (live && terminal) wait_final();
    errno = saved_errno;
    if (prev->sa_flags & SA_SIGINFO)
      prev->sa_sigaction(sig, si, uc);
    else
      prev->sa_handler(sig);
  } else if (terminal || !live) {
    /* The default: the program must not run another instruction of its
     * own, so this thread waits here for the dump and the process dies. */
    if (live) wait_final();
    die_of(sig);
  }
  errno = saved_errno;
}

/* True once a terminating signal is ending the process: no SIGUSR1 dump
 * starts then (it would be cut off). */
static bool dying(void) {
  if (atomic_load(&exit_pending)) return true;
  int sig = atomic_load(&term_sig);
  int idx = sig ? signal_index(sig) : -1;
  return idx >= 0 && !cprof__sig_is_function(&previous[idx]);
}

/* True when a dump was asked for, or the process is ending: the warm-up
 * gives way. */
static bool dump_wanted(void) {
  return atomic_load(&again_pending) || atomic_load(&term_sig) ||
         atomic_load(&exit_pending) || atomic_load(&terminating);
}

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
static void lsan_disable(void) { __lsan_disable(); }
static void lsan_enable(void) { __lsan_enable(); }
#else
static void lsan_disable(void) {}
static void lsan_enable(void) {}
#endif

/* After a fork: resolves the addresses of every stack recorded so far
 * (the symbolizer reads the objects' debug information on the way), so
 * that the children forked from now on inherit it in their copy of this
 * process's memory, and their dumps, like this process's own next one,
 * find their names already read. Dumper thread only; a dump asked for
 * meanwhile goes first. */
static void warm_symbols(void) {
  static int64_t last_ns;
  static size_t last_size;
  size_t size = cprof__stacktab_size();
  int64_t now = cprof__mono_ns();
  if (size == last_size ||
      (last_ns && now - last_ns < WARM_INTERVAL_MS * 1000000LL))
    return;
  last_ns = now;
  last_size = size;
  /* A fork can come while this runs (it runs because the program
   * forked): in the child, what it was building is pointed at from no
   * running thread. A leak checker is told to ignore what it allocates. */
  lsan_disable();
  cprof__hmap seen = {0};
  bool fresh = true;
  /* An id is a slot of the table; a stack once counted stays, so the walk
   * ends at the last of the first `size` it finds. */
  size_t found = 0;
  for (cprof__stack_id id = 2; found < size && !dump_wanted() &&
                               seen.len < WARM_MAX_PCS;
       id++) {
    const uintptr_t *pcs;
    size_t n = cprof__stacktab_get(id, &pcs);
    if (n == 0) continue;
    found++;
    cprof__sym_lock();
    if (fresh && cprof__sym_refresh() != 0) {
      cprof__sym_unlock();
      break;
    }
    if (fresh) {
      /* cprof's own object too: a dump runs long enough to be in the CPU
       * profile it writes (the exit dump, on the program's thread). */
      cprof__sym_lookup((uintptr_t)warm_symbols);
      fresh = false;
    }
    for (size_t j = 0; j < n && seen.len < WARM_MAX_PCS; j++) {
      uint64_t v;
      if (pcs[j] == 0 || cprof__hmap_get(&seen, pcs[j], &v)) continue;
      if (cprof__hmap_put(&seen, pcs[j], 1) != 0) break;
      cprof__sym_lookup(pcs[j]);
      /* What its call calls, as a dump asks: the code read goes into the
       * symbol cache with the names, which a result saved without it
       * never gets. The first frame may be a call too (a heap stack's). */
      (void)cprof__tail_callee(pcs, j, true);
    }
    cprof__sym_save();
    cprof__sym_unlock();
  }
  cprof__hmap_free(&seen);
  /* The libraries the symbolizer loaded (libdw and what it needs) get
   * their unwind tables here, once, rather than in every child, whose
   * CPU profile starts with a refresh of them (2.5 ms of each child's
   * exit, measured). */
  if (!fresh) cprof__stack_refresh_try();
  lsan_enable();
}

static void say_lost(void);

/* How long the root waits for its members' dumps. */
#define TREE_DUMP_WAIT_MS (DUMP_WAIT_MS + 1000)

/* In the root of a process tree: asks every member for a dump of its own
 * (each writes its blocks, under its pid, where its dumps go) and waits
 * for them, at most TREE_DUMP_WAIT_MS. Dumper thread. */
static size_t dump_members(void) {
  if (!cprof__tree_has_members()) return 0;
  cprof__tree_call *c = cprof__tree_send(CPROF__TREE_DUMP_URI, 0, 0);
  if (!c) return 0;
  cprof__tree_reply *reps;
  size_t n, dumped = 0;
  cprof__tree_collect(c, cprof__mono_ns() + TREE_DUMP_WAIT_MS * 1000000LL,
                      &reps, &n);
  for (size_t i = 0; i < n; i++) dumped += reps[i].status == 200;
  cprof__tree_free(c);
  return dumped;
}

int cprof__dump_now(const char *reason, size_t *members) {
  *members = 0;
  if (!own_process()) return CPROF_EINVAL;
  int before = atomic_load(&now_done);
  atomic_store(&now_reason, reason);
  atomic_fetch_add(&wake_word, 1);
  futex_wake(&wake_word);
  int64_t end = cprof__mono_ns() + DUMP_WAIT_MS * 1000000LL;
  for (;;) {
    int done = atomic_load(&now_done);
    if (done != before) break;
    int64_t left = end - cprof__mono_ns();
    if (left <= 0) break;
    struct timespec rel = {(time_t)(left / 1000000000),
                           (long)(left % 1000000000)};
    futex_wait(&now_done, done, &rel);
  }
  *members = dump_members();
  return 0;
}

/* A walk met code outside the loader's objects (a JIT's): the dump thread
 * (woken by the walk, cprof__stack_foreign_wake) notes where it is mapped,
 * at most every NOTE_EVERY_NS, so that the exit dump can name it after
 * the runtime unmapped it. Within that time the walks' bit is left set, so
 * they wake nobody; the thread looks again when the time is up. */
#define NOTE_EVERY_NS 250000000LL
static int64_t noted_ns;

static void note_code(void) {
  int64_t now = cprof__mono_ns();
  if (noted_ns && now - noted_ns < NOTE_EVERY_NS) return;
  if (!cprof__stack_foreign_take(CPROF__FOREIGN_NAMES) || dying()) return;
  noted_ns = now;
  cprof__sym_note_code();
}

/* How long the dump thread may sleep: until a note is allowed again, or
 * for ever (NULL) when none was made lately. */
static const struct timespec *note_wait(struct timespec *ts) {
  int64_t left = noted_ns ? NOTE_EVERY_NS - (cprof__mono_ns() - noted_ns) : 0;
  if (left <= 0) {
    noted_ns = 0;
    return NULL;
  }
  *ts = (struct timespec){0, (long)left};
  return ts;
}

static void *dumper_main(void *arg) {
  (void)arg;
  /* From 0, where wake_word starts: a signal that came before this thread
   * first ran has changed it already and is served at once. */
  int seen = 0;
  for (;;) {
    int now = atomic_load(&wake_word);
    if (now == seen) {
      /* Before each sleep, so that a bit a walk set while notes had to
       * wait is taken when the wait is over. */
      note_code();
      struct timespec ts;
      futex_wait(&wake_word, seen, note_wait(&ts));
      continue;
    }
    /* Every request made until now is served below; one made while the
     * dump runs changes wake_word again and makes one more dump. */
    seen = now;
    int sig = atomic_load(&term_sig);
    if ((sig || atomic_load(&exit_pending)) && !atomic_load(&final_done)) {
      if (atomic_load(&loader_busy)) cprof__sym_avoid_loader();
      final_dump(sig ? signal_name(sig) : "_exit");
    }
    say_lost();
    if (atomic_exchange(&again_pending, false) && !dying()) {
      cprof__lock(&dump_lock);
      dump_all(signal_name(atomic_load(&again_sig)), true);
      cprof__unlock(&dump_lock);
      /* A dump signal to the root of a process tree dumps the tree. */
      dump_members();
    }
    const char *why = atomic_exchange(&now_reason, NULL);
    if (why && !dying()) {
      cprof__lock(&dump_lock);
      dump_all(why, true);
      cprof__unlock(&dump_lock);
      atomic_fetch_add(&now_done, 1);
      futex_wake(&now_done);
    }
    if (atomic_exchange(&warm_pending, false)) warm_symbols();
  }
  return NULL;
}

static void dump_at_exit(void) {
  if (!own_process() || atomic_load(&terminating) ||
      atomic_load(&exec_tried))
    return;
  /* A dump signal arriving now waits for this dump rather than interrupt
   * it on this thread (its handler would wait for a dump that cannot
   * finish until it returns). */
  sigset_t sigs, old;
  sigemptyset(&sigs);
  for (size_t i = 0; i < ndump_signals; i++)
    sigaddset(&sigs, dump_signals[i]);
  pthread_sigmask(SIG_BLOCK, &sigs, &old);
  final_dump("exit");
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The program set the disposition of dump signal sig (cprof__sig_watch):
 * unless cprof's handler is back there (a program that saved and restored
 * it), the signal is the program's from now on, and the dumper says so.
 * Async-signal-safe: the disposition is read by system call. */
CPROF__SIGNAL_SAFE static void program_took(int sig) {
  int idx = signal_index(sig);
  /* A terminating signal's handler puts the default back itself. */
  if (idx < 0 || atomic_load(&term_sig) || atomic_load(&terminating)) return;
  struct cprof__ksigaction cur;
  if (cprof__sys4(SYS_rt_sigaction, sig, 0L, (long)&cur, 8L) != 0) return;
  if (cur.handler == (void *)on_dump_signal) {
    atomic_fetch_and(&lost_signals, ~(1u << idx));
    return;
  }
  atomic_fetch_or(&lost_signals, 1u << idx);
  atomic_fetch_add(&wake_word, 1);
  futex_wake(&wake_word);
}

/* Says once, for each dump signal the program took, that it no longer
 * dumps. Dumper thread. */
static void say_lost(void) {
  unsigned lost = atomic_load(&lost_signals) & ~lost_said;
  for (size_t i = 0; i < ndump_signals; i++)
    if (lost & (1u << i)) {
      lost_said |= 1u << i;
      cprof__warn("dump: the program set %s's disposition itself; %s no "
                  "longer dumps (CPROF_DUMP_SIGNALS chooses the dump "
                  "signals)",
                  dump_signal_names[i], dump_signal_names[i]);
    }
}

/* Reads CPROF_DUMP_SIGNALS: "none", or a comma-separated list of TERM,
 * INT, HUP, USR1, USR2, RTMIN+N and RTMAX-N (each with or without SIG).
 * A value that is not one gives one line on stderr and no dump signals
 * (the exit dump stays). */
static void read_dump_signals(void) {
  const char *v = cprof__env_str("CPROF_DUMP_SIGNALS");
  if (!v) return;
  static const struct {
    const char *name;
    int sig;
  } named[] = {{"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},
               {"USR1", SIGUSR1}, {"USR2", SIGUSR2}};
  int sigs[MAX_DUMP_SIGNALS];
  size_t n = 0;
  const char *bad = NULL;
  char tok[32];
  if (strcmp(v, "none") != 0) {
    for (const char *p = v;;) {
      size_t len = strcspn(p, ",");
      if (len == 0 || len >= sizeof tok) {
        bad = "an empty or overlong name";
        break;
      }
      memcpy(tok, p, len);
      tok[len] = '\0';
      const char *t = strncmp(tok, "SIG", 3) == 0 ? tok + 3 : tok;
      int sig = 0;
      for (size_t i = 0; i < CPROF__ARRAY_LEN(named); i++)
        if (strcmp(t, named[i].name) == 0) sig = named[i].sig;
      char *end = NULL;
      if (!sig && strncmp(t, "RTMIN+", 6) == 0 && t[6] >= '0' && t[6] <= '9') {
        long off = strtol(t + 6, &end, 10);
        if (!*end && off <= SIGRTMAX - SIGRTMIN) sig = SIGRTMIN + (int)off;
      } else if (!sig && strncmp(t, "RTMAX-", 6) == 0 && t[6] >= '0' &&
                 t[6] <= '9') {
        long off = strtol(t + 6, &end, 10);
        if (!*end && off <= SIGRTMAX - SIGRTMIN) sig = SIGRTMAX - (int)off;
      }
      if (!sig) {
        bad = "a name that is not TERM, INT, HUP, USR1, USR2, RTMIN+N or "
              "RTMAX-N";
        break;
      }
      bool dup = false;
      for (size_t i = 0; i < n; i++) dup |= sigs[i] == sig;
      if (!dup) {
        if (n == MAX_DUMP_SIGNALS) {
          bad = "more than 8 signals";
          break;
        }
        sigs[n++] = sig;
      }
      if (!p[len]) break;
      p += len + 1;
    }
  }
  if (bad) {
    char q[CPROF__QUOTED_SIZE];
    cprof__warn("CPROF_DUMP_SIGNALS=%s: %s (or none); no signal dumps, the "
                "exit dump stays",
                cprof__quoted(q, sizeof q, v), bad);
    n = 0;
  }
  ndump_signals = n;
  for (size_t i = 0; i < n; i++) {
    dump_signals[i] = sigs[i];
    const char *name = NULL;
    for (size_t j = 0; j < CPROF__ARRAY_LEN(named); j++)
      if (named[j].sig == sigs[i]) name = named[j].name;
    if (name)
      snprintf(dump_signal_names[i], sizeof dump_signal_names[i], "SIG%s",
               name);
    else
      snprintf(dump_signal_names[i], sizeof dump_signal_names[i],
               "SIGRTMIN+%d", sigs[i] - SIGRTMIN);
  }
}

static int install_signals(void) {
  for (size_t i = 0; i < ndump_signals; i++) {
    struct sigaction cur;
    if (cprof__sig_set_own(dump_signals[i], NULL, &cur) != 0) return CPROF_ESYS;
    /* An ignored signal stays ignored: installing a handler would change
     * what the program (and any child it execs) does with it. */
    if (cur.sa_handler == SIG_IGN) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_dump_signal;
    sa.sa_flags = SA_SIGINFO;
    if (cprof__sig_is_function(&cur)) {
      /* The program chose whether its handler interrupts system calls,
       * and its mask and stack: both stay its own. */
      sa.sa_flags |= cur.sa_flags & (SA_RESTART | SA_ONSTACK);
      sa.sa_mask = cur.sa_mask;
    } else {
      /* SIGUSR1 returns to the program: its system calls restart (those
       * signal(7) says never do still fail with EINTR). SIGTERM and SIGINT
       * never return, so restarting means nothing to them, except under a
       * runtime that defers handlers to the end of a system call
       * (ThreadSanitizer's), where it would keep them from ever running. */
      if (!ends_process(dump_signals[i])) sa.sa_flags |= SA_RESTART;
      sigemptyset(&sa.sa_mask);
    }
    if (cprof__sig_set_own(dump_signals[i], &sa, &previous[i]) != 0) return CPROF_ESYS;
    installed[i] = true;
    cprof__sig_watch(dump_signals[i], program_took);
  }
  return 0;
}

/* Restores the signals cprof took over (dumps end in this process). */
static void uninstall_signals(void) {
  for (size_t i = 0; i < ndump_signals; i++) {
    cprof__sig_watch(dump_signals[i], NULL);
    bool lost = atomic_load(&lost_signals) & (1u << i);
    if (installed[i] && !lost) cprof__sig_set_own(dump_signals[i], &previous[i], NULL);
  }
}

/* Ends the dump windows without writing them. */
static void stop_windows(void) {
  for (size_t i = 0; i < spec.n; i++) {
    const cprof__profile_def *d = cprof__profile_find(spec.items[i].name);
    if (d && d->window && windows[i]) d->window->stop(windows[i], NULL);
    windows[i] = NULL;
  }
}

static void child_after_fork(void) {
  /* The child dumps as its parent does, from a fresh state: its own
   * dumper (the parent's does not exist here), its own Seq count, no
   * request pending. */
  if (!atomic_load(&configured)) return;
  pthread_mutex_init(&dump_lock, NULL);
  atomic_store(&self_pid, getpid());
  atomic_store(&exec_tried, false);
  atomic_store(&terminating, false);
  atomic_store(&term_sig, 0);
  atomic_store(&exit_pending, false);
  atomic_store(&again_pending, false);
  atomic_store(&final_done, 0);
  atomic_store(&final_tid, 0);
  atomic_store(&wake_word, 0);
  seq = 0;
  /* No descriptor of cprof's may keep the parent's stderr or FIFO open
   * (a daemon's starter waits for the end of that pipe): stderr is fd 2
   * while it is the same file, a FIFO is opened again at each dump. */
  cprof__warn_redirect(-1);
  atomic_store(&warm_pending, false);
  /* The parent's windows are not the child's (their profiles released
   * them here): the child's own start at the fork, as its profiles do. */
  for (size_t i = 0; i < spec.n; i++) {
    const cprof__profile_def *d = cprof__profile_find(spec.items[i].name);
    parent_windows[i] = windows[i];
    windows[i] = NULL;
    if (d && d->window) start_window(i);
  }
  if (err_out.fd >= 0) {
    close(err_out.fd);
    err_out.fd = -1;
    stderr_borrowed = true;
  }
  if (file_out.fd >= 0 && file_out.fifo && out_path) {
    close(file_out.fd);
    file_out.fd = -1;
    fifo_pending = true;
  }
  pthread_t t;
  if (cprof__thread_spawn(&t, dumper_main, NULL, "cprof-dump") != 0) {
    /* Without a dumper the handlers would wait for nobody. */
    uninstall_signals();
    atomic_store(&configured, false);
    stop_windows();
    return;
  }
  pthread_detach(t);
}

/* In the parent after a fork: the dumper warms the symbolizer for the
 * next children (warm_symbols). Only atomics and a futex: fork may be
 * called from a signal handler. */
static void parent_after_fork(void) {
  if (!own_process() || atomic_load(&terminating)) return;
  atomic_store(&warm_pending, true);
  atomic_fetch_add(&wake_word, 1);
  futex_wake(&wake_word);
}

CPROF__SIGNAL_SAFE void cprof__dump_exec_attempt(pid_t pid) {
  if (pid == atomic_load(&self_pid) && pid != atomic_load(&origin_pid))
    atomic_store(&exec_tried, true);
}

/* The final dump before _exit (src/exit.c): in the process that
 * configured dumps only, once, and never by the thread writing it.
 * Async-signal-safe. */
CPROF__SIGNAL_SAFE void cprof__dump_before_exit(void) {
  if (!own_process() || getpid() != atomic_load(&origin_pid) ||
      atomic_load(&final_done))
    return;
  if (atomic_load(&final_tid) == (pid_t)syscall(SYS_gettid)) return;
  if (!atomic_load(&terminating)) {
    atomic_store(&exit_pending, true);
    atomic_fetch_add(&wake_word, 1);
    futex_wake(&wake_word);
  }
  wait_final();
}

/* Sets the rates the spec gives, process-wide (the heap sampling rate,
 * the mutex fraction, the block rate); a windowed profile's rate is its
 * window's. */
static void apply_rates(void) {
  for (size_t i = 0; i < spec.n; i++) {
    const cprof__dump_item *it = &spec.items[i];
    const cprof__profile_def *def = cprof__profile_find(it->name);
    if (it->has_rate && def && def->set_rate) def->set_rate(it->rate);
  }
}

/* The spec's names: every profile's name and alias, from the registry. */
#define DUMP_NAMES 32
static cprof__dump_profile dump_names[DUMP_NAMES];
static size_t ndump_names;
static pthread_mutex_t dump_names_lock = PTHREAD_MUTEX_INITIALIZER;

static void add_dump_name(const char *name, const cprof__profile_def *d) {
  if (!name || ndump_names == DUMP_NAMES) return;
  dump_names[ndump_names++] = (cprof__dump_profile){
      .name = name,
      .canonical = d->name,
      .max_debug = d->max_debug,
      .rate_key = d->rate_key,
      .rate_min = d->rate_min,
      .rate_max = d->rate_max,
      .rate_shared = (void (*)(void))d->set_rate,
  };
}

/* Made at each parse, so profiles registered since (heap_peak) are
 * known. "custom" stands for every custom profile there is at the dump. */
static void make_dump_names(void) {
  ndump_names = 0;
  for (size_t i = 0; i < cprof__profiles_count(); i++) {
    const cprof__profile_def *d = cprof__profile_at(i);
    add_dump_name(d->name, d);
    add_dump_name(d->alias, d);
  }
  if (ndump_names < DUMP_NAMES)
    dump_names[ndump_names++] =
        (cprof__dump_profile){.name = "custom", .canonical = "custom",
                              .max_debug = 2};
}

int cprof__dump_parse(const char *spec_text, cprof__dump_spec *out,
                      char *err, size_t errlen) {
  cprof__lock(&dump_names_lock);
  make_dump_names();
  int rc = cprof__dump_parse_with(dump_names, ndump_names, spec_text, out,
                                  err, errlen);
  cprof__unlock(&dump_names_lock);
  return rc;
}

static int configure(const char *text, char *errbuf, size_t errlen) {
  cprof__dump_spec parsed;
  char why[320];
  if (cprof__dump_parse(text, &parsed, why, sizeof why) != 0) {
    if (errbuf && errlen) snprintf(errbuf, errlen, "%s", why);
    return CPROF_EINVAL;
  }
  if (atomic_exchange(&configured, true)) {
    if (errbuf && errlen) snprintf(errbuf, errlen, "dumps are already configured");
    return CPROF_EBUSY;
  }
  spec = parsed;
  atomic_store(&origin_pid, getpid());
  atomic_store(&self_pid, getpid());
  const char *path = cprof__env_str("CPROF_DUMP_OUT");
  if (path) open_dump_out(path);
  if (file_out.fd < 0) keep_stderr();
  apply_rates();
  for (size_t i = 0; i < spec.n; i++) {
    const cprof__profile_def *d = cprof__profile_find(spec.items[i].name);
    if (d && d->window) start_window(i);
  }
  pthread_t t;
  if (cprof__thread_spawn(&t, dumper_main, NULL, "cprof-dump") != 0) {
    atomic_store(&configured, false);
    return CPROF_ESYS;
  }
  pthread_detach(t);
  cprof__atfork(CPROF__FORK_DUMP, NULL, parent_after_fork, child_after_fork);
  dl_iterate_phdr(ldso_cb, NULL);
  cprof__stack_foreign_wake(&wake_word);
  /* The symbolizer's lock sets itself up (a pthread_once) on first use:
   * here, before the program forks, and not in the dump thread, where a
   * fork could leave it half done in the child. */
  cprof__sym_lock();
  cprof__sym_unlock();
  atexit(dump_at_exit);
  /* Only the named profiles can be dumped: a hook that keeps something
   * for a profile (heap_peak's tracker) runs only for those. */
  cprof__mark_enabled(false);
  for (size_t i = 0; i < spec.n; i++)
    cprof__profile_serving(cprof__profile_find(spec.items[i].name));
  read_dump_signals();
  return install_signals();
}

int cprof_dump_configure(const char *text, char *errbuf, size_t errlen) {
  if (!text) return CPROF_EINVAL;
  return configure(text, errbuf, errlen);
}

bool cprof__dump_env_init(void) {
  const char *text = cprof__env_str("CPROF_DUMP");
  if (!text) return false;
  char why[320];
  int err = configure(text, why, sizeof why);
  char q[CPROF__QUOTED_SIZE];
  if (err == CPROF_EINVAL || err == CPROF_EUNSUPPORTED)
    cprof__warn("CPROF_DUMP=%s: %s; dumps disabled",
                cprof__quoted(q, sizeof q, text), why);
  else if (err)
    cprof__warn("CPROF_DUMP: %s; dumps disabled", cprof_strerror(err));
  return err == 0;
}
