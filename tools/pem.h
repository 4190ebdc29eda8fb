/*
 * Finding cprof's PEM blocks in a log, for `cprof extract`. A parser of
 * outside input (any log a user hands us): it tolerates arbitrary lines
 * around and between blocks, a log prefix repeated on every line of a
 * block, and reports each corrupt or truncated block with its line number
 * instead of stopping. It reads the log one line at a time and keeps only
 * the block being decoded, so a log of any size is scanned in bounded
 * memory: lines are cut at a maximum length and blocks at a maximum size.
 */
#ifndef CPROF_TOOLS_PEM_H
#define CPROF_TOOLS_PEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The longest line looked at; the rest of a longer line is ignored, and a
 * block with such a line is refused. cprof writes 64 characters of base64
 * per line, after a log prefix of at most PEM_MAX_PREFIX. */
#define PEM_MAX_LINE ((size_t)64 << 10)
#define PEM_MAX_PREFIX 256

typedef struct pem_block {
  char label[48];   /* after "BEGIN ", e.g. "PPROF HEAP" */
  char profile[32]; /* the Profile header, else the label's last word */
  long pid;         /* the Pid header, 0 when absent */
  long long seq;    /* the Seq header, 0 when absent */
  int debug;        /* the Debug header: 0 means gzipped pprof */
  size_t line;      /* the BEGIN line, counting from 1 */
  const unsigned char *data; /* the decoded bytes */
  size_t len;
} pem_block;

typedef struct pem_callbacks {
  /* A well-formed block (base64 valid; for debug 0, a complete gzip
   * stream of at most max_size bytes decompressed). */
  void (*block)(const pem_block *b, void *ctx);
  /* A block that could not be used: line is where it started. */
  void (*error)(size_t line, const char *label, const char *why, void *ctx);
  void *ctx;
  /* The largest block accepted, both decoded and, for pprof, decompressed
   * (0: PPROFDEC_MAX_SIZE). A larger one is reported as an error. */
  size_t max_size;
  /* The longest line looked at (0: PEM_MAX_LINE); the fuzzer makes it
   * small to reach the cuts. */
  size_t max_line;
  /* Added to the message of a block refused for its size, e.g. how to
   * raise the limit; NULL for nothing. */
  const char *limit_hint;
} pem_callbacks;

/* A scan in progress; the fields are pem.c's. */
typedef struct pem_scanner {
  const pem_callbacks *cb;
  size_t max_size, max_line;
  size_t lineno, good;
  bool open, headers_done, failed, padded;
  char prefix[PEM_MAX_PREFIX];
  size_t prefix_len;
  pem_block b;
  unsigned char *data;
  size_t cap;
  unsigned bits, nbits; /* base64 accumulator */
} pem_scanner;

void pem_begin(pem_scanner *s, const pem_callbacks *cb);

/* One line of the log, without its '\n' (a '\r' before it is dropped), of
 * at most the scanner's max_line bytes; cut says the line was longer and
 * this is its start. */
void pem_line(pem_scanner *s, const char *line, size_t n, bool cut);

/* The end of the log: a block still open is reported as truncated.
 * Returns the number of good blocks and frees what the scan held. */
size_t pem_end(pem_scanner *s);

/* Scans len bytes of log text, split into lines as pem_scan_file does.
 * Returns the number of good blocks. */
size_t pem_scan(const char *text, size_t len, const pem_callbacks *cb);

/* Scans f to its end, reading it in pieces of about max_line bytes.
 * Returns the number of good blocks in *good, and 0, or -1 when reading
 * failed (errno says why; the blocks before were reported). */
int pem_scan_file(FILE *f, const pem_callbacks *cb, size_t *good);

#endif
