/* mutex_contend built without cprof, to be run with libcprof.so
 * preloaded. */
#define MUTEX_PLAIN 1
#include "mutex_contend.c"
