/* The semantics program built without cprof, to be run plain and with
 * libcprof.so preloaded. */
#include "heap_semantics.c"
