/*
 * A toy windowed profile, "toy", the worked example of docs/design.md's
 * recipe for a profile (test/e2e/recipe.sh adds it to a copy of the tree):
 * over a window, every thread's stack at the window's end, weighed by the
 * window's length.
 */
#ifndef CPROF_PROFILE_TOY_H
#define CPROF_PROFILE_TOY_H

#include "profile/registry.h"

CPROF__HIDDEN extern const cprof__profile_def cprof__toy_profile;

#endif
