/* The address-space program built without cprof, for LD_PRELOAD. */
#define RESERVE_PLAIN 1
#include "reserve.c"
