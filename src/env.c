/*
 * The CPROF_* environment parsers (env.h). Whatever the environment holds,
 * these never abort: a bad value is reported in one line and treated as
 * unset.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"

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
    snprintf(err, errlen, "unexpected '%c' after the number", *p);
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

void cprof__warn(const char *fmt, ...) {
  char line[512];
  int n = snprintf(line, sizeof line, "cprof: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  int saved = errno;
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
  errno = saved;
}

const char *cprof__env_str(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

bool cprof__env_int(const char *name, long long min, long long max,
                    const char *disabled, long long *out) {
  const char *v = getenv(name);
  if (!v) return false;
  char why[96];
  if (cprof__parse_int(v, min, max, out, why, sizeof why) == 0) return true;
  cprof__warn("%s=%.64s: %s; %s", name, v, why, disabled);
  return false;
}
