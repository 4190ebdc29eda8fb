/*
 * libFuzzer target for the CFI table builder. An input is two
 * little-endian uint32s, the offset of .eh_frame_hdr in the image and the
 * number of zero bytes the image starts with (at most 1 MiB; an object's
 * code lies there, which the builder never reads, so the corpus need not
 * carry it), then the rest of the image: an object's memory from vaddr
 * `skip` on, .eh_frame_hdr and .eh_frame included. The image is a heap
 * buffer of exactly its size, so ASan sees any read past the end. It
 * checks the builder's promises: only CPROF_EINVAL or success, a table
 * exactly on success, rows that strictly increase and are bounded by the
 * input's size, neighbours with different rules, a NONE row last, rules of
 * a known kind with every field the kind does not use zero, and a lookup
 * anywhere in a row's range (at its page starts too, where the page
 * index bounds the search) finding that row's rule. A table built is
 * saved as an unwind-cache entry and loaded back, row for row the same,
 * and a lookup at each row's page start finds the same rule in both;
 * and the input itself is loaded as an entry (any bytes may be one on
 * disk), from memory and from a file (mapped, as the cache's are): the
 * rules of a table loaded keep the same promises, its last row has none,
 * and every lookup finds a rule that keeps them, reading nothing outside
 * the table (its rows are checked as lookups use them).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "capture/cfi.h"
#include "capture/cfi_build.h"

static void check_rule(const cprof__cfi_rule *r) {
  if (r->reserved != 0) abort();
  switch (r->kind) {
    case CPROF__CFI_NONE:
    case CPROF__CFI_SIGNAL:
    case CPROF__CFI_END:
    case CPROF__CFI_UNSUPPORTED:
      if (r->fp_saved || r->plt_split || r->cfa_off || r->fp_off) abort();
      break;
    case CPROF__CFI_PLT:
      if (r->plt_split > 15) abort();
      /* fall through */
    case CPROF__CFI_RSP:
    case CPROF__CFI_RBP:
      if (r->kind != CPROF__CFI_PLT && r->plt_split) abort();
      if (r->fp_saved > 1 || (!r->fp_saved && r->fp_off)) abort();
      break;
    default:
      abort();
  }
}

static void check_find(const cprof__cfi_table *t, uintptr_t off,
                       const cprof__cfi_rule *want) {
  cprof__cfi_rule got;
  bool found = cprof__cfi_table_find(t, off, &got);
  if (memcmp(&got, want, sizeof got) != 0) abort();
  if (found != (want->kind != CPROF__CFI_NONE)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The promises every table keeps; merged: neighbours differ. */
static void check_table(const cprof__cfi_table *t, bool merged) {
  size_t n = cprof__cfi_table_rows(t);
  if (cprof__cfi_table_bytes(t) < n * 6) abort();
  static const cprof__cfi_rule none = {0};
  uint32_t pc = 0, prev_pc = 0;
  cprof__cfi_rule r, prev = {0};
  for (size_t i = 0; i < n; i++) {
    if (!cprof__cfi_table_row(t, i, &pc, &r)) abort();
    check_rule(&r);
    if (i == 0) {
      if (merged && r.kind == CPROF__CFI_NONE) abort();
      if (pc > 0) check_find(t, pc - 1, &none);
    } else {
      if (pc <= prev_pc) abort();
      if (merged && memcmp(&r, &prev, sizeof r) == 0) abort();
      check_find(t, pc - 1, &prev);
      check_find(t, prev_pc + (pc - prev_pc) / 2, &prev);
      /* The first and the last page start inside the row's range (the
       * page index's bounds). */
      uint32_t first = (prev_pc | 4095u) + 1, last = (pc - 1) & ~4095u;
      if (first > prev_pc && first < pc) check_find(t, first, &prev);
      if (last > prev_pc) check_find(t, last, &prev);
    }
    check_find(t, pc, &r);
    prev = r;
    prev_pc = pc;
  }
  if (n > 0 && prev.kind != CPROF__CFI_NONE) abort();
  if (n > 0) check_find(t, (uintptr_t)prev_pc + 12345, &none);
  if (cprof__cfi_table_row(t, n, &pc, &r)) abort();
}

/* bytes as a cache entry's file (a memory file, mapped as the cache's
 * are) read by cprof__cfi_table_read: its result, or -1 when there is no
 * file to read. */
static int read_entry(const void *bytes, size_t len, uint64_t hdr,
                      const char *tag, cprof__cfi_table **out) {
  static int fd = -2;
  if (fd == -2) fd = memfd_create("fuzz_cfi", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 ||
      pwrite(fd, bytes, len, 0) != (ssize_t)len)
    return -1;
  return cprof__cfi_table_read(fd, len, hdr, tag, out);
}

/* A table read from bytes: its rules were checked, its rows are checked
 * as lookups use them. Every row and every lookup around it gives a rule
 * that keeps the promises, and reads nothing outside the table. */
static void check_loaded(const cprof__cfi_table *t) {
  size_t n = cprof__cfi_table_rows(t);
  uint32_t pc;
  cprof__cfi_rule r;
  for (size_t i = 0; i < n; i++) {
    if (!cprof__cfi_table_row(t, i, &pc, &r)) abort();
    check_rule(&r);
    const uintptr_t at[3] = {pc, (uintptr_t)pc - 1, (uintptr_t)pc + 1};
    for (size_t k = 0; k < 3; k++) {
      bool found = cprof__cfi_table_find(t, at[k], &r);
      check_rule(&r);
      if (found != (r.kind != CPROF__CFI_NONE)) abort();
    }
  }
  if (n > 0 && (!cprof__cfi_table_row(t, n - 1, &pc, &r) ||
                r.kind != CPROF__CFI_NONE))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char tag[] = "cfi 1 fuzz";
  cprof__cfi_table *loaded = NULL;
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  int lrc = cprof__cfi_table_load(copy, size, 0, tag, &loaded);
  if ((lrc == 0) != (loaded != NULL)) abort();
  if (loaded) check_loaded(loaded);
  cprof__cfi_table_free(loaded);
  free(copy);
  /* The same bytes as a file, read as the cache reads an entry. */
  cprof__cfi_table *read = NULL;
  int rrc = read_entry(data, size, 0, tag, &read);
  if (rrc != -1) {
    if ((rrc == 0) != (read != NULL) || (rrc == 0) != (lrc == 0)) abort();
    if (read) check_loaded(read);
    cprof__cfi_table_free(read);
  }

  if (size < 8) return 0;
  uint32_t hdr_off, skip;
  memcpy(&hdr_off, data, 4);
  memcpy(&skip, data + 4, 4);
  skip &= (1u << 20) - 1;
  size_t len = skip + (size - 8);
  uint8_t *img = calloc(len ? len : 1, 1);
  if (!img) return 0;
  memcpy(img + skip, data + 8, size - 8);

  cprof__cfi_table *t = NULL;
  int rc = cprof__cfi_table_build(img, len, hdr_off, &t);
  if (rc != 0 && rc != CPROF_EINVAL) abort();
  if ((rc == 0) != (t != NULL)) abort();
  if (t) {
    size_t n = cprof__cfi_table_rows(t);
    /* A row needs an advance byte or an FDE of at least 10 bytes. */
    if (n > len + 2) abort();
    check_table(t, true);
    if (n > 0) {
      cprof_buf buf = {0};
      cprof__cfi_table *back = NULL, *reread = NULL;
      if (cprof__cfi_table_save(t, hdr_off, tag, &buf) != 0 ||
          cprof__cfi_table_load(buf.data, buf.len, hdr_off, tag, &back) != 0 ||
          cprof__cfi_table_rows(back) != n)
        abort();
      int rerc = read_entry(buf.data, buf.len, hdr_off, tag, &reread);
      if (rerc != -1 && (rerc != 0 || cprof__cfi_table_rows(reread) != n)) abort();
      for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        cprof__cfi_rule ra, rb;
        if (!cprof__cfi_table_row(t, i, &a, &ra) ||
            !cprof__cfi_table_row(back, i, &b, &rb) || a != b ||
            memcmp(&ra, &rb, sizeof ra) != 0)
          abort();
        if (reread && (!cprof__cfi_table_row(reread, i, &b, &rb) ||
                       a != b || memcmp(&ra, &rb, sizeof ra) != 0))
          abort();
        /* Its page index too: a lookup finds what the built one does. */
        cprof__cfi_rule fa, fb;
        uint32_t at = a & ~4095u;
        if (cprof__cfi_table_find(t, at, &fa) !=
                cprof__cfi_table_find(back, at, &fb) ||
            memcmp(&fa, &fb, sizeof fa) != 0)
          abort();
      }
      cprof__cfi_table_free(back);
      cprof__cfi_table_free(reread);
      cprof_buf_free(&buf);
    }
  }
  cprof__cfi_table_free(t);
  free(img);
  return 0;
}
