/*
 * The PEM block scanner behind `cprof extract` (pem.h). One pass over the
 * log, line by line, with explicit lengths (the log need not be
 * NUL-terminated and may hold any bytes). A block starts at a line holding
 * "-----BEGIN PPROF "; whatever precedes the marker on that line is the
 * block's log prefix, and every line of the block carries that prefix, or
 * one of the same width (a timestamp that changes), or is a line the
 * program logged in between, which is skipped. Decoded data is checked
 * before a block is reported: base64 must be valid and, for pprof (debug
 * 0), the gzip stream complete. Only the open block's prefix and decoded
 * bytes are kept, both bounded, and lines come from the caller one at a
 * time (pem_scan and pem_scan_file split text and files into them the same
 * way), so memory does not grow with the log.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "pem.h"
#include "pprofdec.h"

#define BEGIN_MARK "-----BEGIN PPROF "

typedef struct span {
  const char *p;
  size_t n;
} span;

static const char *find(span s, const char *needle) {
  return s.n ? memmem(s.p, s.n, needle, strlen(needle)) : NULL;
}

static bool starts_with(span s, const char *lit) {
  size_t n = strlen(lit);
  return s.n >= n && memcmp(s.p, lit, n) == 0;
}

static bool is_base64_line(span s) {
  if (s.n == 0) return false;
  for (size_t i = 0; i < s.n; i++)
    if (cprof__base64_value((unsigned char)s.p[i]) < 0 && s.p[i] != '=') return false;
  return true;
}

static bool is_header_line(span s) {
  const char *colon = memchr(s.p, ':', s.n);
  if (!colon || colon == s.p) return false;
  for (const char *c = s.p; c < colon; c++)
    if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '-'))
      return false;
  return true;
}

static void fail_block(pem_scanner *st, const char *why) {
  const pem_callbacks *cb = st->cb;
  if (!st->failed && cb->error) cb->error(st->b.line, st->b.label, why, cb->ctx);
  st->failed = true;
}

/* Fails the block for its size: what is over which limit, and the hint. */
static void fail_too_big(pem_scanner *st, const char *what) {
  char lim[32], why[256];
  pprofdec_format_size(lim, sizeof lim, st->max_size);
  snprintf(why, sizeof why, "%s larger than the %s limit%s", what, lim,
           st->cb->limit_hint ? st->cb->limit_hint : "");
  fail_block(st, why);
}

/* Forgets the open block, keeping the scan's own state. */
static void close_block(pem_scanner *st) {
  free(st->data);
  st->data = NULL;
  st->cap = 0;
  st->open = st->headers_done = st->failed = st->padded = false;
  st->prefix_len = 0;
  memset(&st->b, 0, sizeof st->b);
  st->bits = st->nbits = 0;
}

/* Appends a decoded byte; false when the block would pass max_size. */
static bool push_byte(pem_scanner *st, unsigned char c, const char **why) {
  if (st->b.len == st->cap) {
    if (st->cap >= st->max_size) {
      *why = NULL;
      return false;
    }
    size_t cap = st->cap ? st->cap * 2 : 4096;
    if (cap > st->max_size) cap = st->max_size;
    unsigned char *d = realloc(st->data, cap);
    if (!d) {
      *why = "out of memory";
      return false;
    }
    st->data = d;
    st->cap = cap;
  }
  st->data[st->b.len++] = c;
  return true;
}

/* Decodes one line of base64 into the block; fails the block when it is
 * not base64 or makes the block too big. */
static void decode_line(pem_scanner *st, span s) {
  for (size_t i = 0; i < s.n; i++) {
    unsigned char c = (unsigned char)s.p[i];
    if (c == '=') {
      st->padded = true;
      continue;
    }
    int v = cprof__base64_value(c);
    if (st->padded || v < 0) {
      fail_block(st,
                 st->padded ? "data after base64 padding" : "invalid base64");
      return;
    }
    st->bits = (st->bits << 6) | (unsigned)v;
    st->nbits += 6;
    if (st->nbits >= 8) {
      st->nbits -= 8;
      const char *why;
      if (!push_byte(st, (unsigned char)(st->bits >> st->nbits), &why)) {
        if (why)
          fail_block(st, why);
        else
          fail_too_big(st, "block");
        return;
      }
      st->bits &= (1u << st->nbits) - 1;
    }
  }
}

static void set_header(pem_scanner *st, span s) {
  const char *colon = memchr(s.p, ':', s.n);
  size_t klen = (size_t)(colon - s.p);
  span v = {colon + 1, s.n - klen - 1};
  while (v.n && v.p[0] == ' ') v.p++, v.n--;
  char value[64];
  size_t n = v.n < sizeof value - 1 ? v.n : sizeof value - 1;
  memcpy(value, v.p, n);
  value[n] = '\0';
  if (klen == 7 && memcmp(s.p, "Profile", 7) == 0) {
    size_t m = strnlen(value, sizeof st->b.profile - 1);
    memcpy(st->b.profile, value, m);
    st->b.profile[m] = '\0';
  }
  if (klen == 3 && memcmp(s.p, "Pid", 3) == 0)
    st->b.pid = strtol(value, NULL, 10);
  else if (klen == 3 && memcmp(s.p, "Seq", 3) == 0)
    st->b.seq = strtoll(value, NULL, 10);
  else if (klen == 5 && memcmp(s.p, "Debug", 5) == 0)
    st->b.debug = atoi(value);
}

/* Reports the block just ended, when it is good. */
static void finish_block(pem_scanner *st) {
  const char *why = NULL;
  if (st->failed) return;
  if (st->nbits >= 6) {
    why = "truncated base64";
  } else if (st->b.len == 0) {
    why = "empty block";
  } else if (st->b.debug == 0) {
    /* Inflated to check it, never kept: at most max_size bytes of work. */
    char err[128];
    size_t n;
    int rc = pprofdec_gunzip(st->data, st->b.len, st->max_size, NULL, &n, err,
                             sizeof err);
    if (rc == PPROFDEC_ETOOBIG) {
      fail_too_big(st, "decompressed profile");
      return;
    }
    if (rc) why = "corrupt data: not a complete gzip stream";
  }
  if (why) {
    fail_block(st, why);
    return;
  }
  st->b.data = st->data;
  if (st->cb->block) st->cb->block(&st->b, st->cb->ctx);
  st->good++;
}

static void open_block(pem_scanner *st, span line, const char *mark) {
  close_block(st);
  st->open = true;
  st->b.line = st->lineno;
  size_t plen = (size_t)(mark - line.p);
  span rest = {mark + 11, line.n - plen - 11};
  const char *dash = find(rest, "-----");
  size_t n = dash ? (size_t)(dash - rest.p) : 0;
  if (plen <= PEM_MAX_PREFIX) {
    memcpy(st->prefix, line.p, plen);
    st->prefix_len = plen;
  }
  if (!dash || n == 0 || n >= sizeof st->b.label || plen > PEM_MAX_PREFIX) {
    snprintf(st->b.label, sizeof st->b.label, "PPROF ?");
    fail_block(st, "malformed BEGIN line");
    return;
  }
  memcpy(st->b.label, rest.p, n);
  st->b.label[n] = '\0';
  /* Default profile name: the label's last word, lower-cased. */
  const char *word = strrchr(st->b.label, ' ');
  word = word ? word + 1 : st->b.label;
  size_t i;
  for (i = 0; word[i] && i + 1 < sizeof st->b.profile; i++)
    st->b.profile[i] =
        (char)(word[i] >= 'A' && word[i] <= 'Z' ? word[i] + 32 : word[i]);
  st->b.profile[i] = '\0';
}

/* The part of a line inside the open block, or false for a foreign line
 * (something the program logged in between). */
static bool block_content(const pem_scanner *st, span line, span *out) {
  size_t pn = st->prefix_len;
  if (line.n >= pn) {
    span rest = {line.p + pn, line.n - pn};
    bool same = memcmp(line.p, st->prefix, pn) == 0;
    /* A prefix of the same width that differs (a timestamp) is accepted
     * only when what follows is block content. */
    if (same || starts_with(rest, "-----END ") || is_base64_line(rest) ||
        (!st->headers_done && (rest.n == 0 || is_header_line(rest)))) {
      *out = rest;
      return true;
    }
  }
  return false;
}

void pem_begin(pem_scanner *s, const pem_callbacks *cb) {
  memset(s, 0, sizeof *s);
  s->cb = cb;
  s->max_size = cb->max_size ? cb->max_size : PPROFDEC_MAX_SIZE;
  s->max_line = cb->max_line ? cb->max_line : PEM_MAX_LINE;
}

void pem_line(pem_scanner *st, const char *text, size_t len, bool cut) {
  span line = {text, len};
  st->lineno++;
  if (line.n && line.p[line.n - 1] == '\r') line.n--;

  const char *mark = find(line, BEGIN_MARK);
  if (mark) {
    if (st->open) fail_block(st, "truncated: no END line before the next block");
    open_block(st, line, mark);
    if (cut) fail_block(st, "malformed BEGIN line");
    return;
  }
  if (!st->open) return;
  span c;
  if (!block_content(st, line, &c)) return;
  if (cut) {
    char why[64];
    snprintf(why, sizeof why, "a line longer than %zu bytes", st->max_line);
    fail_block(st, why);
    return;
  }
  if (starts_with(c, "-----END ")) {
    span want = {c.p + 9, c.n - 9};
    size_t ln = strlen(st->b.label);
    if (want.n != ln + 5 || memcmp(want.p, st->b.label, ln) != 0 ||
        memcmp(want.p + ln, "-----", 5) != 0)
      fail_block(st, "END line does not match BEGIN");
    else
      finish_block(st);
    close_block(st);
    return;
  }
  if (st->failed) return;
  if (!st->headers_done) {
    if (c.n == 0) {
      st->headers_done = true;
      return;
    }
    if (is_header_line(c) && !is_base64_line(c)) {
      set_header(st, c);
      return;
    }
    st->headers_done = true;
  }
  decode_line(st, c);
}

size_t pem_end(pem_scanner *st) {
  if (st->open) fail_block(st, "truncated: the log ends inside the block");
  close_block(st);
  return st->good;
}

size_t pem_scan(const char *text, size_t len, const pem_callbacks *cb) {
  pem_scanner st;
  pem_begin(&st, cb);
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    bool cut = n > st.max_line;
    pem_line(&st, p, cut ? st.max_line : n, cut);
    p = nl ? nl + 1 : end;
  }
  return pem_end(&st);
}

int pem_scan_file(FILE *f, const pem_callbacks *cb, size_t *good) {
  pem_scanner st;
  pem_begin(&st, cb);
  /* One byte more than the longest line, so that a full buffer without a
   * newline is a line that must be cut. */
  size_t cap = st.max_line + 1, have = 0;
  char *buf = malloc(cap);
  if (!buf) {
    *good = pem_end(&st);
    return -1;
  }
  bool skipping = false; /* inside the rest of a line already cut */
  int rc = 0;
  for (;;) {
    size_t r = fread(buf + have, 1, cap - have, f);
    have += r;
    char *p = buf, *end = buf + have, *nl;
    while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
      if (!skipping) pem_line(&st, p, (size_t)(nl - p), false);
      skipping = false;
      p = nl + 1;
    }
    size_t rest = (size_t)(end - p);
    if (skipping) {
      rest = 0;
    } else if (rest > st.max_line) {
      pem_line(&st, p, st.max_line, true);
      skipping = true;
      rest = 0;
    }
    memmove(buf, p, rest);
    have = rest;
    if (r == 0) {
      if (ferror(f)) rc = -1;
      break;
    }
  }
  if (rc == 0 && have) pem_line(&st, buf, have, false);
  int saved = errno;
  free(buf);
  *good = pem_end(&st);
  errno = saved;
  return rc;
}
