/*
 * libFuzzer target for the symbolizer's reading of an object: an input is
 * an ELF file (a library, executable or separate debug file, which may be
 * anything a user's disk holds), given to libdw offline and resolved as
 * the symbolizer resolves a loaded object's addresses: symbol tables (the
 * sized and sizeless symbols, their sections), DWARF scopes and inlined
 * levels, line tables, PLT stubs and their relocations, and the
 * .eh_frame_hdr table of an object without symbols
 * (cprof__sym_scan_image). It checks that every frame has its strings,
 * and ASan that nothing reads outside what libdw and the input give.
 * The corpus holds small objects built with and without debug
 * information.
 */
#include <stdint.h>
#include <stdlib.h>

#include "encode/symbolize.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t resolved = 0;
  int err = cprof__sym_scan_image(data, size, &resolved);
  if (err != 0 && resolved != 0) abort();
  return 0;
}
