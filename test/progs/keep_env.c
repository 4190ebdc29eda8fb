/*
 * A program that keeps its environment (cprof.h's cprof_keep_environment):
 * prints the variables named on its command line as it finds them, and
 * LD_PRELOAD, after cprof's constructor has run.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cprof.h"

#ifndef KEEP_ENV_OFF
CPROF_EXPORT const int cprof_keep_environment = 1;
#endif

int main(int argc, char **argv) {
  /* A call into the library, so that a static link brings it (and its
   * constructor) in. */
  cprof_buf none = {0};
  cprof_buf_free(&none);
  for (int i = 1; i < argc; i++) {
    const char *v = getenv(argv[i]);
    printf("%s=%s\n", argv[i], v ? v : "(unset)");
  }
  return 0;
}
