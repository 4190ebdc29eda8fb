#!/usr/bin/env bash
# The goroutine ("threads") profile end to end: a 50-thread program whose
# threads spin, sleep, wait on a mutex and on a condition variable, and one
# that blocks every signal. debug=2 has one block per thread, each with
# named frames; the blocked thread is reported, not waited for; debug=1 and
# debug=0 are Go's count profile. The collection's figures are printed.
source "$(dirname "$0")/lib.bash"
prog=$CPROF_BUILD/test/progs/threads_dump
"$prog" "$TMP" >"$TMP/stats.txt"
cat "$TMP/stats.txt"
d2=$TMP/threads2.txt
n=$(grep -c '^goroutine [0-9]* \[' "$d2")
# ThreadSanitizer adds a thread of its own.
[ "$n" -eq 50 ] || [ "$n" -eq 51 ] || { cat "$d2"; fail "$n thread blocks in debug=2, expected 50"; }
checks=$((checks + 1))
echo "ok: debug=2 has $n thread blocks"
expect_match "$d2" '^goroutine [0-9]+ \[(running|sleeping), name=spinner\]:$' "header with state and name"
expect_match "$d2" $'^\t/.*threads_dump\\.c:[0-9]+ \\+0x[0-9a-f]+$' "file:line +0xoff lines"
tsan=0
tsan_build "$prog" && tsan=1
if [ "$tsan" = 1 ]; then
  # ThreadSanitizer defers asynchronous signals to its next interceptor, so
  # a thread answers from wherever that is, not from where it waits.
  echo "skip: worker_lock / worker_sleep frames under ThreadSanitizer (deferred signals)"
else
  expect_match "$d2" '^worker_lock\(\.\.\.\)$' "a thread waiting on a mutex shows worker_lock"
  expect_match "$d2" '^worker_sleep\(\.\.\.\)$' "a sleeping thread shows worker_sleep"
fi
expect_match "$d2" '^main\(\.\.\.\)$' "the collecting thread shows main"
expect_match "$d2" '^cprof_thread_blocks_signal\(\.\.\.\)$' "the thread that blocks signals is reported"
# Every block names at least one function.
awk '/^goroutine / {if (h && !named) bad = bad h "\n"; h = $0; named = 0; next}
     /^[A-Za-z_][A-Za-z0-9_@.]*\(\.\.\.\)$/ {named = 1}
     END {if (h && !named) bad = bad h "\n"; printf "%s", bad; exit bad != ""}' "$d2" ||
  fail "thread blocks without a named frame"
checks=$((checks + 1))
echo "ok: every thread block has a named frame"
answered=$(sed -n 's/.*answered=\([0-9]*\).*/\1/p' "$TMP/stats.txt")
if [ "$tsan" = 1 ]; then
  echo "skip: under ThreadSanitizer, which defers signals, $answered of 50 answered"
else
  [ "$answered" -ge 45 ] || fail "only $answered of 50 threads answered"
  checks=$((checks + 1))
  echo "ok: $answered of 50 threads answered (the signal-blocking one cannot)"
fi
expect_match "$TMP/threads1.txt" '^goroutine profile: total 5[01]$' "debug=1 header"
pprof -raw "$TMP/threads.pb.gz" >"$TMP/raw.txt"
expect_match "$TMP/raw.txt" '^goroutine/count$' "debug=0 sample type goroutine/count"
finish
