/* The spawner built without cprof, to be run with libcprof.so preloaded. */
#define SPAWNER_PLAIN 1
#include "spawner.c"
