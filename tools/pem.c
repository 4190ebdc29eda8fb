/*
 * The PEM block scanner behind `cprof extract` (pem.h). One pass over the
 * log, line by line, with explicit lengths (the log need not be
 * NUL-terminated and may hold any bytes). A block starts at a line holding
 * "-----BEGIN PPROF "; whatever precedes the marker on that line is the
 * block's log prefix, and every line of the block carries that prefix, or
 * one of the same width (a timestamp that changes), or is a line the
 * program logged in between, which is skipped. Decoded data is checked
 * before a block is reported: base64 must be valid and, for pprof (debug
 * 0), the gzip stream complete.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pem.h"

#define BEGIN_MARK "-----BEGIN PPROF "
#define MAX_PREFIX 256

typedef struct span {
  const char *p;
  size_t n;
} span;

typedef struct block_state {
  bool open;
  bool headers_done;
  bool failed;
  span prefix;
  pem_block b;
  unsigned char *data;
  size_t cap;
  unsigned bits, nbits; /* base64 accumulator */
  bool padded;
} block_state;

static const char *find(span s, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; i + n <= s.n; i++)
    if (memcmp(s.p + i, needle, n) == 0) return s.p + i;
  return NULL;
}

static bool starts_with(span s, const char *lit) {
  size_t n = strlen(lit);
  return s.n >= n && memcmp(s.p, lit, n) == 0;
}

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

static bool is_base64_line(span s) {
  if (s.n == 0) return false;
  for (size_t i = 0; i < s.n; i++)
    if (b64_value((unsigned char)s.p[i]) < 0 && s.p[i] != '=') return false;
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

static void fail_block(block_state *st, const pem_callbacks *cb,
                       const char *why) {
  if (!st->failed && cb->error) cb->error(st->b.line, st->b.label, why, cb->ctx);
  st->failed = true;
}

static void close_block(block_state *st) {
  free(st->data);
  memset(st, 0, sizeof *st);
}

static bool push_byte(block_state *st, unsigned char c) {
  if (st->b.len == st->cap) {
    size_t cap = st->cap ? st->cap * 2 : 4096;
    unsigned char *d = realloc(st->data, cap);
    if (!d) return false;
    st->data = d;
    st->cap = cap;
  }
  st->data[st->b.len++] = c;
  return true;
}

/* Decodes one line of base64 into the block. */
static const char *decode_line(block_state *st, span s) {
  for (size_t i = 0; i < s.n; i++) {
    unsigned char c = (unsigned char)s.p[i];
    if (c == '=') {
      st->padded = true;
      continue;
    }
    if (st->padded) return "data after base64 padding";
    int v = b64_value(c);
    if (v < 0) return "invalid base64";
    st->bits = (st->bits << 6) | (unsigned)v;
    st->nbits += 6;
    if (st->nbits >= 8) {
      st->nbits -= 8;
      if (!push_byte(st, (unsigned char)(st->bits >> st->nbits)))
        return "out of memory";
      st->bits &= (1u << st->nbits) - 1;
    }
  }
  return NULL;
}

/* True when data is one complete gzip stream. */
static bool gzip_complete(const unsigned char *data, size_t len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 15 + 16) != Z_OK) return false;
  unsigned char out[16384];
  z.next_in = (unsigned char *)data;
  z.avail_in = (uInt)len;
  int rc;
  do {
    z.next_out = out;
    z.avail_out = sizeof out;
    rc = inflate(&z, Z_NO_FLUSH);
  } while (rc == Z_OK);
  bool ok = rc == Z_STREAM_END && z.avail_in == 0;
  inflateEnd(&z);
  return ok;
}

static void set_header(block_state *st, span s) {
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

static void finish_block(block_state *st, const pem_callbacks *cb,
                         size_t *good) {
  if (st->failed) return;
  if (st->nbits >= 6) {
    fail_block(st, cb, "truncated base64");
    return;
  }
  if (st->b.len == 0) {
    fail_block(st, cb, "empty block");
    return;
  }
  if (st->b.debug == 0 && !gzip_complete(st->data, st->b.len)) {
    fail_block(st, cb, "corrupt data: not a complete gzip stream");
    return;
  }
  st->b.data = st->data;
  if (cb->block) cb->block(&st->b, cb->ctx);
  (*good)++;
}

static void open_block(block_state *st, span line, const char *mark,
                       size_t lineno, const pem_callbacks *cb) {
  close_block(st);
  st->open = true;
  st->b.line = lineno;
  st->prefix = (span){line.p, (size_t)(mark - line.p)};
  span rest = {mark + 11, line.n - (size_t)(mark - line.p) - 11};
  const char *dash = find(rest, "-----");
  size_t n = dash ? (size_t)(dash - rest.p) : 0;
  if (!dash || n == 0 || n >= sizeof st->b.label || st->prefix.n > MAX_PREFIX) {
    snprintf(st->b.label, sizeof st->b.label, "PPROF ?");
    fail_block(st, cb, "malformed BEGIN line");
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
static bool block_content(const block_state *st, span line, span *out) {
  if (line.n >= st->prefix.n) {
    span rest = {line.p + st->prefix.n, line.n - st->prefix.n};
    bool same = memcmp(line.p, st->prefix.p, st->prefix.n) == 0;
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

size_t pem_scan(const char *text, size_t len, const pem_callbacks *cb) {
  block_state st;
  memset(&st, 0, sizeof st);
  size_t good = 0, lineno = 0;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    span line = {p, nl ? (size_t)(nl - p) : (size_t)(end - p)};
    p = nl ? nl + 1 : end;
    lineno++;
    if (line.n && line.p[line.n - 1] == '\r') line.n--;

    const char *mark = find(line, BEGIN_MARK);
    if (mark) {
      if (st.open) fail_block(&st, cb, "truncated: no END line before the next block");
      open_block(&st, line, mark, lineno, cb);
      continue;
    }
    if (!st.open) continue;
    span c;
    if (!block_content(&st, line, &c)) continue;
    if (starts_with(c, "-----END ")) {
      span want = {c.p + 9, c.n - 9};
      size_t ln = strlen(st.b.label);
      if (want.n != ln + 5 || memcmp(want.p, st.b.label, ln) != 0 ||
          memcmp(want.p + ln, "-----", 5) != 0)
        fail_block(&st, cb, "END line does not match BEGIN");
      else
        finish_block(&st, cb, &good);
      close_block(&st);
      continue;
    }
    if (st.failed) continue;
    if (!st.headers_done) {
      if (c.n == 0) {
        st.headers_done = true;
        continue;
      }
      if (is_header_line(c) && !is_base64_line(c)) {
        set_header(&st, c);
        continue;
      }
      st.headers_done = true;
    }
    const char *why = decode_line(&st, c);
    if (why) fail_block(&st, cb, why);
  }
  if (st.open) fail_block(&st, cb, "truncated: the log ends inside the block");
  close_block(&st);
  return good;
}
