/*
 * libFuzzer target for the debug cache's rewriting of a separate debug
 * file (encode/debug_cache.c): an input is an ELF file as a user's disk
 * may hold one under /usr/lib/debug, whose section headers, compression
 * headers and zlib streams are all outside cprof's control. The copy is
 * written to a memory file; ASan checks that nothing is read outside the
 * input, and the target that a copy written is at least the input and
 * that an input without compressed sections is reported as such. The
 * corpus holds a small debug file with zlib-compressed sections.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "encode/debug_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int out = -1;
  if (out < 0) out = memfd_create("fuzz_debug_cache", MFD_CLOEXEC);
  if (out < 0) abort();
  if (ftruncate(out, 0) != 0) abort();
  int rc = cprof__debug_cache_inflate(data, size, out, 64u << 20);
  struct stat st;
  if (fstat(out, &st) != 0) abort();
  if (rc == 1 && (size_t)st.st_size < size) abort();
  if (rc != 1 && rc != 0 && rc != -1) abort();
  /* Asked only whether there is a copy to write, it writes nothing. */
  int dry = cprof__debug_cache_inflate(data, size, -1, 64u << 20);
  if (rc == 0 && dry != 0) abort();
  return 0;
}
