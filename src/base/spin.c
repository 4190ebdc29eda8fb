/*
 * The spin locks' pid cache (spin.h), defined apart from the fork
 * handlers that keep it (fork.c), so that every user of a spin lock, own
 * heap included, depends on this file and not on the fork sequence that
 * calls the own heap's handlers. Data only.
 */
#include "base/spin.h"

_Atomic int cprof__pid_cache;
