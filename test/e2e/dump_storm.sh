#!/usr/bin/env bash
# A SIGUSR1 storm: requests that arrive while a dump is being written are
# coalesced into one more dump, so dumping stops soon after the storm
# does, the log stays bounded, and a SIGTERM afterwards is honoured at
# once.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
log=$TMP/storm.log

CPROF_DUMP=goroutine CPROF_DUMP_OUT="$log" "$host" storm 1 >"$TMP/out" 2>"$TMP/err" &
pid=$!
track $pid
# A program stuck in cprof's signal handler ignores the trap's SIGTERM.
die() { kill -KILL $pid 2>/dev/null; fail "$@"; }
for _ in $(seq 300); do grep -q 'storm over' "$TMP/out" 2>/dev/null && break; sleep 0.05; done
grep -q 'storm over' "$TMP/out" || die "the storm never ended (the signal handler blocked?)"
cat "$TMP/out"
# Coalescing leaves at most the dump in progress when the storm ended and
# one more requested during it. Wait (up to 15 s: a dump is slow under a
# sanitizer on a loaded machine) until the log stops growing for a second,
# then count what came after the storm.
n0=$(grep -c '^Reason: SIGUSR1$' "$log" || true)
n1=$n0
for _ in $(seq 15); do
  sleep 1
  n2=$(grep -c '^Reason: SIGUSR1$' "$log" || true)
  [ "$n2" -eq "$n1" ] && break
  n1=$n2
done
s2=$(stat -c %s "$log")
echo "dumps when the storm ended: $n0; once the log stopped growing: $n2 ($s2 bytes)"
[ "$n2" -eq "$n1" ] || die "still dumping 15 s after the storm: $n2 dumps (requests were queued, not coalesced)"
[ $((n2 - n0)) -le 2 ] || die "$((n2 - n0)) dumps after the storm ended (requests were queued, not coalesced)"
[ "$n1" -ge 1 ] || fail "the storm produced no dump"
checks=$((checks + 1))

t0=$(date +%s%N)
kill -TERM $pid
alive=1
for _ in $(seq 100); do kill -0 $pid 2>/dev/null || { alive=0; break; }; sleep 0.1; done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $alive -eq 0 ] || die "SIGTERM not honoured $ms ms after it was sent"
status=0
wait $pid || status=$?
echo "SIGTERM after the storm: status $status after $ms ms"
[ "$status" -eq 143 ] || fail "status $status, want 143"
[ "$(grep -c '^Reason: SIGTERM$' "$log")" -eq 1 ] || fail "expected one SIGTERM dump"
"$CPROFTEST_BUILD/cprof" extract -o "$TMP/x" "$log" >"$TMP/extract.txt" || { cat "$TMP/extract.txt"; fail "the log does not extract"; }
expect_match "$TMP/extract.txt" "$((n2 + 1)) profiles written" "every dump in the log is whole: $n2 after SIGUSR1, one after SIGTERM"
finish
