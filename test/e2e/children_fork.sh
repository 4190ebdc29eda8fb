#!/usr/bin/env bash
# Fork children keep profiling: a pre-fork server's master forks two
# workers that burn CPU in functions of their own and exit normally. The
# dumps hold one CPU profile per process, each named by its pid (the pids
# the program prints) and topped by that process's own function: the
# children's CPU timers are armed again after fork, their profiles start
# at the fork (the master's work before it is not theirs), and each child
# dumps through a dumper of its own. Preloaded with `cprof run` and, for
# the TSan build too, linked (test/progs/forks).
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
plain=$CPROFTEST_BUILD/test/progs/plain_forks
linked=$CPROFTEST_BUILD/test/progs/forks
rt=$(preload_env "$plain" | sed 's#[^ ]*libcprof\.so##')
# ThreadSanitizer kills a child of a multi-threaded process that starts a
# thread (its default die_after_fork=1); the children's dumper is one.
tsan_build "$linked" &&
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}die_after_fork=0"

# top FILE: the function at the top of `cprof top` (most flat time).
top() {
  "$cprof" top "$1" | awk 'found { print $NF; exit } / flat +flat%/ { found = 1 }'
}

# check NAME: the run's log ($TMP/NAME.log) and output ($TMP/NAME.out).
check() {
  local name=$1 dir=$TMP/$1.x
  local master w0 w1
  master=$(awk '$1 == "master" {print $2}' "$TMP/$name.out")
  w0=$(awk '$1 == "worker0" {print $2}' "$TMP/$name.out")
  w1=$(awk '$1 == "worker1" {print $2}' "$TMP/$name.out")
  [ -n "$master" ] && [ -n "$w0" ] && [ -n "$w1" ] || { cat "$TMP/$name.out"; fail "$name: the program did not print its pids"; }
  "$cprof" extract -o "$dir" "$TMP/$name.log" >"$TMP/$name.extract" 2>&1 || { cat "$TMP/$name.extract"; fail "$name: extract failed"; }
  local n
  n=$(ls "$dir" | wc -l)
  echo "$name: $n profiles: $(ls "$dir" | tr '\n' ' ')"
  [ "$n" -eq 3 ] || fail "$name: expected 3 CPU profiles (master and two workers), got $n"
  local pid fn got
  for pair in "$master master_burn" "$w0 alpha_worker_burn" "$w1 beta_worker_burn"; do
    read -r pid fn <<<"$pair"
    [ -f "$dir/cpu-$pid-1.pb.gz" ] || fail "$name: no CPU profile named by pid $pid"
    got=$(top "$dir/cpu-$pid-1.pb.gz")
    [ "$got" = "$fn" ] || { "$cprof" top "$dir/cpu-$pid-1.pb.gz" | head -14; fail "$name: pid $pid's top function is '$got', not $fn"; }
    checks=$((checks + 1))
    echo "ok: $name: pid $pid's CPU profile is topped by $fn"
  done
  local ms
  for pid in "$w0" "$w1"; do
    "$cprof" top "$dir/cpu-$pid-1.pb.gz" >"$TMP/$name.$pid.top"
    # Each worker burns 0.5 s: its profile holds most of it, not a sample
    # that happened to land in its function.
    ms=$(sed -nE 's/.*Total samples = ([0-9.]+)(m?s).*/\1 \2/p' "$TMP/$name.$pid.top" |
      awk '{ print int($2 == "s" ? $1 * 1000 : $1) }')
    [ -n "$ms" ] && [ "$ms" -ge 250 ] ||
      { head -8 "$TMP/$name.$pid.top"; fail "$name: worker $pid's profile holds ${ms:-no} ms of its 500 ms burn"; }
    checks=$((checks + 1))
    expect_no_match "$TMP/$name.$pid.top" 'master_burn' "$name: worker $pid's profile starts at the fork (no master_burn)"
  done
}

if tsan_build "$plain"; then
  echo "skip: preloaded run (the TSan build cannot preload, see lib.bash)"
else
  LD_PRELOAD="$rt" "$cprof" run --dump cpu --dump-out "$TMP/run.log" -- "$plain" prefork >"$TMP/run.out" ||
    fail "cprof run: the pre-fork program failed"
  check run
fi

CPROF_DUMP=cpu CPROF_DUMP_OUT="$TMP/linked.log" "$linked" prefork >"$TMP/linked.out" ||
  fail "the linked pre-fork program failed"
check linked
finish
