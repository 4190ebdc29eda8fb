/*
 * Finding cprof's PEM blocks in a log, for `cprof extract`. A parser of
 * outside input (any log a user hands us): it tolerates arbitrary lines
 * around and between blocks, a log prefix repeated on every line of a
 * block, and reports each corrupt or truncated block with its line number
 * instead of stopping.
 */
#ifndef CPROF_TOOLS_PEM_H
#define CPROF_TOOLS_PEM_H

#include <stddef.h>

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
   * stream). */
  void (*block)(const pem_block *b, void *ctx);
  /* A block that could not be used: line is where it started. */
  void (*error)(size_t line, const char *label, const char *why, void *ctx);
  void *ctx;
} pem_callbacks;

/* Scans len bytes of log text. Returns the number of good blocks. */
size_t pem_scan(const char *text, size_t len, const pem_callbacks *cb);

#endif
