/*
 * Dumps on termination and signals (dump.h). The configuration comes from
 * the grammar in dumpspec.c. Listed profiles are collected from the start
 * (cpu runs as its own session until the dump). On SIGTERM, SIGINT and
 * SIGUSR1 the handler writes the signal number into a pipe and returns;
 * the dumper thread, which blocks every signal, wakes, writes each profile
 * as a PEM block in one write(2), and then lets the previous disposition
 * happen: a terminating signal whose disposition was the default is
 * re-raised with the default restored, so the parent sees the process die
 * of it; a handler the program had installed is called, from the original
 * handler, once the dump is done (waiting at most DUMP_WAIT_MS); SIGUSR1
 * dumps and the program carries on, the CPU window restarting. At normal
 * exit an atexit handler dumps directly.
 *
 * The handler is async-signal-safe: write, poll, read, sigaction and
 * errno only. Everything else runs on the dumper thread or at exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "dump.h"
#include "dumpspec.h"
#include "env.h"
#include "mem.h"
#include "profilez.h"
#include "registry.h"
#include "threads.h"

/* How long a handler the program installed waits for the dump before it is
 * called anyway. */
#define DUMP_WAIT_MS 10000

static const int dump_signals[] = {SIGTERM, SIGINT, SIGUSR1};

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static cprof__dump_spec spec;
static cprof__cpu_session *cpu_session; /* under dump_lock */
static int cpu_hz;
static int out_fd = STDERR_FILENO;
static unsigned long long seq; /* dumps written, for the Seq header */
static atomic_bool configured;
static atomic_bool terminating; /* a terminating dump was written */
static int wake_pipe[2] = {-1, -1};
static int done_pipe[2] = {-1, -1};
static struct sigaction previous[CPROF__ARRAY_LEN(dump_signals)];
static bool installed[CPROF__ARRAY_LEN(dump_signals)];

int cprof__cpu_default_hz(void) {
  long long hz;
  if (cprof__env_int("CPROF_CPU_HZ", 1, CPROF__CPU_MAX_HZ,
                     "using 100 Hz", &hz))
    return (int)hz;
  return CPROF__CPU_DEFAULT_HZ;
}

static int signal_index(int sig) {
  for (size_t i = 0; i < CPROF__ARRAY_LEN(dump_signals); i++)
    if (dump_signals[i] == sig) return (int)i;
  return -1;
}

static const char *signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "exit";
  }
}

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Appends data as base64 in lines of 64 characters, as PEM has it. */
static int append_base64(cprof_buf *out, const unsigned char *data,
                         size_t len) {
  char line[66];
  size_t col = 0;
  int err = 0;
  for (size_t i = 0; i < len && !err; i += 3) {
    unsigned v = (unsigned)data[i] << 16;
    if (i + 1 < len) v |= (unsigned)data[i + 1] << 8;
    if (i + 2 < len) v |= data[i + 2];
    line[col++] = b64[(v >> 18) & 63];
    line[col++] = b64[(v >> 12) & 63];
    line[col++] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
    line[col++] = i + 2 < len ? b64[v & 63] : '=';
    if (col == 64 || i + 3 >= len) {
      line[col++] = '\n';
      err = cprof__buf_append(out, line, col);
      col = 0;
    }
  }
  return err;
}

/* Writes one profile's bytes as a PEM block with one write(2), so lines
 * the program logs at the same time cannot land inside it. */
static int write_block(const char *name, int debug, const char *reason,
                       const cprof_buf *data) {
  char upper[32];
  size_t i;
  for (i = 0; name[i] && i + 1 < sizeof upper; i++)
    upper[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
  upper[i] = '\0';
  char when[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);

  cprof_buf out = {0};
  int err = cprof__buf_printf(&out,
                              "-----BEGIN PPROF %s-----\n"
                              "Profile: %s\nPid: %d\nTime: %s\nReason: %s\n"
                              "Debug: %d\nSeq: %llu\n\n",
                              upper, name, (int)getpid(), when, reason, debug,
                              ++seq);
  if (!err) err = append_base64(&out, data->data, data->len);
  if (!err) err = cprof__buf_printf(&out, "-----END PPROF %s-----\n", upper);
  if (!err) {
    cprof_sink sink = cprof_sink_fd(out_fd);
    err = sink.write(sink.ctx, out.data, out.len);
  }
  cprof_buf_free(&out);
  return err;
}

/* Writes every listed profile; dump_lock held. The CPU window ends here
 * and, when the program carries on, a new one starts. */
static void dump_all(const char *reason, bool restart_cpu) {
  for (size_t i = 0; i < spec.n; i++) {
    const cprof__dump_item *it = &spec.items[i];
    cprof_buf data = {0};
    cprof_sink sink = cprof_sink_buf(&data);
    int err;
    if (strcmp(it->name, "cpu") == 0) {
      if (!cpu_session) continue;
      err = cprof__cpu_session_stop(cpu_session, &sink);
      cpu_session = NULL;
      if (restart_cpu) cprof__cpu_session_start(cpu_hz, &cpu_session);
    } else {
      err = cprof_profile_write(it->name, it->debug, &sink);
    }
    if (!err) err = write_block(it->name, it->debug, reason, &data);
    if (err)
      cprof__warn("dump of %s failed: %s", it->name, cprof_strerror(err));
    cprof_buf_free(&data);
  }
}

static void on_dump_signal(int sig, siginfo_t *si, void *uc) {
  int saved_errno = errno;
  int idx = signal_index(sig);
  unsigned char b = (unsigned char)sig;
  bool woke = write(wake_pipe[1], &b, 1) == 1;
  const struct sigaction *prev = idx >= 0 ? &previous[idx] : NULL;
  bool prev_handler =
      prev && ((prev->sa_flags & SA_SIGINFO) ? prev->sa_sigaction != NULL
                                             : prev->sa_handler != SIG_DFL &&
                                                   prev->sa_handler != SIG_IGN);
  if (prev_handler) {
    /* The program's own handler runs after the dump, as it would have run
     * without cprof. */
    if (woke && sig != SIGUSR1) {
      struct pollfd pfd = {done_pipe[0], POLLIN, 0};
      if (poll(&pfd, 1, DUMP_WAIT_MS) == 1) {
        unsigned char done;
        ssize_t r = read(done_pipe[0], &done, 1);
        (void)r;
      }
    }
    if (prev->sa_flags & SA_SIGINFO)
      prev->sa_sigaction(sig, si, uc);
    else
      prev->sa_handler(sig);
  } else if (!woke && sig != SIGUSR1) {
    /* No dumper to hand over to: terminate as the default would. */
    signal(sig, SIG_DFL);
    raise(sig);
  }
  errno = saved_errno;
}

/* After a terminating signal whose default action was to terminate: put
 * the default back and let the signal kill the process, so the parent
 * sees it. */
static void die_of(int sig) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, NULL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, NULL);
  raise(sig);
  /* A signal the kernel would not deliver (it cannot happen for these)
   * must still end the process as asked. */
  _exit(128 + sig);
}

static void *dumper_main(void *arg) {
  (void)arg;
  for (;;) {
    unsigned char b;
    ssize_t r = read(wake_pipe[0], &b, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r != 1) return NULL;
    int sig = b;
    bool terminal = sig != SIGUSR1;
    pthread_mutex_lock(&dump_lock);
    bool first = !terminal || !atomic_exchange(&terminating, true);
    if (first) dump_all(signal_name(sig), !terminal);
    pthread_mutex_unlock(&dump_lock);
    if (!terminal) continue;
    int idx = signal_index(sig);
    const struct sigaction *prev = &previous[idx];
    bool prev_default = !(prev->sa_flags & SA_SIGINFO) &&
                        prev->sa_handler == SIG_DFL;
    if (prev_default) die_of(sig);
    unsigned char done = 1;
    ssize_t w = write(done_pipe[1], &done, 1);
    (void)w;
  }
}

static void dump_at_exit(void) {
  if (!atomic_load(&configured) || atomic_load(&terminating)) return;
  pthread_mutex_lock(&dump_lock);
  if (!atomic_exchange(&terminating, true)) dump_all("exit", false);
  pthread_mutex_unlock(&dump_lock);
}

static int install_signals(void) {
  for (size_t i = 0; i < CPROF__ARRAY_LEN(dump_signals); i++) {
    struct sigaction cur;
    if (sigaction(dump_signals[i], NULL, &cur) != 0) return CPROF_ESYS;
    /* An ignored signal stays ignored: installing a handler would change
     * what the program (and any child it execs) does with it. */
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_dump_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(dump_signals[i], &sa, &previous[i]) != 0) return CPROF_ESYS;
    installed[i] = true;
  }
  return 0;
}

static void child_after_fork(void) {
  /* The dumper thread does not exist in a child: dumps there would wait on
   * nobody, so the child's handlers fall back to the previous behaviour. */
  if (!atomic_load(&configured)) return;
  for (size_t i = 0; i < CPROF__ARRAY_LEN(dump_signals); i++)
    if (installed[i]) sigaction(dump_signals[i], &previous[i], NULL);
  atomic_store(&configured, false);
  close(wake_pipe[1]);
  wake_pipe[1] = -1;
  pthread_mutex_init(&dump_lock, NULL);
}

static int configure(const char *text, char *errbuf, size_t errlen) {
  cprof__dump_spec parsed;
  char why[160];
  if (cprof__dump_parse(text, &parsed, why, sizeof why) != 0) {
    if (errbuf && errlen) snprintf(errbuf, errlen, "%s", why);
    return CPROF_EINVAL;
  }
  for (size_t i = 0; i < parsed.n; i++) {
    const char *name = parsed.items[i].name;
    if (strcmp(name, "cpu") != 0 && !cprof__profile_find(name)) {
      if (errbuf && errlen)
        snprintf(errbuf, errlen, "profile %s is not available in this build",
                 name);
      return CPROF_EUNSUPPORTED;
    }
  }
  if (atomic_exchange(&configured, true)) {
    if (errbuf && errlen) snprintf(errbuf, errlen, "dumps are already configured");
    return CPROF_EBUSY;
  }
  spec = parsed;
  const char *path = cprof__env_str("CPROF_DUMP_OUT");
  if (path) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
      out_fd = fd;
    else
      cprof__warn("CPROF_DUMP_OUT=%s: %s; dumping to stderr", path,
                  strerror(errno));
  }
  if (pipe2(wake_pipe, O_CLOEXEC) != 0 || pipe2(done_pipe, O_CLOEXEC) != 0) {
    atomic_store(&configured, false);
    return CPROF_ESYS;
  }
  for (size_t i = 0; i < spec.n; i++) {
    if (strcmp(spec.items[i].name, "cpu") != 0) continue;
    cpu_hz = spec.items[i].hz ? spec.items[i].hz : cprof__cpu_default_hz();
    int err = cprof__cpu_session_start(cpu_hz, &cpu_session);
    if (err) cprof__warn("CPU profile for dumps: %s", cprof_strerror(err));
  }
  pthread_t t;
  if (cprof__thread_spawn(&t, dumper_main, NULL, "cprof-dump") != 0) {
    atomic_store(&configured, false);
    return CPROF_ESYS;
  }
  pthread_detach(t);
  pthread_atfork(NULL, NULL, child_after_fork);
  atexit(dump_at_exit);
  cprof__mark_enabled();
  return install_signals();
}

int cprof_dump_configure(const char *text, char *errbuf, size_t errlen) {
  if (!text) return CPROF_EINVAL;
  return configure(text, errbuf, errlen);
}

void cprof__dump_env_init(void) {
  const char *text = cprof__env_str("CPROF_DUMP");
  if (!text) return;
  char why[200];
  int err = configure(text, why, sizeof why);
  if (err == CPROF_EINVAL || err == CPROF_EUNSUPPORTED)
    cprof__warn("CPROF_DUMP=%.100s: %s; dumps disabled", text, why);
  else if (err)
    cprof__warn("CPROF_DUMP: %s; dumps disabled", cprof_strerror(err));
}
