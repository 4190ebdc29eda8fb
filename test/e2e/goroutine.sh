#!/usr/bin/env bash
# The goroutine ("threads") profile end to end: a 50-thread program whose
# threads spin, sleep, wait on a mutex and on a condition variable, and two
# that block every signal (one spins, one sleeps). debug=2 has one block
# per thread, each with named frames, its state and system call from
# /proc and its "created by" line; the spinning thread that blocks signals
# is sampled by a perf event where the kernel allows them (and, with
# CPROF_PERF_EVENTS=0, is reported, not waited for); the sleeping one is
# read from /proc and
# shows its own function; cprof's interposers never appear; debug=1 and
# debug=0 are Go's count profile, with return addresses on the @ line. The
# collection's figures are printed.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/threads_dump
"$prog" "$TMP" >"$TMP/stats.txt"
cat "$TMP/stats.txt"
d2=$TMP/threads2.txt
n=$(grep -c '^goroutine [0-9]* \[' "$d2")
# ThreadSanitizer adds a thread of its own.
[ "$n" -eq 50 ] || [ "$n" -eq 51 ] || { cat "$d2"; fail "$n thread blocks in debug=2, expected 50"; }
checks=$((checks + 1))
echo "ok: debug=2 has $n thread blocks"
expect_match "$d2" '^goroutine [0-9]+ \[(running|sleeping), name=spinner\]:$' "header with state and name"
expect_match "$d2" '^goroutine [0-9]+ \[sleeping, syscall (clock_nanosleep|nanosleep), name=sleeper\]:$' "a sleeper's header names its state and system call"
expect_match "$d2" '^goroutine [0-9]+ \[sleeping, syscall futex, name=locker\]:$' "a locker waits in futex"
expect_match "$d2" '^created by main$' "created by the function that called pthread_create"
expect_no_match "$d2" 'contention\.c' "no frame of cprof's lock interposers in debug=2"
expect_no_match "$TMP/threads1.txt" '/(contention|registry|profilez)\.c:' "no cprof frame in debug=1"
expect_no_match "$d2" ':0( |$)' "no frame with line 0"
# The @ line has return addresses: each is one past its # line's call site.
python3 - "$TMP/threads1.txt" <<'PY' || fail "an @ address is not its # address + 1"
import sys
at, seen, bad = [], [], 0
def check():
    global bad
    if at and [a - 1 for a in at] != seen:
        print("@", [hex(a) for a in at], "#", [hex(a) for a in seen])
        bad = 1
for line in open(sys.argv[1]):
    if " @ " in line:
        check()
        at, seen = [int(x, 16) for x in line.split("@")[1].split()], []
    elif line.startswith("#\t"):
        pc = int(line.split("\t")[1], 16)
        if not seen or seen[-1] != pc:
            seen.append(pc)
check()
sys.exit(bad)
PY
checks=$((checks + 1))
echo "ok: the @ line lists return addresses, the # lines call sites"
expect_match "$d2" $'^\t/.*threads_dump\\.c:[0-9]+ \\+0x[0-9a-f]+$' "file:line +0xoff lines"
# Waiting threads are read from /proc, not signalled: their frames show
# under ThreadSanitizer too (which defers asynchronous signals).
expect_match "$d2" '^worker_lock\(\.\.\.\)$' "a thread waiting on a mutex shows worker_lock"
expect_match "$d2" '^worker_sleep\(\.\.\.\)$' "a sleeping thread shows worker_sleep"
expect_match "$d2" '^main\(\.\.\.\)$' "the collecting thread shows main"
expect_match "$d2" '^worker_blocks_quietly\(\.\.\.\)$' "a sleeping thread that blocks signals is read from /proc and shows its function"
if grep -q ' perf=[1-9]' "$TMP/stats.txt"; then
  # Under ThreadSanitizer the sample can land in its trace-switch thunk,
  # whose CFA is in rbx, a rule the walk does not follow (docs/
  # unwinding.md): that block then ends there. Such a run is taken again.
  blocker=$d2
  for again in 1 2; do
    grep -Eq '^worker_blocks_signals\(\.\.\.\)$' "$blocker" && break
    awk '/name=blocker\]/ {on = 1; next} on && /^$/ {exit} on && /^__tsan_[a-z_]*_thunk\(/ {t = 1} END {exit !t}' "$blocker" || break
    echo "note: the blocker was sampled in TSan's thunk; taking the profile again"
    mkdir -p "$TMP/again$again"
    "$prog" "$TMP/again$again" >/dev/null
    blocker=$TMP/again$again/threads2.txt
  done
  expect_match "$blocker" '^worker_blocks_signals\(\.\.\.\)$' "the spinning thread that blocks signals is sampled by a perf event and shows its function"
  expect_match "$TMP/stats.txt" ' perf_answered=[1-9]' "running threads answered through perf events"
  # Without perf events the running threads get the signal, through a
  # timer on their own CPU clock; the one that blocks it is reported.
  mkdir "$TMP/noperf"
  CPROF_PERF_EVENTS=0 "$prog" "$TMP/noperf" >"$TMP/noperf/stats.txt"
  cat "$TMP/noperf/stats.txt"
  expect_match "$TMP/noperf/stats.txt" ' perf=0 perf_answered=0 signalled=[1-9]' "CPROF_PERF_EVENTS=0: running threads are asked by the signal"
  expect_match "$TMP/noperf/threads2.txt" '^cprof_thread_blocks_signal\(\.\.\.\)$' "CPROF_PERF_EVENTS=0: the thread that blocks signals is reported"
  expect_match "$TMP/noperf/threads2.txt" '^worker_spin\(\.\.\.\)$' "CPROF_PERF_EVENTS=0: a spinning thread answers the signal"
else
  echo "note: perf events are refused here (kernel.perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)); running threads are asked by the signal"
  expect_match "$d2" '^cprof_thread_blocks_signal\(\.\.\.\)$' "the thread that blocks signals is reported"
fi
# Every block names at least one function.
awk '/^goroutine / {if (h && !named) bad = bad h "\n"; h = $0; named = 0; next}
     /^[A-Za-z_][A-Za-z0-9_@.]*\(\.\.\.\)$/ {named = 1}
     END {if (h && !named) bad = bad h "\n"; printf "%s", bad; exit bad != ""}' "$d2" ||
  fail "thread blocks without a named frame"
checks=$((checks + 1))
echo "ok: every thread block has a named frame"
answered=$(sed -n 's/.* answered=\([0-9]*\).*/\1/p' "$TMP/stats.txt" | head -1)
[ "$answered" -ge 45 ] || fail "only $answered of 50 threads answered"
checks=$((checks + 1))
echo "ok: $answered of 50 threads answered"
expect_match "$TMP/threads1.txt" '^goroutine profile: total 5[01]$' "debug=1 header"
pprof -raw "$TMP/threads.pb.gz" >"$TMP/raw.txt"
expect_match "$TMP/raw.txt" '^goroutine/count$' "debug=0 sample type goroutine/count"
finish
