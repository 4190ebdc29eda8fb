/*
 * The `threadcreate` profile (profile/threadcreate.c).
 */
#ifndef CPROF_PROFILE_THREADCREATE_H
#define CPROF_PROFILE_THREADCREATE_H

#include "profile/registry.h"

CPROF__HIDDEN extern const cprof__profile_def cprof__threadcreate_profile;

#endif
