#!/usr/bin/env bash
# The threadcreate profile end to end: capture (pthread_create interposed,
# linked and preloaded) -> stack table -> symbolization -> pprof and text,
# read back by go tool pprof.
source "$(dirname "$0")/lib.bash"

# Under ThreadSanitizer its runtime starts a thread of its own around the
# program's first pthread_create, not through cprof's: threadcreate counts
# it on "[cprof: thread started outside pthread_create]" once it has run
# 20 ms (docs/api.md), so a sixth thread may be there.
three='60\.00' two='40\.00' total=5
if tsan_build "$CPROFTEST_BUILD/test/progs/spawner"; then
  three='(60\.00|50\.00)' two='(40\.00|33\.33)' total='(5|6)'
fi

check_pprof() {
  local label=$1 file=$2
  pprof -raw "$file" >"$TMP/raw.txt"
  expect_match "$TMP/raw.txt" '^threadcreate/count$' "$label: sample type threadcreate/count"
  expect_match "$TMP/raw.txt" '^PeriodType: threadcreate count$' "$label: period type"
  expect_match "$TMP/raw.txt" 'spawn_three .*spawner\.c:[0-9]+' "$label: location in spawn_three with file:line"
  pprof -top -lines "$file" >"$TMP/top.txt"
  # The cum column: under a sanitizer its pthread_create interceptor is
  # the innermost frame.
  expect_match "$TMP/top.txt" " +3 $three% +spawn_three .*spawner\\.c:[0-9]+\$" "$label: spawn_three created 3 threads"
  expect_match "$TMP/top.txt" " +2 $two% +spawn_two .*spawner\\.c:[0-9]+\$" "$label: spawn_two created 2 threads"
  expect_match "$TMP/top.txt" " $total total" "$label: 5 threads in total"
}

check_text() {
  local label=$1 file=$2
  expect_match "$file" "^threadcreate profile: total $total\$" "$label: debug=1 header"
  expect_match "$file" '^3 @( 0x[0-9a-f]+)+$' "$label: debug=1 record of 3"
  expect_match "$file" '^2 @( 0x[0-9a-f]+)+$' "$label: debug=1 record of 2"
  expect_match "$file" $'^#\t0x[0-9a-f]+\t+spawn_three\\+0x[0-9a-f]+\t+/.*spawner\\.c:[0-9]+$' "$label: debug=1 frame line for spawn_three"
  expect_match "$file" $'^#\t0x[0-9a-f]+\t+main\\+0x[0-9a-f]+\t+/.*spawner\\.c:[0-9]+$' "$label: debug=1 frame line for main"
}

prog=$CPROFTEST_BUILD/test/progs/spawner
"$prog" threadcreate 0 >"$TMP/linked.pb.gz"
check_pprof linked "$TMP/linked.pb.gz"
"$prog" threadcreate 1 >"$TMP/linked.txt"
check_text linked "$TMP/linked.txt"

plain=$CPROFTEST_BUILD/test/progs/plain_spawner
if tsan_build "$plain"; then
  echo "skip: preloaded runs under TSan (see lib.bash)"
else
  LD_PRELOAD=$(preload_env "$plain") "$plain" threadcreate 0 >"$TMP/preloaded.pb.gz"
  check_pprof preloaded "$TMP/preloaded.pb.gz"
  LD_PRELOAD=$(preload_env "$plain") "$plain" threadcreate 1 >"$TMP/preloaded.txt"
  check_text preloaded "$TMP/preloaded.txt"
fi

if "$prog" nosuchprofile 0 >/dev/null 2>"$TMP/err.txt"; then
  fail "an unknown profile was accepted"
fi
expect_match "$TMP/err.txt" "error $(printf '%d' -4)" "unknown profile is CPROF_ENOPROFILE"
finish
