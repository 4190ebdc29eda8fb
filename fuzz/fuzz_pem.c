/*
 * Fuzzes the PEM block scanner behind `cprof extract` with arbitrary logs,
 * and the bounded gunzip it checks pprof blocks with: nothing may read out
 * of bounds, every block reported must be well formed and within the size
 * limit, reading the log from a stream (cut into lines in pieces, as
 * `cprof extract` does) must report exactly what scanning it in memory
 * does, and a block's gzip data must be accepted exactly when the bounded
 * gunzip accepts it. The last bytes of the input choose small limits (line
 * length, block size) so that the cuts and the refusals are reached.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pem.h"
#include "pprofdec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a scan reported, folded into a hash so two scans can be compared. */
typedef struct events {
  const pem_callbacks *cb;
  uint64_t hash;
  size_t blocks, errors;
} events;

static void mix(events *e, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) e->hash = (e->hash ^ c[i]) * 1099511628211ull;
}

static void on_block(const pem_block *b, void *ctx) {
  events *e = ctx;
  size_t max = e->cb->max_size ? e->cb->max_size : PPROFDEC_MAX_SIZE;
  if (b->len == 0 || b->len > max || !b->data || b->line == 0) abort();
  if (b->debug == 0) {
    char err[128];
    size_t n;
    if (pprofdec_gunzip(b->data, b->len, max, NULL, &n, err, sizeof err) != 0 ||
        n > max)
      abort();
  }
  e->blocks++;
  mix(e, "B", 1);
  mix(e, &b->line, sizeof b->line);
  mix(e, b->label, strlen(b->label));
  mix(e, b->profile, strlen(b->profile));
  mix(e, &b->pid, sizeof b->pid);
  mix(e, &b->seq, sizeof b->seq);
  mix(e, &b->debug, sizeof b->debug);
  mix(e, b->data, b->len);
}

static void on_error(size_t line, const char *label, const char *why,
                     void *ctx) {
  events *e = ctx;
  if (line == 0 || !label || !why || !*why) abort();
  e->errors++;
  mix(e, "E", 1);
  mix(e, &line, sizeof line);
  mix(e, label, strlen(label));
  mix(e, why, strlen(why));
}

/* Scans the log in memory and from a stream, which must agree. */
static void scan_both(const uint8_t *data, size_t size, size_t max_size,
                      size_t max_line) {
  pem_callbacks cb = {on_block, on_error, NULL, max_size, max_line, NULL};
  events mem = {&cb, 14695981039346656037ull, 0, 0};
  cb.ctx = &mem;
  size_t good = pem_scan((const char *)data, size, &cb);
  if (good != mem.blocks) abort();
  if (size == 0) return; /* fmemopen wants a buffer */
  FILE *f = fmemopen((void *)data, size, "rb");
  if (!f) return;
  events file = {&cb, 14695981039346656037ull, 0, 0};
  cb.ctx = &file;
  size_t fgood;
  int rc = pem_scan_file(f, &cb, &fgood);
  fclose(f);
  if (rc != 0 || fgood != good || file.hash != mem.hash ||
      file.errors != mem.errors)
    abort();
}

/* The bounded gunzip on the raw input: measuring and inflating agree,
 * neither passes the limit, and a stream of n bytes is accepted under a
 * limit of n and refused, as too big, under n - 1. */
static void gunzip_bounded(const uint8_t *data, size_t size, size_t max) {
  char err[128];
  size_t measured = 0, n = 0;
  unsigned char *out = NULL;
  int a = pprofdec_gunzip(data, size, max, NULL, &measured, err, sizeof err);
  int b = pprofdec_gunzip(data, size, max, &out, &n, err, sizeof err);
  if (a != b || (a == 0 && (n != measured || n > max))) abort();
  if (a != 0 && (!memchr(err, 0, sizeof err) || !err[0])) abort();
  free(out);
  if (pprofdec_gunzip(data, size, (size_t)1 << 20, NULL, &n, err,
                      sizeof err) != 0)
    return;
  if (pprofdec_gunzip(data, size, n ? n : 1, NULL, &measured, err,
                      sizeof err) != 0 ||
      measured != n)
    abort();
  if (n > 1 && pprofdec_gunzip(data, size, n - 1, NULL, &measured, err,
                               sizeof err) != PPROFDEC_ETOOBIG)
    abort();
}

/* The input as the data of one block: good exactly when it is a complete
 * gzip stream within the limit. */
static void as_block(const uint8_t *data, size_t size, size_t max) {
  static const char b64[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static const char begin[] = "-----BEGIN PPROF HEAP-----\n\n";
  static const char end[] = "\n-----END PPROF HEAP-----\n";
  size_t cap = sizeof begin + (size + 2) / 3 * 4 + size / 48 + sizeof end;
  char *log = malloc(cap), *p = log;
  if (!log) return;
  memcpy(p, begin, sizeof begin - 1);
  p += sizeof begin - 1;
  for (size_t i = 0; i < size; i += 3) {
    uint32_t v = (uint32_t)data[i] << 16;
    if (i + 1 < size) v |= (uint32_t)data[i + 1] << 8;
    if (i + 2 < size) v |= data[i + 2];
    *p++ = b64[v >> 18 & 63];
    *p++ = b64[v >> 12 & 63];
    *p++ = i + 1 < size ? b64[v >> 6 & 63] : '=';
    *p++ = i + 2 < size ? b64[v & 63] : '=';
    if ((i / 3 + 1) % 16 == 0 && i + 3 < size) *p++ = '\n';
  }
  memcpy(p, end, sizeof end - 1);
  p += sizeof end - 1;
  pem_callbacks cb = {on_block, on_error, NULL, max, 0, " (hint)"};
  events e = {&cb, 0, 0, 0};
  cb.ctx = &e;
  pem_scan(log, (size_t)(p - log), &cb);
  free(log);
  char err[128];
  size_t n;
  bool ok = size > 0 && size <= max &&
            pprofdec_gunzip(data, size, max, NULL, &n, err, sizeof err) == 0;
  if (e.blocks + e.errors != 1 || (e.blocks == 1) != ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The defaults first, as `cprof extract` runs. */
  scan_both(data, size, 0, 0);
  /* Then limits small enough to be reached, chosen by the last two bytes
   * (a log's last byte is usually '\n', which keeps lines long). */
  uint8_t last = size ? data[size - 1] : 0;
  uint8_t prev = size > 1 ? data[size - 2] : 0;
  size_t max_line = last == '\n' ? 0 : 1 + last % 128;
  size_t max_size = 256 * (1 + (size_t)(prev % 16));
  scan_both(data, size, max_size, max_line);
  gunzip_bounded(data, size, max_size);
  as_block(data, size, max_size);
  return 0;
}
