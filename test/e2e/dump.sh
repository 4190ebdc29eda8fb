#!/usr/bin/env bash
# Dumps end to end: `cprof run --dump` on an unmodified program, SIGTERM,
# SIGUSR1 windows, exit, a log the program writes into at the same time,
# log prefixes, corrupt and truncated blocks, and `cprof extract`; every
# extracted file read back by go tool pprof.
source "$(dirname "$0")/lib.bash"
tsan_build "$CPROFTEST_BUILD/test/progs/plain_worker" && skip_rest "every run here is preloaded, which the TSan build cannot do (see lib.bash)"
cprof=$CPROFTEST_BUILD/cprof
prog=$CPROFTEST_BUILD/test/progs/plain_worker
# Under a sanitizer the preloaded library needs its runtime loaded first;
# cprof run keeps it ahead of libcprof. Only cprof run gets it.
rt=$(preload_env "$prog" | sed 's#[^ ]*libcprof\.so##')
# Always run in the background ("crun ... &"): it execs, so that $! is
# the program itself and a signal sent to it reaches the program.
crun() { LD_PRELOAD="$rt" exec "$cprof" run "$@"; }

wait_ready() { # FILE: waits until the program printed "ready"
  for _ in $(seq 100); do grep -q ready "$1" 2>/dev/null && return 0; sleep 0.05; done
  fail "program did not start"
}

# 1. SIGTERM: two blocks, two files, and the process died of SIGTERM.
crun --dump cpu,threadcreate --dump-out "$TMP/term.log" -- "$prog" 30 >"$TMP/out1" &
pid=$!
track $pid
wait_ready "$TMP/out1"
sleep 0.5
kill -TERM $pid
status=0
wait $pid || status=$?
[ "$status" -eq 143 ] || fail "expected death by SIGTERM (status 143), got $status"
echo "ok: the program died of SIGTERM (status $status)"
expect_match "$TMP/term.log" '^-----BEGIN PPROF CPU-----$' "CPU block in the log"
expect_match "$TMP/term.log" '^-----BEGIN PPROF THREADCREATE-----$' "threadcreate block in the log"
expect_match "$TMP/term.log" '^Reason: SIGTERM$' "block headers name the signal"
"$cprof" extract -o "$TMP/x1" "$TMP/term.log" >"$TMP/extract1.txt"
expect_match "$TMP/extract1.txt" '2 profiles written' "extract wrote two files"
cpu=$(ls "$TMP"/x1/cpu-*.pb.gz)
pprof -top "$cpu" >"$TMP/cpu1.txt"
expect_match "$TMP/cpu1.txt" ' worker_spin$' "the CPU dump names worker_spin"
pprof -top "$(ls "$TMP"/x1/threadcreate-*.pb.gz)" >"$TMP/tc1.txt"
expect_match "$TMP/tc1.txt" ' main$' "the threadcreate dump names main"

# 2. SIGUSR1 twice, then a normal exit: three dumps of each profile, and
# CPU windows that follow one another without overlapping.
crun --dump cpu,threadcreate=debug=1 --dump-out "$TMP/usr1.log" -- "$prog" 2 >"$TMP/out2" &
pid=$!
wait_ready "$TMP/out2"
sleep 0.5; kill -USR1 $pid
sleep 0.5; kill -USR1 $pid
wait $pid || fail "the program did not exit normally after SIGUSR1"
echo "ok: SIGUSR1 dumped and the program carried on to a normal exit"
n=$(grep -c '^-----BEGIN PPROF CPU-----$' "$TMP/usr1.log")
[ "$n" -eq 3 ] || fail "expected 3 CPU dumps, found $n"
n=$(grep -c '^-----BEGIN PPROF THREADCREATE-----$' "$TMP/usr1.log")
[ "$n" -eq 3 ] || fail "expected 3 threadcreate dumps, found $n"
echo "ok: three dumps of each profile"
"$cprof" extract -o "$TMP/x2" "$TMP/usr1.log" >/dev/null
[ "$(ls "$TMP"/x2/cpu-*.pb.gz | wc -l)" -eq 3 ] || fail "expected 3 CPU files"
[ "$(ls "$TMP"/x2/threadcreate-*.txt | wc -l)" -eq 3 ] || fail "expected 3 threadcreate text files"
expect_match "$(ls "$TMP"/x2/threadcreate-*.txt | head -1)" '^threadcreate profile: total 2$' "text dump extracted as text"
# Window k ends before window k+1 starts (ns from -raw's Time, Duration).
prev_end=0
for f in $(ls "$TMP"/x2/cpu-*.pb.gz | sort -t- -k3 -n); do
  pprof -raw "$f" >"$TMP/w.txt"
  t=$(sed -n 's/^Time: //p' "$TMP/w.txt" | sed 's/ UTC$//')
  start=$(date -d "$t" +%s%N)
  dur=$(sed -n 's/^Duration: //p' "$TMP/w.txt" | awk '
    /ms$/ {sub(/ms$/, ""); printf "%d", $0 * 1e6; exit}
    /s$/ {sub(/s$/, ""); printf "%d", $0 * 1e9; exit}')
  [ "$start" -ge "$prev_end" ] || fail "CPU window $f starts before the previous one ended"
  prev_end=$((start + dur - 1000000))  # Duration is printed to 4 digits
done
echo "ok: the three CPU windows do not overlap"
checks=$((checks + 1))

# 3. The program logs to stderr while it is dumped there.
crun --dump cpu,threadcreate -- "$prog" 1.5 1 >"$TMP/out3" 2>"$TMP/mixed.log" &
pid=$!
wait_ready "$TMP/out3"
sleep 0.3; kill -USR1 $pid
sleep 0.3; kill -USR1 $pid
wait $pid || fail "the logging program failed"
expect_match "$TMP/mixed.log" '^app: working, line [0-9]+$' "the program's own lines are in the log"
"$cprof" extract -o "$TMP/x3" "$TMP/mixed.log" >"$TMP/extract3.txt" || { cat "$TMP/extract3.txt"; fail "extract failed on a mixed log"; }
expect_match "$TMP/extract3.txt" '6 profiles written' "all six blocks extracted from a mixed log"

# 4. Every line of the log carrying a prefix, as a log collector writes it.
sed 's/^/2026-11-30T10:00:00Z myapp[42]: /' "$TMP/term.log" >"$TMP/prefixed.log"
"$cprof" extract -o "$TMP/x4" "$TMP/prefixed.log" >"$TMP/extract4.txt"
expect_match "$TMP/extract4.txt" '2 profiles written' "blocks with a log prefix extracted"
pprof -top "$(ls "$TMP"/x4/cpu-*.pb.gz)" >"$TMP/cpu4.txt"
expect_match "$TMP/cpu4.txt" ' worker_spin$' "the prefixed CPU dump reads back"

# 5. A corrupt block and a truncated one among good ones: each good block
# is extracted, each bad one reported with its line, status 1.
# Corrupt one base64 character in the first CPU block's data.
awk 'BEGIN { done = 0 }
  /^-----BEGIN PPROF CPU-----$/ { inblk = 1 }
  inblk && !done && length($0) == 64 && /^[A-Za-z0-9+\/]+$/ { n++; if (n == 2) { $0 = "!" substr($0, 2); done = 1 } }
  /^-----END PPROF CPU-----$/ { inblk = 0 }
  { print }' "$TMP/usr1.log" >"$TMP/bad.log"
# Truncate: append the first half of a block with no END line.
{ sed -n '/^-----BEGIN PPROF THREADCREATE-----$/,/^-----END PPROF THREADCREATE-----$/p' "$TMP/term.log" | head -4; } >>"$TMP/bad.log"
bad_begin=$(grep -n '^-----BEGIN PPROF CPU-----$' "$TMP/bad.log" | head -1 | cut -d: -f1)
trunc_begin=$(grep -n '^-----BEGIN PPROF THREADCREATE-----$' "$TMP/bad.log" | tail -1 | cut -d: -f1)
if "$cprof" extract -o "$TMP/x5" "$TMP/bad.log" >"$TMP/extract5.txt" 2>"$TMP/extract5.err"; then
  fail "extract succeeded on a log with bad blocks"
fi
expect_match "$TMP/extract5.err" "line $bad_begin: PPROF CPU block: " "the corrupt block is reported at its line"
expect_match "$TMP/extract5.err" "line $trunc_begin: PPROF THREADCREATE block: truncated" "the truncated block is reported at its line"
expect_match "$TMP/extract5.txt" '5 profiles written' "the five intact blocks are extracted"
finish
