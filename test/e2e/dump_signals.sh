#!/usr/bin/env bash
# What a dump signal does to the thread it interrupts. SIGTERM and SIGINT
# whose disposition was the default must end the program without it
# running another instruction of its own: a program parked in pause()
# dies of the signal, after the dump, instead of returning from pause().
# SIGUSR1 dumps and the program carries on, its blocking read restarted
# (SA_RESTART). A SIGTERM handler the program installed without
# SA_RESTART still interrupts the program's read, after the dump.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host

wait_for() { # FILE REGEX
  for _ in $(seq 200); do grep -Eq -- "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  fail "timed out waiting for /$2/ in $1"
}

# bash starts background commands with SIGINT ignored, and cprof leaves an
# ignored signal alone: give the program SIGINT's default back.
dfl=()
env --default-signal=INT true 2>/dev/null && dfl=(env --default-signal=INT)

run_until_signal() { # NAME SIGNAL MODE: sets status
  CPROF_DUMP=threadcreate CPROF_DUMP_OUT="$TMP/$1.log" "${dfl[@]}" "$host" "$3" >"$TMP/$1.out" 2>"$TMP/$1.err" &
  local pid=$!
  track $pid
  wait_for "$TMP/$1.out" '^ready$'
  kill -"$2" $pid
  status=0
  wait $pid || status=$?
}

sigs=(TERM)
[ ${#dfl[@]} -gt 0 ] && sigs+=(INT)
for sig in "${sigs[@]}"; do
  run_until_signal pause_$sig $sig pause
  want=$((128 + $(kill -l $sig)))
  echo "SIG$sig in pause(): exit status $status"
  [ "$status" -eq "$want" ] || { cat "$TMP/pause_$sig.out"; fail "SIG$sig: status $status, want $want (death by the signal)"; }
  expect_no_match "$TMP/pause_$sig.out" 'pause returned' "SIG$sig: the program did not run on after pause()"
  expect_match "$TMP/pause_$sig.log" "^Reason: SIG$sig\$" "SIG$sig: the dump was written before the program died"
done

# SIGUSR1: the read is restarted, the program carries on; SIGTERM ends it.
# ThreadSanitizer runs a handler only when the interrupted call returns, and
# a restarted read never does: the SIGUSR1 dump cannot happen there.
if tsan_build "$host"; then
  echo "skip: SIGUSR1 during read(): ThreadSanitizer defers the handler until the read returns"
else
  CPROF_DUMP=threadcreate CPROF_DUMP_OUT="$TMP/read.log" "$host" read >"$TMP/read.out" 2>"$TMP/read.err" &
  pid=$!
  track $pid
  wait_for "$TMP/read.out" '^ready$'
  kill -USR1 $pid
  wait_for "$TMP/read.log" '^-----END PPROF THREADCREATE-----$'
  sleep 0.2
  kill -USR1 $pid
  sleep 0.3
  kill -0 $pid 2>/dev/null || fail "SIGUSR1 ended the program"
  kill -TERM $pid
  status=0
  wait $pid || status=$?
  [ "$status" -eq 143 ] || { cat "$TMP/read.out"; fail "status $status after SIGUSR1 and SIGTERM, want 143"; }
  expect_no_match "$TMP/read.out" 'read (interrupted|returned)' "SIGUSR1 did not interrupt the program's read"
  [ "$(grep -c '^Reason: SIGUSR1$' "$TMP/read.log")" -eq 2 ] || fail "expected two SIGUSR1 dumps"
  expect_match "$TMP/read.log" '^Reason: SIGTERM$' "SIGUSR1 dumped twice, then SIGTERM dumped and ended the program"
fi

# The program's own SIGTERM handler, installed without SA_RESTART before
# dumps were configured: it runs after the dump and the read sees EINTR.
"$host" chain >"$TMP/chain.out" 2>"$TMP/chain.err" &
pid=$!
track $pid
wait_for "$TMP/chain.out" '^ready$'
kill -TERM $pid
status=0
(sleep 10; kill -KILL $pid 2>/dev/null) >/dev/null 2>&1 &
watchdog=$!
wait $pid || status=$?
kill $watchdog 2>/dev/null || true
echo "program's own SIGTERM handler: exit status $status"
[ "$status" -eq 0 ] || { cat "$TMP/chain.out"; fail "status $status (137: the read was never interrupted)"; }
expect_match "$TMP/chain.out" '^read interrupted, handler ran$' "the program's handler ran and its read was interrupted, as without cprof"
expect_match "$TMP/chain.err" '^Reason: SIGTERM$' "after the dump"
finish
