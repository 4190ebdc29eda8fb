/*
 * The library constructor: everything cprof must have in place before the
 * application's main runs (the stack table, the main thread's stack bounds,
 * the pthread_create interposer). It runs in both the linked and the
 * preloaded library and never fails the host: whatever cannot be set up is
 * left disabled.
 *
 * Last, it decides what programs the host execs inherit: once every module
 * has read its settings, the CPROF_* variables and cprof's LD_PRELOAD entry
 * leave the environment (env.h), so exec'd children run unprofiled unless
 * CPROF_FOLLOW_EXEC=1 asks to keep them. An exec that keeps the pid (a
 * wrapper script's `exec prog`) is the same process going on: the exec
 * interposers here give it its settings back. They change nothing for an
 * exec from any other process (a fork or vfork child), where only getpid
 * runs before the real exec, so they are as async-signal-safe as exec is.
 *
 * A program that reads CPROF_* variables of its own and passes them on
 * (the cprof tool, linked with the library, for `cprof run`'s program)
 * defines cprof_keep_environment (cprof.h) and keeps its environment as
 * it is.
 *
 * A static link only pulls in archive members that resolve a symbol, and
 * nothing calls a constructor; mem.c, which every module uses, refers to
 * cprof__init_anchor so this file always comes along.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "source/lock_interpose.h"
#include "sink/dump.h"
#include "base/env.h"
#include "base/cachedir.h"
#include "exit.h"
#include "source/heap_sampler.h"
#include "sink/http.h"
#include "base/mem.h"
#include "base/sys.h"
#include "profile/heap_peak.h"
#include "sink/push.h"
#include "capture/stack.h"
#include "capture/stacktab.h"
#include "capture/tasksample.h"
#include "profile/cpu.h"
#include "source/thread_sample.h"
#include "profile/wall.h"
#include "source/cpu_timer.h"
#include "source/signals.h"
#include "source/thread_scan.h"
#include "source/threads.h"

const int cprof__init_anchor = 1;

/* Defined by a program that keeps its environment (cprof.h): the cprof
 * command, for one. */
extern const int cprof_keep_environment __attribute__((weak));

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

static _Atomic(execve_fn) real_execve, real_execvpe;
static _Atomic(fexecve_fn) real_fexecve;

static void resolve_exec(void) {
  atomic_store(&real_execve, (execve_fn)dlsym(RTLD_NEXT, "execve"));
  atomic_store(&real_execvpe, (execve_fn)dlsym(RTLD_NEXT, "execvpe"));
  atomic_store(&real_fexecve, (fexecve_fn)dlsym(RTLD_NEXT, "fexecve"));
}

/* What detach_environment took out of the environment: the "NAME=VALUE"
 * strings themselves (unsetenv frees none), and LD_PRELOAD as it was, as
 * it was left, and cprof's entry in it. Written once, by the constructor,
 * before other threads run. */
static char **removed;
static size_t nremoved;
static char *preload_orig;  /* NULL: cprof's entry was not taken out */
static char *preload_after;  /* NULL: LD_PRELOAD was unset */
static char *preload_own;
static size_t preload_own_at; /* bytes of preload_after ahead of it */
static _Atomic pid_t detached_pid;

/* LD_PRELOAD separates its entries with colons or spaces. */
CPROF__SIGNAL_SAFE static bool preload_sep(char c) {
  return c == ':' || c == ' ';
}

/* True when entry (len bytes) of LD_PRELOAD names the library this code is
 * in: the same file, or for a bare name (which the loader looked up), the
 * same file name. */
static bool is_own_entry(const char *entry, size_t len, const char *own,
                         const struct stat *own_st) {
  char path[PATH_MAX];
  if (len == 0 || len >= sizeof path) return false;
  memcpy(path, entry, len);
  path[len] = '\0';
  if (!memchr(path, '/', len)) {
    const char *base = strrchr(own, '/');
    return strcmp(path, base ? base + 1 : own) == 0;
  }
  struct stat st;
  return stat(path, &st) == 0 && st.st_dev == own_st->st_dev &&
         st.st_ino == own_st->st_ino;
}

/* The file this code was loaded from, and its identity. */
static bool own_file(Dl_info *info, struct stat *st) {
  return dladdr((void *)&cprof__init_anchor, info) && info->dli_fname &&
         *info->dli_fname && stat(info->dli_fname, st) == 0;
}

/* The entry of LD_PRELOAD value at *p (its length in *len, 0 past the
 * last); *p moves past it. */
static const char *next_entry(const char **p, size_t *len) {
  const char *s = *p;
  while (*s && preload_sep(*s)) s++;
  const char *e = s;
  while (*e && !preload_sep(*e)) e++;
  *len = (size_t)(e - s);
  *p = e;
  return s;
}

/* True when LD_PRELOAD names this library: the program was started with
 * cprof preloaded (cprof run), and calls none of cprof's functions unless
 * it looks them up itself. */
static bool preloaded(void) {
  const char *cur = getenv("LD_PRELOAD");
  Dl_info info;
  struct stat own_st;
  if (!cur || !*cur || !own_file(&info, &own_st)) return false;
  for (size_t len;;) {
    const char *e = next_entry(&cur, &len);
    if (!len) return false;
    if (is_own_entry(e, len, info.dli_fname, &own_st)) return true;
  }
}

/* Takes cprof's entry out of LD_PRELOAD, keeping the others in their
 * order; remembers what it was. */
static void detach_preload(void) {
  const char *cur = getenv("LD_PRELOAD");
  Dl_info info;
  struct stat own_st;
  if (!cur || !*cur || !own_file(&info, &own_st)) return;
  size_t n = strlen(cur);
  char *kept = cprof__malloc(n + 1);
  char *own = cprof__malloc(n + 1);
  char *orig = cprof__strdup(cur);
  if (!kept || !own || !orig) goto out;
  size_t k = 0, own_at = 0;
  bool found = false;
  for (const char *q = cur; *q;) {
    size_t len;
    const char *p = next_entry(&q, &len);
    if (len && is_own_entry(p, len, info.dli_fname, &own_st)) {
      if (!found) {
        memcpy(own, p, len);
        own[len] = '\0';
        own_at = k;
      }
      found = true;
    } else if (len) {
      if (k) kept[k++] = ':';
      memcpy(kept + k, p, len);
      k += len;
    }
  }
  kept[k] = '\0';
  if (!found) goto out;
  cprof__guard_enter();
  int rc = k ? setenv("LD_PRELOAD", kept, 1) : unsetenv("LD_PRELOAD");
  cprof__guard_exit();
  if (rc != 0) goto out;
  preload_orig = orig;
  preload_after = k ? kept : NULL;
  preload_own = own;
  preload_own_at = own_at;
  if (!k) cprof__free(kept);
  return;
out:
  cprof__free(kept);
  cprof__free(own);
  cprof__free(orig);
}

/* Takes the variable named by entry ("NAME=VALUE") out of the environment
 * and keeps entry. */
static void detach_entry(char *entry, size_t *cap) {
  const char *eq = strchr(entry, '=');
  char name[256];
  size_t len = eq ? (size_t)(eq - entry) : strlen(entry);
  if (len == 0 || len >= sizeof name) return;
  memcpy(name, entry, len);
  name[len] = '\0';
  if (nremoved == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    char **r = cprof__realloc(removed, c * sizeof *r);
    if (!r) return;
    removed = r;
    *cap = c;
  }
  cprof__guard_enter();
  int rc = unsetenv(name);
  cprof__guard_exit();
  if (rc == 0) removed[nremoved++] = entry;
}

/* What exec'd children inherit, once every module has read its settings.
 * Unless follow_exec, every CPROF_* variable leaves the environment
 * (unsetenv, which frees no string the program may hold) and cprof's own
 * entry leaves LD_PRELOAD (the others stay, in their order), so programs
 * the host execs run unprofiled. With follow_exec only CPROF_HTTP goes,
 * unless it has a %p (one port cannot serve two processes). Nothing
 * changes in a privileged process. What was taken out is kept, for
 * cprof__env_get and for an exec that keeps the pid. */
static void detach_environment(bool follow_exec) {
  if (getauxval(AT_SECURE) || !environ) return;
  /* Collected first: unsetenv moves the entries of environ. */
  size_t n = 0, cap = 0;
  for (char **e = environ; *e; e++) n++;
  char **mine = cprof__malloc((n + 1) * sizeof *mine);
  if (!mine) return;
  size_t m = 0;
  for (char **e = environ; *e; e++) {
    if (strncmp(*e, "CPROF_", 6) != 0) continue;
    /* Followed children profile themselves, with everything but an
     * address only one process can serve on. */
    if (follow_exec && !(strncmp(*e, "CPROF_HTTP=", 11) == 0 &&
                         !strstr(*e + 11, "%p")))
      continue;
    mine[m++] = *e;
  }
  for (size_t i = 0; i < m; i++) detach_entry(mine[i], &cap);
  cprof__free(mine);
  if (!follow_exec) detach_preload();
  cprof__env_keep_removed(removed, nremoved);
  if (nremoved || preload_orig) atomic_store(&detached_pid, getpid());
}

/* True when envp sets the variable of entry ("NAME=..."). */
CPROF__SIGNAL_SAFE static bool env_has(char *const envp[], const char *entry) {
  size_t n = strcspn(entry, "=");
  for (size_t i = 0; envp && envp[i]; i++)
    if (strncmp(envp[i], entry, n) == 0 && envp[i][n] == '=') return true;
  return false;
}

/* True when LD_PRELOAD value v has entry own. */
CPROF__SIGNAL_SAFE static bool preload_has(const char *v, const char *own) {
  size_t n = strlen(own);
  for (const char *p = v; *p;) {
    while (*p && preload_sep(*p)) p++;
    const char *e = p;
    while (*e && !preload_sep(*e)) e++;
    if ((size_t)(e - p) == n && memcmp(p, own, n) == 0) return true;
    p = e;
  }
  return false;
}

/* Appends n bytes of s at out[*o], within outlen (terminated). */
CPROF__SIGNAL_SAFE static void put(char *out, size_t outlen, size_t *o, const char *s, size_t n) {
  if (*o + n >= outlen) n = outlen - *o - 1;
  memcpy(out + *o, s, n);
  *o += n;
  out[*o] = '\0';
}

/* The LD_PRELOAD value for an exec that keeps the pid, given the one envp
 * has (cur, NULL when unset), written into out: as it was when the program
 * left it as cprof did; else cur with cprof's entry where it was (after
 * the entries that came before it, when cur still starts with them), or
 * first. Only memcpy, for exec's signal safety. */
CPROF__SIGNAL_SAFE static void preload_for_exec(const char *cur, char *out, size_t outlen) {
  size_t o = 0;
  out[0] = '\0';
  if (cur ? preload_after && strcmp(cur, preload_after) == 0 : !preload_after) {
    put(out, outlen, &o, preload_orig, strlen(preload_orig));
    return;
  }
  if (!cur) cur = "";
  size_t at = preload_own_at;
  if (preload_has(cur, preload_own)) {
    /* Still there: cur as it is. */
  } else if (at && preload_after && strncmp(cur, preload_after, at) == 0 &&
             (cur[at] == '\0' || preload_sep(cur[at]))) {
    /* After the entries that came before cprof's, as they still do. */
    put(out, outlen, &o, cur, at);
    put(out, outlen, &o, ":", 1);
    put(out, outlen, &o, preload_own, strlen(preload_own));
    cur += at;
  } else {
    put(out, outlen, &o, preload_own, strlen(preload_own));
    if (*cur) put(out, outlen, &o, ":", 1);
  }
  put(out, outlen, &o, cur, strlen(cur));
}

/* For an exec that keeps the pid (a shell's `exec prog`): how many
 * pointers the environment given back needs (0: nothing was taken out),
 * and in *preload_len the bytes its LD_PRELOAD entry needs. */
CPROF__SIGNAL_SAFE static size_t exec_env_size(char *const envp[], size_t *preload_len) {
  if (!nremoved && !preload_orig) return 0;
  size_t n = 0;
  const char *cur = NULL;
  for (; envp && envp[n]; n++)
    if (strncmp(envp[n], "LD_PRELOAD=", 11) == 0) cur = envp[n] + 11;
  *preload_len = 0;
  if (preload_orig)
    *preload_len = 11 + strlen(preload_orig) + strlen(preload_own) + 2 +
                   (cur ? strlen(cur) : 0) + 1;
  return n + nremoved + 2;
}

/* Fills out with envp and what detach_environment took out (the
 * variables envp does not set, and cprof's LD_PRELOAD entry), in the
 * caller's buffers: nothing allocated, locked or written elsewhere, so it
 * is async-signal-safe, as exec is. */
CPROF__SIGNAL_SAFE static void exec_env_fill(char *const envp[], char **out, char *preload,
                          size_t preload_len) {
  const char *cur = NULL;
  for (size_t i = 0; envp && envp[i]; i++)
    if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0) cur = envp[i] + 11;
  size_t k = 0;
  for (size_t i = 0; envp && envp[i]; i++)
    if (!preload_orig || strncmp(envp[i], "LD_PRELOAD=", 11) != 0)
      out[k++] = envp[i];
  if (preload_orig) {
    memcpy(preload, "LD_PRELOAD=", 11);
    preload_for_exec(cur, preload + 11, preload_len - 11);
    out[k++] = preload;
  }
  for (size_t i = 0; i < nremoved; i++)
    if (!env_has(envp, removed[i])) out[k++] = removed[i];
  out[k] = NULL;
}

/* Every CPROF_* variable is looked at now, at load: a misspelt name gets
 * one line naming the closest setting, and a bad value one line, here
 * rather than when a profile first reads it. A privileged process reads
 * none of them (cprof__env_get says so once, when one is set). */
static void check_settings(void) {
  if (getauxval(AT_SECURE)) return;
  cprof__env_check_names(environ);
  cprof__cpu_default_hz();
  cprof__wall_default_hz();
  cprof__cpu_env_init();
  cprof__thread_sample_env_init();
  cprof__task_sample_env_init();
  cprof__cachedir_env_init();
}

__attribute__((constructor)) static void cprof__init(void) {
  const bool was_preloaded = preloaded();
  resolve_exec();
  cprof__stacktab_init();
  cprof__stack_register_thread();
  cprof__stack_init();
  cprof__threads_init();
  cprof__thread_scan_init();
  cprof__sig_init();
  cprof__heap_init();
  cprof__heap_peak_init();
  cprof__contention_env_init();
  /* What exec'd children inherit, before any thread of cprof's starts:
   * the environment is rearranged here, and settings read later (by the
   * threads the sinks start, at any time) come from what was taken out,
   * which no longer changes. */
  if (&cprof_keep_environment == NULL) {
    check_settings();
    long long follow = 0;
    cprof__env_int("CPROF_FOLLOW_EXEC", 0, 1, "exec'd programs not followed",
                   &follow);
    detach_environment(follow == 1);
  }
  /* Last: dumps start profiles the other modules provide. */
  cprof__exit_init();
  const bool dumps = cprof__dump_env_init();
  cprof__http_env_init();
  cprof__push_env_init();
  /* A preloaded program with dumps calls nothing of cprof's (one that
   * looks cprof up and writes its own profiles runs without dumps): when
   * no sink started above reads heap samples, none is taken
   * (heap_sampler.h). */
  if (was_preloaded && dumps) cprof__heap_idle_unless_asked();
}

/* The environment given back to an exec that keeps the pid is built on
 * the caller's stack when it fits in EXEC_ENV_STACK bytes (about a
 * hundred variables), otherwise in a mapping of its own, so the stack use
 * stays bounded whatever the environment: an exec from a crash handler on
 * a small alternate stack, or from a thread with a small stack, must not
 * overflow it. The mapping is given back when exec fails; a successful
 * exec replaces the address space with it (after vfork, the parent's:
 * there the mapping stays, one per such exec). An environment past
 * EXEC_ENV_MAX bytes of pointers, or a mapping refused, goes to the exec
 * as it is. */
#define EXEC_ENV_STACK 1024
#define EXEC_ENV_MAX (32 * 1024 * 1024)

/* Runs exec with envp, or for an exec that keeps the pid (this is the
 * process whose environment was changed), with cprof's settings put back
 * (above): nothing is allocated from the heap, so an exec from a signal
 * handler stays safe. In a fork child, the dump state learns that the
 * child is being replaced. */
#define EXEC_WITH_ENV(envp, call)                                          \
  do {                                                                     \
    pid_t pid_ = getpid();                                                 \
    size_t plen_ = 0, slots_ = 0;                                          \
    if (pid_ == atomic_load(&detached_pid))                                \
      slots_ = exec_env_size((envp), &plen_);                              \
    else                                                                   \
      cprof__dump_exec_attempt(pid_);                                      \
    size_t need_ = slots_ * sizeof(char *) + plen_ + 1;                    \
    char stack_[EXEC_ENV_STACK] __attribute__((aligned(16)));              \
    char *buf_ = NULL;                                                     \
    bool mapped_ = false;                                                  \
    if (slots_ && need_ <= EXEC_ENV_MAX) {                                 \
      if (need_ <= sizeof stack_) {                                        \
        buf_ = stack_;                                                     \
      } else {                                                             \
        buf_ = cprof__sys_map(need_);                                      \
        mapped_ = buf_ != NULL;                                            \
      }                                                                    \
    }                                                                      \
    if (buf_) {                                                            \
      char **env_ = (char **)(void *)buf_;                                 \
      exec_env_fill((envp), env_, buf_ + slots_ * sizeof(char *),          \
                    plen_ + 1);                                            \
      char *const *use_ = env_;                                            \
      call;                                                                \
      if (mapped_) cprof__sys_unmap(buf_, need_);                          \
    } else {                                                               \
      char *const *use_ = (envp);                                          \
      call;                                                                \
    }                                                                      \
  } while (0)

CPROF__SIGNAL_SAFE static int do_execve(const char *path, char *const argv[],
                     char *const envp[]) {
  execve_fn real = atomic_load(&real_execve);
  int rc;
  if (real)
    EXEC_WITH_ENV(envp, rc = real(path, argv, use_));
  else
    EXEC_WITH_ENV(envp, rc = (int)syscall(SYS_execve, path, argv, use_));
  return rc;
}

static int do_execvpe(const char *file, char *const argv[],
                      char *const envp[]) {
  execve_fn real = atomic_load(&real_execvpe);
  if (!real) {
    /* Only before the constructor, from another library's. */
    real = (execve_fn)dlsym(RTLD_NEXT, "execvpe");
    if (!real) {
      errno = ENOSYS;
      return -1;
    }
  }
  int rc;
  EXEC_WITH_ENV(envp, rc = real(file, argv, use_));
  return rc;
}

CPROF__SIGNAL_SAFE CPROF_EXPORT int execve(const char *path, char *const argv[],
                        char *const envp[]) {
  return do_execve(path, argv, envp);
}

CPROF__SIGNAL_SAFE CPROF_EXPORT int execv(const char *path, char *const argv[]) {
  return do_execve(path, argv, environ);
}

CPROF_EXPORT int execvpe(const char *file, char *const argv[],
                         char *const envp[]) {
  return do_execvpe(file, argv, envp);
}

CPROF_EXPORT int execvp(const char *file, char *const argv[]) {
  return do_execvpe(file, argv, environ);
}

CPROF__SIGNAL_SAFE CPROF_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  fexecve_fn real = atomic_load(&real_fexecve);
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  int rc;
  EXEC_WITH_ENV(envp, rc = real(fd, argv, use_));
  return rc;
}

/* The execl family: the arguments gathered on the stack, as glibc does,
 * up to the terminating NULL (and, for execle, the environment after it). */
#define GATHER_ARGS(arg, ap, argv)                                        \
  size_t n_ = 1;                                                          \
  va_start(ap, arg);                                                      \
  while (va_arg(ap, const char *)) n_++;                                  \
  va_end(ap);                                                             \
  char *argv[n_ + 1];                                                     \
  argv[0] = (char *)(arg);                                                \
  va_start(ap, arg);                                                      \
  for (size_t i_ = 1; i_ <= n_; i_++) argv[i_] = va_arg(ap, char *)

CPROF__SIGNAL_SAFE CPROF_EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  GATHER_ARGS(arg, ap, argv);
  va_end(ap);
  return do_execve(path, argv, environ);
}

CPROF_EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  GATHER_ARGS(arg, ap, argv);
  va_end(ap);
  return do_execvpe(file, argv, environ);
}

CPROF__SIGNAL_SAFE CPROF_EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  GATHER_ARGS(arg, ap, argv);
  char *const *envp = va_arg(ap, char *const *);
  va_end(ap);
  return do_execve(path, argv, envp);
}
