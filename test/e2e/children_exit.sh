#!/usr/bin/env bash
# _exit and _Exit end the program with its exit dump: from main, and from a
# signal handler (where the dump is asked of the dumper thread, as a
# terminating signal's is). Only the process that configured dumps dumps
# there: a fork child that fails to exec and calls _exit, a vfork child
# doing the same, and a fork child that fails to exec and calls exit add
# nothing. Preloaded with `cprof run` and, for the TSan build too, linked
# (test/progs/forks).
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
plain=$CPROFTEST_BUILD/test/progs/plain_forks
linked=$CPROFTEST_BUILD/test/progs/forks
rt=$(preload_env "$plain" | sed 's#[^ ]*libcprof\.so##')
tsan_build "$linked" &&
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}die_after_fork=0"

# check NAME MODE: the run of MODE wrote exactly one heap and one CPU
# block, both named by the pid the program printed, for the reason _exit.
check() {
  local name=$1 log=$TMP/$1.log pid n
  pid=$(awk '$1 == "pid" {print $2; exit}' "$TMP/$name.out")
  [ -n "$pid" ] || { cat "$TMP/$name.out"; fail "$name: no pid printed"; }
  n=$(grep -c '^-----BEGIN PPROF' "$log" || true)
  echo "$name: $n blocks, pids: $(grep '^Pid:' "$log" | sort -u | awk '{print $2}' | tr '\n' ' ')"
  [ "$n" -eq 2 ] || { grep -E "^(Profile|Pid|Reason):" "$log" >&2 || true; fail "$name: expected 2 blocks (cpu, heap), found $n"; }
  [ "$(grep -c "^Pid: $pid\$" "$log")" -eq 2 ] || fail "$name: the blocks are not named by pid $pid"
  [ "$(grep -c '^Reason: _exit$' "$log")" -eq 2 ] || fail "$name: the blocks' reason is not _exit"
  "$cprof" extract -o "$TMP/$name.x" "$log" >/dev/null || fail "$name: extract failed"
  ls "$TMP/$name.x/heap-$pid-"*.txt >/dev/null 2>&1 || fail "$name: no heap-$pid-SEQ.txt"
  checks=$((checks + 1))
  echo "ok: $name: one dump, by pid $pid, at _exit"
}

for mode in uexit uExit alarmexit termexit failexec; do
  # failexec's third child calls exit(), where GCC 12's LeakSanitizer stops
  # the world and takes its allocator's locks: one that another thread of
  # the parent held at the fork stays held in the child, and the check
  # waits for ever (1 to 2 runs in 100, under load). Leak checking is off
  # for that mode; the others keep it.
  asan_opts=${ASAN_OPTIONS:-}
  [ "$mode" = failexec ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  if ! tsan_build "$plain"; then
    LD_PRELOAD="$rt" "$cprof" run --dump cpu,heap=debug=1 --dump-out "$TMP/run-$mode.log" -- "$plain" "$mode" >"$TMP/run-$mode.out" ||
      fail "cprof run: $mode failed"
    check "run-$mode"
  fi
  CPROF_DUMP=cpu,heap=debug=1 CPROF_DUMP_OUT="$TMP/linked-$mode.log" "$linked" "$mode" >"$TMP/linked-$mode.out" ||
    fail "linked: $mode failed"
  check "linked-$mode"
  export ASAN_OPTIONS="$asan_opts"
done
# failexec's children printed their pids: none of them dumped.
for name in run-failexec linked-failexec; do
  [ -f "$TMP/$name.out" ] || continue
  for c in $(awk '$1 == "child" {print $2}' "$TMP/$name.out"); do
    expect_no_match "$TMP/$name.log" "^Pid: $c\$" "$name: child $c (failed exec, then _exit or exit) did not dump"
  done
done
finish
