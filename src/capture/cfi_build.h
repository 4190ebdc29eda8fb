/*
 * The CFI table builder (cfi_build.c): one object's .eh_frame_hdr and
 * .eh_frame interpreted into a compact table of rows. Normal context only,
 * never in a signal handler. The index of loaded objects (cfi_index.c)
 * builds each object's table from a copy of its unwind data; the fuzzer
 * and the unit tests build from a buffer. The table's layout is declared
 * here for the lookup (cfi_find.c), which searches it.
 */
#ifndef CPROF_CFI_BUILD_H
#define CPROF_CFI_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture/cfi.h"
#include "cprof.h"

/* A table, immutable once built: nrows rows, row i holding from pc[i] (an
 * offset from the load base) up to pc[i + 1] with the rule
 * rules[rule[i]]. One allocation of bytes bytes holds the header and the
 * arrays. eh_bytes, fdes and fdes_bad are figures for the stats.
 *
 * The page index narrows a lookup to the rows of one page of code before
 * its binary search: page[j], for j from 0 to npages, is the last row at
 * or below the start of page page_base + j (0 when none is), so the row of
 * an offset in that page lies between page[j] and page[j + 1]. Without
 * it, a lookup in a large object's table (a compiler's 500,000 rows) took
 * a cache miss at each of 19 steps. npages is 0 (no index) when the rows
 * are too sparse for one. */
#define CPROF__CFI_PAGE_SHIFT 12
struct cprof__cfi_table {
  uint32_t nrows, nrules;
  size_t bytes;
  void *map; /* the cache entry its arrays lie in (mapped), or NULL */
  size_t map_len;
  size_t eh_bytes, fdes, fdes_bad;
  const uint32_t *pc;
  const uint16_t *rule;
  const cprof__cfi_rule *rules;
  const uint32_t *page; /* npages + 1 entries, or NULL */
  uint32_t npages, page_base;
};

/* Readable segments an image may have; real objects have 2 to 5. */
#define CPROF__CFI_MAX_SEGS 16

/* An object's memory image: the byte at vaddr v is at host + v when v lies
 * in one of the readable segments. */
typedef struct cprof__cfi_image {
  uintptr_t host;
  struct {
    uint64_t lo, hi;
  } segs[CPROF__CFI_MAX_SEGS];
  size_t nsegs;
} cprof__cfi_image;

/* The bytes [v, v + n), or NULL unless they lie inside one segment; *avail
 * (when avail is not NULL) gets how many bytes from v the segment holds.
 * Reads nothing of the image itself. */
CPROF__HIDDEN const uint8_t *cprof__cfi_img_span(const cprof__cfi_image *im,
                                                 uint64_t v, uint64_t n,
                                                 uint64_t *avail);

/* The address of .eh_frame that the .eh_frame_hdr at vaddr hdr names,
 * read from h, a copy of the header's first n bytes. False when the header
 * is not version 1, names no .eh_frame, or its pointer is not all in h. */
CPROF__HIDDEN bool cprof__cfi_hdr_eh_frame(const uint8_t *h, size_t n,
                                           uint64_t hdr, uint64_t *eh);

/* What the builder keeps of each CIE and FDE (cfi_build.c). */
struct cprof__cfi_cie;
struct cprof__cfi_fde;

/* Everything one build needs; the arrays are reused from object to object
 * within a refresh. Its fields belong to cfi_build.c: a caller starts from
 * a zeroed builder, may read fdes_bad after a build (the last build's
 * dropped FDEs) and frees it with cprof__cfi_builder_free. */
typedef struct cprof__cfi_builder {
  const cprof__cfi_image *im;
  uint64_t hdr; /* vaddr of .eh_frame_hdr: the datarel base */
  uint64_t eh_lo, eh_hi; /* the span of .eh_frame records seen */

  struct cprof__cfi_cie *cies;
  size_t ncies, cies_cap;
  uint32_t *cie_hash; /* index + 1; 0 = empty slot */
  size_t cie_hash_cap;

  struct cprof__cfi_fde *fdes;
  size_t nfdes, fdes_cap;

  uint32_t *pcs;
  uint16_t *ridx;
  size_t nrows, rows_cap;
  cprof__cfi_rule *rules;
  size_t nrules, rules_cap;
  uint32_t *rule_hash;
  size_t rule_hash_cap;

  cprof__cfi_rule last; /* the rule of the last row */
  bool pending;         /* a row not yet appended: a later rule at the */
  uint32_t pend_pc;     /* same pc replaces it */
  cprof__cfi_rule pend;
  uint64_t covered; /* rows describe everything below this */
  uint64_t clip;    /* the current FDE's rows start no lower */

  /* Instruction bytes left to interpret. Records may overlap, so a
   * crafted image could have far more bytes of programs than it has
   * bytes; real objects stay far below this. */
  uint64_t budget;

  size_t fdes_ok, fdes_bad;
  bool oom;
} cprof__cfi_builder;

/* Builds the table of one image, whose .eh_frame_hdr is at vaddr hdr.
 * Returns 0, CPROF_EINVAL or CPROF_ENOMEM; a table may have no rows. */
CPROF__HIDDEN int cprof__cfi_build(cprof__cfi_builder *b,
                                   const cprof__cfi_image *im, uint64_t hdr,
                                   cprof__cfi_table **out);

/* Frees the builder's arrays and zeroes it. */
CPROF__HIDDEN void cprof__cfi_builder_free(cprof__cfi_builder *b);

/*
 * The builder over a bounded buffer, for the fuzzer and the unit tests. img
 * holds an object's memory image with vaddr 0 at img[0]; .eh_frame_hdr
 * starts at hdr_off. Every read stays inside [img, img + len). Returns 0,
 * CPROF_EINVAL (no usable CFI), CPROF_EUNSUPPORTED (len beyond 4 GiB) or
 * CPROF_ENOMEM. A table with no FDE is still a table (of no rows).
 */
CPROF__HIDDEN int cprof__cfi_table_build(const uint8_t *img, size_t len,
                                         size_t hdr_off,
                                         cprof__cfi_table **out);
/* The number of rows, and row i (false when i is out of range): the rule
 * holds from *pc up to the next row's pc; the last row is always NONE. */
CPROF__HIDDEN size_t cprof__cfi_table_rows(const cprof__cfi_table *t);
CPROF__HIDDEN bool cprof__cfi_table_row(const cprof__cfi_table *t, size_t i,
                                        uint32_t *pc, cprof__cfi_rule *out);
/* The table's size in bytes, header included. */
CPROF__HIDDEN size_t cprof__cfi_table_bytes(const cprof__cfi_table *t);
CPROF__HIDDEN void cprof__cfi_table_free(cprof__cfi_table *t);

/* A table as an entry of the unwind tables' cache (cfi_index.c): save
 * writes t, built from the .eh_frame_hdr at vaddr hdr by a builder that
 * tag names, to out (emptied first); load makes a table of
 * data[0..len) when it is such an entry for the same hdr and tag and
 * every rule and row in it is one a build could make (known kinds, unused
 * fields zero, rule indexes in range, pcs increasing, the last row's rule
 * none): any bytes may be given (fuzz/fuzz_cfi.c). 0, CPROF_EINVAL or
 * CPROF_ENOMEM. */
CPROF__HIDDEN int cprof__cfi_table_save(const cprof__cfi_table *t,
                                        uint64_t hdr, const char *tag,
                                        cprof_buf *out);
CPROF__HIDDEN int cprof__cfi_table_load(const void *data, size_t len,
                                        uint64_t hdr, const char *tag,
                                        cprof__cfi_table **out);
/* The same from the entry open at fd, len bytes long (its whole size):
 * its arrays are used in place, the file mapped read-only. */
CPROF__HIDDEN int cprof__cfi_table_read(int fd, size_t len, uint64_t hdr,
                                        const char *tag,
                                        cprof__cfi_table **out);

#endif
