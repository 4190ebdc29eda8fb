/*
 * Text helpers shared by the library and the command-line tool (which
 * builds this file into itself, as curl's tool shares lib/curlx): base64.
 * Pure functions of their arguments; any context.
 */
#ifndef CPROF_TEXT_H
#define CPROF_TEXT_H

#include <stddef.h>

/* Bytes one base64 line encodes: 48, in 64 characters (PEM's width). */
#define CPROF__BASE64_LINE_BYTES 48

/* Encodes n bytes of in (n <= CPROF__BASE64_LINE_BYTES for one line, any
 * n for a whole text without line breaks) into out, with '=' padding;
 * returns the characters written: 4 * ceil(n / 3). No terminator. */
size_t cprof__base64(const unsigned char *in, size_t n, char *out);

/* The value (0..63) of a base64 character, or -1 for any other byte ('='
 * included). */
int cprof__base64_value(unsigned char c);

#endif
