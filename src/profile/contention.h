/*
 * The `mutex` and `block` profiles (profile/contention.c).
 */
#ifndef CPROF_PROFILE_CONTENTION_H
#define CPROF_PROFILE_CONTENTION_H

#include "profile/registry.h"

CPROF__HIDDEN extern const cprof__profile_def cprof__block_profile;
CPROF__HIDDEN extern const cprof__profile_def cprof__mutex_profile;

#endif
