#!/usr/bin/env bash
# The fault tests (test/progs/faults.c, test/progs/cxx_throw.cc): fork with
# and without exec, dlopen/dlclose loops, threads exiting during goroutine
# dumps, threads blocking every signal, the program's own SIGUSR1 handler,
# recursion past the depth cap, code without frame pointers, C++ exceptions
# at 1000 Hz, and an allocator returning NULL under full sampling.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/faults

run_mode() { # MODE [ARGS]: must exit 0
  if ! "$prog" "$@" >"$TMP/$1.out" 2>"$TMP/$1.err"; then
    tail -30 "$TMP/$1.err"
    fail "faults $1"
  fi
  tail -1 "$TMP/$1.err"
  checks=$((checks + 1))
}

run_mode fork
run_mode dlopen "$CPROFTEST_BUILD/test/progs/libdlo.so"
pprof -top "$TMP/dlopen.out" >"$TMP/dlopen.top"
expect_match "$TMP/dlopen.top" ' dlo_spin$' "a function of a reloaded library is named in the CPU profile"
run_mode exits
run_mode blocked
# With perf events the spinning threads that block every signal are
# sampled all the same; without, they are reported, not waited for.
expect_match "$TMP/blocked.err" '^(blocking_thread|burn)\(\.\.\.\)$|cprof_thread_blocks_signal' "threads that block the signal are sampled by perf events, or reported"
CPROF_PERF_EVENTS=0 "$CPROFTEST_BUILD/test/progs/faults" blocked 2>"$TMP/blocked0.err" >/dev/null || { cat "$TMP/blocked0.err"; fail "faults blocked with CPROF_PERF_EVENTS=0"; }
expect_match "$TMP/blocked0.err" 'cprof_thread_blocks_signal' "CPROF_PERF_EVENTS=0: threads that block the signal are reported, not waited for"
run_mode handlers
run_mode deep
pprof -top "$TMP/deep.out" >"$TMP/deep.top"
expect_match "$TMP/deep.top" '\[cprof: stack truncated\]' "stacks deeper than the cap end in the truncation frame"
run_mode nofp
run_mode oom
"$CPROFTEST_BUILD/test/progs/cxx_throw" >"$TMP/throw.out" 2>&1 || { cat "$TMP/throw.out"; fail "C++ exceptions while profiling"; }
cat "$TMP/throw.out"
checks=$((checks + 1))
finish
