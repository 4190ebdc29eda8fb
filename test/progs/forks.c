/*
 * test/progs/plain_forks.c linked with cprof (the CMake rules link every
 * program not named plain_* with it): the same modes, for the builds where
 * preloading cannot be tested (TSan) and for the linked case itself.
 */
#include "plain_forks.c"
