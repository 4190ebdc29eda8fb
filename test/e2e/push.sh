#!/usr/bin/env bash
# Pushing to a Pyroscope-style backend end to end: an unmodified program
# with cprof preloaded and CPROF_PUSH_* set uploads aligned CPU windows and
# heap snapshots to a loopback receiver that checks the protocol; every
# upload is read back by go tool pprof. Then a receiver that always fails:
# the program still finishes on time and nothing is left queued.
source "$(dirname "$0")/lib.bash"
tsan_build "$CPROFTEST_BUILD/test/progs/plain_worker" && skip_rest "every run here is preloaded, which the TSan build cannot do (see lib.bash)"
prog=$CPROFTEST_BUILD/test/progs/plain_worker
start_receiver "$TMP/ok" ok
CPROF_PUSH_URL="http://127.0.0.1:$rport" CPROF_PUSH_INTERVAL=2 \
CPROF_PUSH_APP=pushtest CPROF_PUSH_LABELS="env=test,region=local" \
CPROF_PUSH_TOKEN=sekret CPROF_PUSH_TENANT=team-a CPROF_PUSH_PROFILES=cpu,wall,heap \
  LD_PRELOAD=$(preload_env "$prog") "$prog" 7 >/dev/null 2>"$TMP/app.err"
kill $rpid; wait $rpid 2>/dev/null || true
index=$TMP/ok/index.tsv
[ -s "$index" ] || { cat "$TMP/app.err"; fail "nothing was uploaded"; }
expect_no_match "$TMP/app.err" 'sekret' "the token never appears in the program's output"

cpu=0 heap=0 wall=0
while IFS=$'\t' read -r n name from until spy rate auth tenant; do
  case $name in
    pushtest\{*hostname=*pid=*service_name=pushtest*env=test,region=local\}) ;;
    *) fail "upload $n: unexpected series name $name" ;;
  esac
  [ "$spy" = cprof ] || fail "upload $n: spyName $spy"
  [ "$auth" = "Bearer sekret" ] || fail "upload $n: authorization '$auth'"
  [ "$tenant" = team-a ] || fail "upload $n: tenant '$tenant'"
  pprof -raw "$TMP/ok/$n.pb.gz" >"$TMP/raw$n.txt" || { cat "$TMP/raw$n.txt"; fail "upload $n is not a profile pprof reads"; }
  if grep -q '^samples/count cpu/nanoseconds' "$TMP/raw$n.txt"; then
    cpu=$((cpu + 1))
    [ "$rate" = 100 ] || fail "CPU upload $n: sampleRate $rate"
    [ $((until % 2)) -eq 0 ] || fail "CPU window $n ends at $until, not on a 2 s boundary"
    [ "$until" -gt "$from" ] || fail "CPU window $n is empty ($from..$until)"
  elif grep -q '^samples/count wall/nanoseconds' "$TMP/raw$n.txt"; then
    wall=$((wall + 1))
    [ "$rate" = 20 ] || fail "wall upload $n: sampleRate $rate"
    [ $((until % 2)) -eq 0 ] || fail "wall window $n ends at $until, not on a 2 s boundary"
    last_wall=$n
  elif grep -q 'inuse_space/bytes' "$TMP/raw$n.txt"; then
    heap=$((heap + 1))
  fi
done <"$index"
[ "$cpu" -ge 3 ] || fail "expected at least 3 CPU windows in 7 s, got $cpu"
[ "$heap" -ge 3 ] || fail "expected at least 3 heap snapshots, got $heap"
[ "$wall" -ge 3 ] || fail "expected at least 3 wall windows, got $wall"
echo "ok: $cpu CPU windows and $wall wall windows aligned to 2 s and $heap heap snapshots, all read by pprof, labels and credentials as configured"
checks=$((checks + 1))
last_cpu=$(grep -l '^samples/count' "$TMP"/raw*.txt | sed 's/.*raw\([0-9]*\)\.txt/\1/' | sort -n | tail -1)
pprof -top "$TMP/ok/$last_cpu.pb.gz" >"$TMP/top.txt"
expect_match "$TMP/top.txt" ' worker_spin$' "a pushed CPU window names the program's hot function"
pprof -tagfocus state=running -top "$TMP/ok/$last_wall.pb.gz" >"$TMP/walltop.txt"
expect_match "$TMP/walltop.txt" ' worker_spin$' "a pushed wall window has the running thread in its hot function"

# CPROF_PUSH_PROFILES picks what is pushed (above: cpu, wall and heap;
# here only cpu); a name that is not a pushed profile is refused in one
# line.
start_receiver "$TMP/only" ok
CPROF_PUSH_URL="http://127.0.0.1:$rport" CPROF_PUSH_INTERVAL=1 CPROF_PUSH_PROFILES=cpu \
  LD_PRELOAD=$(preload_env "$prog") "$prog" 3.5 >/dev/null 2>"$TMP/only.err"
kill $rpid; wait $rpid 2>/dev/null || true
n_only=0
while IFS=$'\t' read -r n _; do
  pprof -raw "$TMP/only/$n.pb.gz" >"$TMP/only$n.txt" 2>/dev/null
  grep -q '^samples/count cpu/nanoseconds' "$TMP/only$n.txt" || { cat "$TMP/only$n.txt" | head; fail "CPROF_PUSH_PROFILES=cpu pushed upload $n, not a CPU profile"; }
  n_only=$((n_only + 1))
done <"$TMP/only/index.tsv"
[ "$n_only" -ge 2 ] || fail "CPROF_PUSH_PROFILES=cpu: $n_only uploads"
echo "ok: CPROF_PUSH_PROFILES=cpu pushed $n_only CPU windows and nothing else"
checks=$((checks + 1))
CPROF_PUSH_URL="http://127.0.0.1:1" CPROF_PUSH_PROFILES="cpu,goroutine" LD_PRELOAD=$(preload_env "$prog") "$prog" 0.1 >/dev/null 2>"$TMP/badprof.err"
expect_match "$TMP/badprof.err" '^cprof: CPROF_PUSH_\*: profiles: "goroutine" is not a profile that is pushed; pushing disabled$' "a profile that is not pushed is refused in one line"

# A backend that fails every upload: the program is not held up, and the
# failures are counted instead of queued without end.
start_receiver "$TMP/bad" fail500
t0=$(date +%s%N)
CPROF_PUSH_URL="http://127.0.0.1:$rport" CPROF_PUSH_INTERVAL=1 \
  LD_PRELOAD=$(preload_env "$prog") "$prog" 3 >/dev/null 2>"$TMP/bad.err"
t1=$(date +%s%N)
kill $rpid; wait $rpid 2>/dev/null || true
elapsed_ms=$(( (t1 - t0) / 1000000 ))
[ "$elapsed_ms" -lt 6000 ] || fail "a failing backend held the program up: ${elapsed_ms} ms for a 3 s run"
expect_match "$TMP/bad.err" 'push: upload of .* to http://127\.0\.0\.1:[0-9]+ failed \(HTTP 500\)' "a failing upload is reported once, without credentials"
echo "ok: with every upload failing, the 3 s program took ${elapsed_ms} ms"
checks=$((checks + 1))

# A backend that accepts the connection and never answers: exit is not
# held up by the request in flight.
start_receiver "$TMP/stall" stall
t0=$(date +%s%N)
CPROF_PUSH_URL="http://127.0.0.1:$rport" CPROF_PUSH_INTERVAL=1 \
  LD_PRELOAD=$(preload_env "$prog") "$prog" 2.5 >/dev/null 2>&1
t1=$(date +%s%N)
elapsed_ms=$(( (t1 - t0) / 1000000 ))
[ "$elapsed_ms" -lt 5000 ] || fail "a stalled backend held the program up: ${elapsed_ms} ms for a 2.5 s run"
echo "ok: with the backend stalled, the 2.5 s program took ${elapsed_ms} ms"
checks=$((checks + 1))

# Bad settings: one line, and the program runs unprofiled.
CPROF_PUSH_URL="ftp://example" LD_PRELOAD=$(preload_env "$prog") "$prog" 0.1 >/dev/null 2>"$TMP/badurl.err"
expect_match "$TMP/badurl.err" '^cprof: CPROF_PUSH_\*: url must start with http:// or https://; pushing disabled$' "a bad URL is refused in one line"
CPROF_PUSH_URL="http://127.0.0.1:1" CPROF_PUSH_LABELS="bad label" LD_PRELOAD=$(preload_env "$prog") "$prog" 0.1 >/dev/null 2>"$TMP/badlabel.err"
expect_match "$TMP/badlabel.err" 'bad label "bad label"' "a bad label is refused in one line"
# Labels travel with the pushed profiles: a program that labels its two
# request kinds (labels_server, docs/labels.md) pushes CPU windows whose
# samples carry the kind label as pprof string labels, which is how
# Pyroscope reads a profile's labels.
start_receiver "$TMP/lab" ok
mkdir -p "$TMP/labout"
CPROF_PUSH_URL="http://127.0.0.1:$rport" CPROF_PUSH_INTERVAL=1 CPROF_PUSH_APP=labtest \
  "$CPROFTEST_BUILD/test/progs/labels_server" "$TMP/labout" >/dev/null 2>"$TMP/lab.err" ||
  { cat "$TMP/lab.err"; fail "labels_server under the pusher"; }
kill $rpid; wait $rpid 2>/dev/null || true
labelled=0 lab_wall=0
while IFS=$'\t' read -r n name _; do
  pprof -raw "$TMP/lab/$n.pb.gz" >"$TMP/lab$n.txt" 2>/dev/null || continue
  grep -q '^samples/count wall/nanoseconds' "$TMP/lab$n.txt" && lab_wall=$((lab_wall + 1))
  grep -q '^samples/count cpu/nanoseconds' "$TMP/lab$n.txt" || continue
  pprof -tags "$TMP/lab/$n.pb.gz" >"$TMP/labtags$n.txt" 2>/dev/null || continue
  if grep -q ' kind:' "$TMP/labtags$n.txt" && grep -q ' api$' "$TMP/labtags$n.txt" &&
    grep -q ' static$' "$TMP/labtags$n.txt"; then
    labelled=$((labelled + 1))
  fi
done <"$TMP/lab/index.tsv"
[ "$labelled" -ge 1 ] || { cat "$TMP"/labtags*.txt 2>/dev/null | head -40; fail "no pushed CPU window carries the kind labels"; }
echo "ok: $labelled pushed CPU windows carry the program's kind=api and kind=static labels"
checks=$((checks + 1))
[ "$lab_wall" -eq 0 ] || fail "the wall profile was pushed without CPROF_PUSH_PROFILES naming it"
echo "ok: by default the wall profile is not pushed"
checks=$((checks + 1))
if sanitized_build "$CPROFTEST_BUILD/test/progs/plain_forks"; then
  # GCC 12's libasan does not lock its allocator across fork: a worker
  # forked while the pusher's threads free memory can spin for ever on
  # the sanitizer's quarantine lock.
  skip_rest "forked workers pushed: ASan's allocator is not fork-safe with a thread freeing"
fi
# A server whose forked workers end with exit() after 2 s: each worker is
# pushed by the parent, as a series of its own. Before, a worker's exit
# waited for ever on the parent's pusher threads, which the child does
# not have, and the master for the worker.
plain=$CPROFTEST_BUILD/test/progs/plain_forks
start_receiver "$TMP/fork" ok
status=0
CPROF_PUSH_URL="http://127.0.0.1:$rport" CPROF_PUSH_INTERVAL=1 CPROF_PUSH_APP=forktest \
  timeout 30 env LD_PRELOAD="$(preload_env "$plain")" "$plain" server 2 >"$TMP/fork.out" 2>"$TMP/fork.err" &
server=$!
track "$server"
for _ in $(seq 100); do grep -q '^exit .* ' "$TMP/fork.out" 2>/dev/null && [ "$(grep -c '^exit' "$TMP/fork.out")" = 2 ] && break; sleep 0.1; done
master=$(awk '$1 == "master" { print $2 }' "$TMP/fork.out")
[ -n "$master" ] && kill -TERM "$master"
wait "$server" || status=$?
[ "$status" = 0 ] || { cat "$TMP/fork.out" "$TMP/fork.err"; fail "plain_forks server under the pusher: status $status (124: a worker's exit hung)"; }
[ "$(grep -c '^exit' "$TMP/fork.out")" = 2 ] || fail "the workers did not both exit"
echo "ok: a server whose forked workers call exit() ends, status 0"
checks=$((checks + 1))
kill $rpid; wait $rpid 2>/dev/null || true
for i in 0 1; do
  w=$(awk -v k="worker$i" '$1 == k { print $2 }' "$TMP/fork.out")
  fn=alpha_worker_burn
  [ "$i" = 1 ] && fn=beta_worker_burn
  push_uploads "$TMP/fork" "$w" cpu >"$TMP/fork.$w"
  [ -s "$TMP/fork.$w" ] || { cat "$TMP/fork/index.tsv"; fail "worker $w: no CPU window pushed"; }
  # shellcheck disable=SC2046
  pprof -top $(awk '{ print $1 }' "$TMP/fork.$w") >"$TMP/fork.$w.top"
  expect_match "$TMP/fork.$w.top" " $fn\$" "worker $w's pushed series holds $fn"
done
finish
