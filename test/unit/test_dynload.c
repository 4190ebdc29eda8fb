/*
 * Loading optional libraries on first use: a library that loads resolves
 * every symbol and calls through; a missing library or a missing symbol is
 * CPROF_EUNSUPPORTED with a reason naming it, and the first result sticks.
 */
#include <cprof.h>
#include <zlib.h>

#include "base/dynload.h"
#include "testutil.h"

static void test_loads(void) {
  /* zlib: libcprof already depends on it, so it is always there. */
  __typeof__(zlibVersion) *version = NULL;
  __typeof__(crc32) *crc = NULL;
  const cprof__dynsym syms[] = {{"zlibVersion", (void **)&version},
                                {"crc32", (void **)&crc}};
  static const char *const names[] = {"libcprof-missing.so.9", "libz.so.1",
                                      NULL};
  cprof__dynlib lib = {names, syms, CPROF__ARRAY_LEN(syms), 0, ""};
  CHECK_EQ_INT(cprof__dynload(&lib), 0);
  CHECK(version != NULL && crc != NULL);
  if (version) CHECK_STREQ(version(), zlibVersion());
  if (crc) CHECK_EQ_INT(crc(0, (const unsigned char *)"abc", 3), 0x352441c2);
  CHECK_EQ_INT(cprof__dynload(&lib), 0); /* again: the same answer */
}

static void test_missing_library(void) {
  void *f = NULL;
  const cprof__dynsym syms[] = {{"anything", &f}};
  static const char *const names[] = {"libcprof-missing.so.9", NULL};
  cprof__dynlib lib = {names, syms, 1, 0, ""};
  CHECK_EQ_INT(cprof__dynload(&lib), CPROF_EUNSUPPORTED);
  CHECK(strstr(lib.why, "cannot load libcprof-missing.so.9") != NULL);
  CHECK(f == NULL);
  CHECK_EQ_INT(cprof__dynload(&lib), CPROF_EUNSUPPORTED);
}

static void test_missing_symbol(void) {
  void *a = NULL, *b = NULL;
  const cprof__dynsym syms[] = {{"zlibVersion", &a},
                                {"cprof_no_such_function", &b}};
  static const char *const names[] = {"libz.so.1", NULL};
  cprof__dynlib lib = {names, syms, 2, 0, ""};
  CHECK_EQ_INT(cprof__dynload(&lib), CPROF_EUNSUPPORTED);
  CHECK_STREQ(lib.why, "libz.so.1 has no cprof_no_such_function");
}

int main(void) {
  RUN(test_loads);
  RUN(test_missing_library);
  RUN(test_missing_symbol);
  return TEST_RESULT();
}
