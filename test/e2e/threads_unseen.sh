#!/usr/bin/env bash
# Threads that cprof's pthread_create never sees: a library starts one
# through dlsym(RTLD_NEXT, "pthread_create"), as jemalloc starts its
# background threads. The scanner finds it in /proc/self/task while the
# CPU profile runs and arms its timer: its share of the profile's samples
# must be within 2 points, plus 3 samples' worth of the profile (a
# thread's count is short by up to one period at each end, more while the
# scanner has not armed the thread's timer yet: 2.6 points seen in 160
# samples), of its share of the CPU time the program's two
# threads used in main, as they measured it (CLOCK_THREAD_CPUTIME_ID),
# and threadcreate counts it under "[cprof: thread started outside
# pthread_create]"; the same share in a fork child that keeps profiling.
# With too few signals allowed for every thread's timer (RLIMIT_SIGPENDING,
# in a user namespace of the test's own so that no other process's signals
# count), the profile's comment counts the threads left without one, and
# the program runs as it would unprofiled.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
prog=$CPROFTEST_BUILD/test/progs/plain_dlsym_thread
libdir=$CPROFTEST_BUILD/test/progs
if tsan_build "$prog"; then
  skip_rest "preloaded runs (the TSan build cannot preload, see lib.bash)"
fi
rt=$(preload_env "$prog" | sed 's#[^ ]*libcprof\.so##')

# comment FILE: the profile's comment on threads without a timer.
unarmed() {
  pprof -raw "$1" | sed -nE 's/^Comment: cprof cpu: ([0-9]+) threads could not be given a CPU timer$/\1/p'
}

LD_PRELOAD="$rt" "$cprof" run --dump cpu,threadcreate --dump-out "$TMP/run.log" -- \
  "$prog" "$libdir" 1.5 1.0 >"$TMP/run.out" || fail "the program failed"
"$cprof" extract -o "$TMP/run" "$TMP/run.log" >/dev/null
# share NAME: the dlsym thread's share of the samples of the run NAME's
# CPU profile (of the pid it printed), against its measured share.
share() {
  local name=$1 pid tid thread_ns main_ns cpu got want
  pid=$(awk '$1 == "pid" { print $2 }' "$TMP/$name.out")
  tid=$(awk '$1 == "thread" { print $2 }' "$TMP/$name.out")
  thread_ns=$(awk '$1 == "thread" { print $3 }' "$TMP/$name.out")
  main_ns=$(awk '$1 == "main" { print $3 }' "$TMP/$name.out")
  cpu=$TMP/$name/cpu-$pid-1.pb.gz
  [ -f "$cpu" ] || { ls "$TMP/$name"; fail "$name: no CPU profile of pid $pid"; }
  pprof -tagfocus=thread_id="$tid" -top "$cpu" >"$TMP/$name.top"
  got=$(sed -nE 's/^Showing nodes accounting for [^,]+, ([0-9.]+)% of .* total$/\1/p' "$TMP/$name.top")
  # The profile's total, in ms of CPU: at cprof's default 100 Hz, 10 ms a
  # sample.
  total_ms=$(sed -nE 's/^Showing nodes accounting for [^,]+, [0-9.]+% of ([0-9.]+)(m?s) total$/\1 \2/p' "$TMP/$name.top" |
    awk '{ print ($2 == "s" ? $1 * 1000 : $1) }')
  margin=$(awk -v t="${total_ms:-0}" 'BEGIN { printf "%.2f", 2 + (t > 0 ? 3 * 10 * 100 / t : 0) }')
  want=$(awk -v t="$thread_ns" -v m="$main_ns" 'BEGIN { printf "%.2f", t * 100 / (t + m) }')
  echo "$name: the dlsym thread: $got% of the samples, $want% of the measured CPU time (margin $margin points)"
  [ -n "$got" ] || { cat "$TMP/$name.top"; fail "$name: no samples of thread $tid"; }
  awk -v g="$got" -v w="$want" -v m="$margin" 'BEGIN { d = g - w; exit !(d <= m && d >= -m) }' ||
    { cat "$TMP/$name.top"; fail "$name: the dlsym thread's share $got% is not within $margin points of $want%"; }
  checks=$((checks + 1))
  echo "ok: $name: the thread started through dlsym(RTLD_NEXT) gets its CPU share"
  expect_match "$TMP/$name.top" ' next_burn$' "$name: its samples are in next_burn"
  CPU=$cpu
}
share run
cpu=$CPU
[ -z "$(unarmed "$cpu")" ] || fail "threads without a timer in a normal run: $(unarmed "$cpu")"
checks=$((checks + 1))
echo "ok: no comment about threads without a timer: every thread had one"
pprof -traces "$TMP"/run/threadcreate-*.pb.gz >"$TMP/tc.txt"
if sanitized_build "$libdir/libnextthread.so"; then
  # The library depends on the sanitizer's runtime, whose pthread_create
  # is the next one it finds, and that one calls cprof's.
  echo "skip: threadcreate check (the sanitizer's pthread_create goes through cprof's)"
else
  expect_match "$TMP/tc.txt" '^ +1 +\[cprof: thread started outside pthread_create\]$' \
    "threadcreate counts the thread once, under its synthetic frame"
fi

# The same in a fork child that keeps profiling (a pre-fork server's
# worker): the child's own scanner finds the thread.
if sanitized_build "$libdir/libnextthread.so"; then
  # There AddressSanitizer reports a stack overflow in the trampoline of a
  # thread it does not know (T-1): the child's thread reaches cprof's
  # trampoline without the sanitizer's thread set-up. Not understood yet;
  # the normal build runs the rest.
  skip_rest "the fork child and RLIMIT_SIGPENDING runs under a sanitizer"
fi
LD_PRELOAD="$rt" "$cprof" run --dump cpu --dump-out "$TMP/fork.log" -- \
  "$prog" "$libdir" 1.0 0.7 fork >"$TMP/fork.out" || fail "the program failed in a fork child"
"$cprof" extract -o "$TMP/fork" "$TMP/fork.log" >/dev/null
share fork

# Two pending signals allowed: the main thread's timer and one more; the
# dlsym thread, the dumper and the scanner cannot all have one.
if ! unshare -Ur true 2>/dev/null; then
  skip_rest "RLIMIT_SIGPENDING check (no user namespaces here)"
fi
unshare -Ur bash -c 'ulimit -i 2 && exec "$@"' sh env LD_PRELOAD="$rt" "$cprof" run --dump cpu \
  --dump-out "$TMP/lim.log" -- "$prog" "$libdir" 0.5 0.5 >"$TMP/lim.out" ||
  fail "the program failed with few signals allowed"
expect_match "$TMP/lim.out" '^process [0-9]+$' "with few signals allowed, the program runs to its end"
"$cprof" extract -o "$TMP/lim" "$TMP/lim.log" >/dev/null
n=$(unarmed "$TMP"/lim/cpu-*.pb.gz)
[ -n "$n" ] && [ "$n" -ge 1 ] || fail "the comment does not count the threads without a timer (got '$n')"
checks=$((checks + 1))
echo "ok: the comment counts $n threads left without a timer"
finish
