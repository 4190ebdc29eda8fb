#!/usr/bin/env bash
# CPROF_DUMP_OUT naming a FIFO that nobody reads: the library must not
# block in open() at start-up (the program would never reach main). It
# says so in one line, dumps to stderr meanwhile, and writes into the
# FIFO once a reader has opened it.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
mkfifo "$TMP/fifo"

# No reader ever: the program runs and exits at once, and its exit dump
# goes to stderr.
status=0
t0=$(date +%s%N)
CPROF_DUMP=threadcreate CPROF_DUMP_OUT="$TMP/fifo" timeout -s KILL 10 "$host" rates >"$TMP/out1" 2>"$TMP/err1" || status=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "no reader: exit status $status after $ms ms"
[ "$status" -eq 0 ] || fail "the program did not run to its end (status $status after $ms ms; 137 is the timeout's SIGKILL)"
expect_match "$TMP/out1" '^mutex=' "main ran"
expect_match "$TMP/err1" '^cprof: CPROF_DUMP_OUT=".*/fifo": a FIFO with no reader yet; ' "one line says what happened"
[ "$(grep -c '^cprof:' "$TMP/err1")" -eq 1 ] || fail "expected exactly one cprof line"
expect_match "$TMP/err1" '^-----BEGIN PPROF THREADCREATE-----$' "the dump went to stderr"

# A reader that comes later gets the dumps made after it opened the FIFO.
CPROF_DUMP=threadcreate CPROF_DUMP_OUT="$TMP/fifo" "$host" park >"$TMP/out2" 2>"$TMP/err2" &
pid=$!
track $pid
for _ in $(seq 200); do grep -q ready "$TMP/out2" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$TMP/out2" || fail "the program did not start"
cat "$TMP/fifo" >"$TMP/fifo.log" &
reader=$!
track $reader
sleep 0.3
kill -USR1 $pid
for _ in $(seq 200); do grep -q '^-----END PPROF THREADCREATE-----$' "$TMP/fifo.log" && break; sleep 0.05; done
kill -TERM $pid
status=0
wait $pid || status=$?
[ "$status" -eq 143 ] || fail "expected death by SIGTERM, got $status"
wait $reader || true
expect_match "$TMP/fifo.log" '^Reason: SIGUSR1$' "the dump after the reader opened went into the FIFO"
expect_match "$TMP/fifo.log" '^Reason: SIGTERM$' "so did the final one"
expect_no_match "$TMP/err2" '^-----BEGIN' "nothing was dumped to stderr once the FIFO had a reader"
finish
