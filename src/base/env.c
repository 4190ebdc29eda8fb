/*
 * The CPROF_* environment parsers (env.h). Whatever the environment holds,
 * these never abort: a bad value is reported in one line and treated as
 * unset. Every CPROF_* variable is read through cprof__env_get, the one
 * place that decides whether the environment may be trusted (not in a
 * setuid, setgid or file-capability process), and every value echoed in a
 * message goes through cprof__quote, so a message stays one line whatever
 * the value holds. cprof__warn writes the lines, to the stderr the program
 * started with when dumps keep a descriptor on it (cprof__warn_redirect),
 * and never raises SIGPIPE or SIGXFSZ in the program
 * (cprof__write_guard).
 * Variables the constructor took out of the environment (init.c) still
 * read as they were. This file depends on no other module of cprof's, so
 * the fuzzers can link it alone.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/env.h"
#include "base/sys.h"
#include "base/settings.h"

size_t cprof__quote(char *out, size_t outlen, const char *s, size_t n,
                    size_t max) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0, shown = n > max ? max : n;
  if (outlen == 0) return 0;
  /* Leaves room for the longest escape and the closing quote. */
#define PUT(c) (o + 1 < outlen ? (void)(out[o++] = (c)) : (void)0)
  PUT('"');
  for (size_t i = 0; i < shown && o + 6 < outlen; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    switch (c) {
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      case '\\': esc = "\\\\"; break;
      case '"': esc = "\\\""; break;
      default: break;
    }
    if (esc) {
      PUT(esc[0]);
      PUT(esc[1]);
    } else if (c < 0x20 || c >= 0x7f) {
      PUT('\\');
      PUT('x');
      PUT(hex[c >> 4]);
      PUT(hex[c & 15]);
    } else {
      PUT((char)c);
    }
  }
  PUT('"');
#undef PUT
  out[o] = '\0';
  if (n > shown) {
    int m = snprintf(out + o, outlen - o, "... (%zu bytes)", n);
    if (m > 0) o += (size_t)m < outlen - o ? (size_t)m : outlen - o - 1;
  }
  return o;
}

const char *cprof__quoted(char *buf, size_t len, const char *s) {
  cprof__quote(buf, len, s ? s : "", s ? strlen(s) : 0, CPROF__QUOTE_MAX);
  return buf;
}

int cprof__parse_int(const char *s, long long min, long long max,
                     long long *out, char *err, size_t errlen) {
  if (!s || !*s) {
    snprintf(err, errlen, "empty value");
    return CPROF_EINVAL;
  }
  const char *p = s;
  bool negative = false;
  if (*p == '-' || *p == '+') negative = *p++ == '-';
  if (*p < '0' || *p > '9') {
    snprintf(err, errlen, "not a number");
    return CPROF_EINVAL;
  }
  unsigned long long v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (~0ull - d) / 10) {
      snprintf(err, errlen, "out of range [%lld, %lld]", min, max);
      return CPROF_EINVAL;
    }
    v = v * 10 + d;
  }
  if (*p) {
    char c[8];
    cprof__quote(c, sizeof c, p, 1, 1);
    c[0] = c[strlen(c) - 1] = '\'';
    snprintf(err, errlen, "unexpected %s after the number", c);
    return CPROF_EINVAL;
  }
  long long value;
  if (negative) {
    if (v > (unsigned long long)LLONG_MAX + 1) {
      snprintf(err, errlen, "out of range [%lld, %lld]", min, max);
      return CPROF_EINVAL;
    }
    value = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
  } else {
    if (v > (unsigned long long)LLONG_MAX) {
      snprintf(err, errlen, "out of range [%lld, %lld]", min, max);
      return CPROF_EINVAL;
    }
    value = (long long)v;
  }
  if (value < min || value > max) {
    snprintf(err, errlen, "out of range [%lld, %lld]", min, max);
    return CPROF_EINVAL;
  }
  *out = value;
  return 0;
}

void cprof__write_guard_begin(cprof__write_guard *g) {
  sigset_t set, pending;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigaddset(&set, SIGXFSZ);
  bool got = sigpending(&pending) == 0;
  g->pipe_pending = got && sigismember(&pending, SIGPIPE);
  g->xfsz_pending = got && sigismember(&pending, SIGXFSZ);
  pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

void cprof__write_guard_end(cprof__write_guard *g, int failed_errno) {
  int sig = failed_errno == EPIPE ? SIGPIPE
            : failed_errno == EFBIG ? SIGXFSZ
                                    : 0;
  bool was = sig == SIGPIPE ? g->pipe_pending : g->xfsz_pending;
  sigset_t one, pending;
  /* The write raised the signal for this thread, where it is blocked:
   * take it back before the mask lets it through. */
  if (sig && !was && sigpending(&pending) == 0 &&
      sigismember(&pending, sig)) {
    sigemptyset(&one);
    sigaddset(&one, sig);
    const struct timespec zero = {0, 0};
    /* The system call, not libc's (which cprof's wait interposer
     * wraps). */
    cprof__sys4(SYS_rt_sigtimedwait, (long)&one, 0L, (long)&zero, 8L);
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* Where cprof__warn writes: stderr, or cprof's own descriptor on the
 * stderr the program started with, checked against the file it was opened
 * on before each line. */
static _Atomic int warn_fd = -1;
static _Atomic unsigned long long warn_dev, warn_ino;

void cprof__warn_redirect(int fd) {
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0) {
    atomic_store(&warn_dev, (unsigned long long)st.st_dev);
    atomic_store(&warn_ino, (unsigned long long)st.st_ino);
    atomic_store(&warn_fd, fd);
  } else {
    atomic_store(&warn_fd, -1);
  }
}

void cprof__warn(const char *fmt, ...) {
  char line[1024];
  int n = snprintf(line, sizeof line, "cprof: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  int saved = errno;
  int fd = atomic_load(&warn_fd);
  struct stat st;
  /* A descriptor the program closed and whose number it reused is the
   * program's now: the line is dropped rather than written into it. */
  if (fd < 0)
    fd = STDERR_FILENO;
  else if (fstat(fd, &st) != 0 ||
           (unsigned long long)st.st_dev != atomic_load(&warn_dev) ||
           (unsigned long long)st.st_ino != atomic_load(&warn_ino))
    fd = -1;
  if (fd >= 0) {
    cprof__write_guard g;
    cprof__write_guard_begin(&g);
    ssize_t w = write(fd, line, len);
    cprof__write_guard_end(&g, w < 0 ? errno : 0);
  }
  errno = saved;
}

static atomic_bool secure_warned;

/* The "NAME=VALUE" strings the constructor took out of the environment
 * (init.c), which still read as set here. */
static char *const *removed;
static size_t nremoved;

void cprof__env_keep_removed(char *const *entries, size_t n) {
  removed = entries;
  nremoved = n;
}

/* The removed value of name, or NULL. */
static const char *removed_value(const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; i < nremoved; i++)
    if (strncmp(removed[i], name, n) == 0 && removed[i][n] == '=')
      return removed[i] + n + 1;
  return NULL;
}

bool cprof__expand_pid(char *out, size_t outlen, const char *s, long pid) {
  char num[24];
  int nlen = snprintf(num, sizeof num, "%ld", pid);
  size_t o = 0;
  if (outlen == 0) return false;
  for (; *s; s++) {
    const char *piece = s;
    size_t len = 1;
    if (s[0] == '%' && s[1] == 'p') {
      piece = num;
      len = (size_t)nlen;
      s++;
    }
    if (o + len >= outlen) {
      out[o] = '\0';
      return false;
    }
    memcpy(out + o, piece, len);
    o += len;
  }
  out[o] = '\0';
  return true;
}

/* CPROF_HTTP with its %p expanded; normal context, so one buffer does. */
static const char *per_process(const char *name, const char *v) {
  static char expanded[4096];
  if (!v || strcmp(name, "CPROF_HTTP") != 0 || !strstr(v, "%p")) return v;
  if (!cprof__expand_pid(expanded, sizeof expanded, v, (long)getpid()))
    return v;
  return expanded;
}

const char *cprof__env_lookup(const char *name, unsigned long at_secure) {
  const char *v = getenv(name);
  if (!v) v = removed_value(name);
  if (!v || !at_secure) return per_process(name, v);
  if (!atomic_exchange(&secure_warned, true))
    cprof__warn("privileged process (setuid, setgid or file capabilities): "
                "CPROF_* environment variables ignored");
  return NULL;
}


/* The settings' names, for the spelling check. */
#define NAME_OF(n, what) #n,
static const char *const setting_names[] = {CPROF__SETTINGS(NAME_OF)};
#undef NAME_OF

bool cprof__setting_known(const char *name) {
  for (size_t i = 0; i < sizeof setting_names / sizeof setting_names[0]; i++)
    if (strcmp(setting_names[i], name) == 0) return true;
  return false;
}

/* Names longer than this are nobody's typo of a setting. */
#define CLOSEST_MAX_LEN 48

/* The edit distance (insertions, deletions, substitutions, and swaps of
 * neighbours) between a[0..n) and b, both at most CLOSEST_MAX_LEN bytes. */
static size_t edit_distance(const char *a, size_t n, const char *b) {
  size_t m = strlen(b);
  /* Three rows of the table (the swap looks two rows back): ~1 KiB of
   * stack, whatever stack the constructor runs on. */
  size_t rows[3][CLOSEST_MAX_LEN + 1];
  size_t *back2 = rows[0], *back = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= m; j++) back[j] = j;
  for (size_t i = 1; i <= n; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= m; j++) {
      size_t best = back[j - 1] + (a[i - 1] != b[j - 1]);
      if (back[j] + 1 < best) best = back[j] + 1;
      if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          back2[j - 2] + 1 < best)
        best = back2[j - 2] + 1;
      cur[j] = best;
    }
    size_t *t = back2;
    back2 = back;
    back = cur;
    cur = t;
  }
  return back[m];
}

const char *cprof__setting_closest(const char *name, size_t n) {
  if (n > CLOSEST_MAX_LEN) return NULL;
  /* A typo, not another name: at most a quarter of the name changed
   * (CPROF_DUMPP, CPROF_HEAP_RAT, CPROF_CPUHZ), and at least 2 allowed. */
  size_t limit = n / 4 > 2 ? n / 4 : 2, best = limit + 1;
  const char *found = NULL;
  for (size_t i = 0; i < sizeof setting_names / sizeof setting_names[0];
       i++) {
    if (strlen(setting_names[i]) > CLOSEST_MAX_LEN) continue;
    size_t d = edit_distance(name, n, setting_names[i]);
    if (d < best) {
      best = d;
      found = setting_names[i];
    }
  }
  return found;
}

/* More unknown names than this get one line for the rest. */
#define UNKNOWN_NAMES_SHOWN 8

void cprof__env_check_names(char *const *envp) {
  size_t unknown = 0;
  for (size_t i = 0; envp && envp[i]; i++) {
    const char *e = envp[i];
    if (strncmp(e, "CPROF_", 6) != 0) continue;
    size_t n = strcspn(e, "=");
    char name[CLOSEST_MAX_LEN + 1];
    if (n <= CLOSEST_MAX_LEN) {
      memcpy(name, e, n);
      name[n] = '\0';
      if (cprof__setting_known(name)) continue;
    }
    if (++unknown > UNKNOWN_NAMES_SHOWN) continue;
    /* A name of letters, digits and underscores is shown as it is. */
    char q[CPROF__QUOTED_SIZE];
    bool plain = n <= CPROF__QUOTE_MAX;
    for (size_t k = 0; k < n && plain; k++)
      plain = (e[k] >= 'A' && e[k] <= 'Z') || (e[k] >= 'a' && e[k] <= 'z') ||
              (e[k] >= '0' && e[k] <= '9') || e[k] == '_';
    if (plain) {
      memcpy(q, e, n);
      q[n] = '\0';
    } else {
      cprof__quote(q, sizeof q, e, n, CPROF__QUOTE_MAX);
    }
    const char *near = cprof__setting_closest(e, n);
    if (near)
      cprof__warn("%s is not a cprof setting (ignored); did you mean %s?", q,
                  near);
    else
      cprof__warn("%s is not a cprof setting (ignored)", q);
  }
  if (unknown > UNKNOWN_NAMES_SHOWN)
    cprof__warn("%zu more CPROF_* variables are not cprof settings (ignored)",
                unknown - UNKNOWN_NAMES_SHOWN);
}

const char *cprof__env_get(const char *name) {
  if (!name || !cprof__setting_known(name)) return NULL;
  return cprof__env_lookup(name, getauxval(AT_SECURE));
}

const char *cprof__env_str(const char *name) {
  const char *v = cprof__env_get(name);
  return v && *v ? v : NULL;
}

bool cprof__env_int(const char *name, long long min, long long max,
                    const char *disabled, long long *out) {
  const char *v = cprof__env_get(name);
  if (!v) return false;
  char why[96];
  if (cprof__parse_int(v, min, max, out, why, sizeof why) == 0) return true;
  char q[CPROF__QUOTED_SIZE];
  cprof__warn("%s=%s: %s; %s", name, cprof__quoted(q, sizeof q, v), why,
              disabled);
  return false;
}
