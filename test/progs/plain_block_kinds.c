/* block_kinds built without cprof, to be run with libcprof.so preloaded. */
#define BLOCK_PLAIN 1
#include "block_kinds.c"
