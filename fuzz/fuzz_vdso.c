/*
 * libFuzzer target for the vDSO symbol reader (encode/vdso.h): the input
 * as an ELF image, from a heap copy of exactly its size so ASan sees any
 * read past the end, looked up at offsets spread over it. It checks the
 * reader's promises: a name it gives is NUL-terminated inside the image
 * and not empty, and its function starts at or before the offset asked.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encode/vdso.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *image = malloc(size ? size : 1);
  if (!image) return 0;
  memcpy(image, data, size);
  size_t step = size / 64 + 1;
  for (size_t off = 0; off <= size; off += step) {
    cprof__vdso_sym s;
    if (!cprof__vdso_symbol(image, size, off, &s)) continue;
    const unsigned char *name = (const unsigned char *)s.name;
    if (name < image || name >= image + size || !*name ||
        !memchr(name, '\0', (size_t)(image + size - name)) || s.start > off)
      abort();
  }
  free(image);
  return 0;
}
