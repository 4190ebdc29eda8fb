/*
 * The `heap` and `allocs` profiles (profile/heap.c).
 */
#ifndef CPROF_PROFILE_HEAP_H
#define CPROF_PROFILE_HEAP_H

#include "profile/registry.h"

CPROF__HIDDEN extern const cprof__profile_def cprof__heap_profile;
CPROF__HIDDEN extern const cprof__profile_def cprof__allocs_profile;

#endif
