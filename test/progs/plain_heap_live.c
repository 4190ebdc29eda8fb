/* The live-set program built without cprof, for LD_PRELOAD. */
#define HEAP_LIVE_PLAIN 1
#include "heap_live.c"
