/*
 * libFuzzer target for the pprof merger (src/encode/pprof_merge.c). The
 * input is split into one to three parts: its first byte gives the number
 * of parts (its low two bits, 0 counting as 1) and whether they are named
 * and commented (the next bits), then each part but the last takes a
 * three-byte little-endian length (cut to what is left) and that many
 * bytes, and the last part takes the rest. Each part is copied to a heap
 * block of exactly its size, so ASan sees any read past its end. The
 * merger must return 0 or an error with a one-line message; a merged
 * profile must merge again (the output is a profile the merger itself
 * accepts) and decode with the pprof reader behind `cprof top`.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encode/pprof_merge.h"
#include "pprofdec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned flags = data[0];
  size_t nparts = flags & 3;
  if (nparts == 0) nparts = 1;
  data++;
  size--;

  cprof__merge_part parts[3];
  unsigned char *copies[3] = {NULL, NULL, NULL};
  static const char *const names[3] = {"alpha", "", "gamma"};
  for (size_t i = 0; i < nparts; i++) {
    size_t len = size;
    if (i + 1 < nparts) {
      len = 0;
      for (size_t k = 0; k < 3 && size > 0; k++, data++, size--)
        len |= (size_t)data[0] << (8 * k);
      if (len > size) len = size;
    }
    copies[i] = malloc(len ? len : 1);
    if (!copies[i]) abort();
    memcpy(copies[i], data, len);
    parts[i] = (cprof__merge_part){copies[i], len, (int64_t)i * 1000 - 1,
                                   (flags & 4) ? names[i] : NULL};
    data += len;
    size -= len;
  }
  const char *comments[] = {"fuzz", "fuzz"};
  size_t ncomments = (flags & 8) ? 2 : 0;

  cprof_buf out = {0};
  char err[128];
  memset(err, 'x', sizeof err);
  int rc = cprof__pprof_merge(parts, nparts, comments, ncomments, &out, err,
                              sizeof err);
  if (rc != 0) {
    if (rc != CPROF_EINVAL && rc != CPROF_ENOMEM) abort();
    if (!memchr(err, 0, sizeof err) || !err[0] || strchr(err, '\n')) abort();
    if (out.len != 0) abort();
  } else {
    if (out.len < 2 || out.data[0] != 0x1f || out.data[1] != 0x8b) abort();
    /* The merger's output is a profile the merger accepts. */
    cprof__merge_part again = {out.data, out.len, 7, "again"};
    cprof_buf out2 = {0};
    if (cprof__pprof_merge(&again, 1, NULL, 0, &out2, err, sizeof err) != 0)
      abort();
    cprof_buf_free(&out2);
    pprofdec_profile p;
    if (pprofdec_decode(out.data, out.len, &p, err, sizeof err) == 0)
      pprofdec_free(&p);
  }
  cprof_buf_free(&out);
  for (size_t i = 0; i < nparts; i++) free(copies[i]);
  return 0;
}
