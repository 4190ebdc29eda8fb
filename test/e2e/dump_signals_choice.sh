#!/usr/bin/env bash
# Which signals dump (CPROF_DUMP_SIGNALS). Servers own signals: nginx
# reopens its logs on SIGUSR1. Checked with test/progs/dump_host:
#   - a program that installs its own SIGUSR1 handler keeps it: the handler
#     runs for each signal, no SIGUSR1 dump is written, and cprof says once
#     on stderr that SIGUSR1 no longer dumps;
#   - CPROF_DUMP_SIGNALS=USR2 (and `cprof run --dump-signals USR2`): SIGUSR2
#     dumps and the program carries on, its own SIGUSR1 handler untouched;
#   - SIGRTMIN+5 named: it dumps, Reason: SIGRTMIN+5;
#   - HUP named: a final dump, then the program dies of SIGHUP;
#   - none: SIGUSR1 has its default action (the program dies of it, no
#     dump), the exit dump stays;
#   - a bad value: one quoted line, no signal dumps, the exit dump stays.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
cprof=$CPROFTEST_BUILD/cprof

wait_for() { # FILE REGEX
  for _ in $(seq 200); do grep -Eq -- "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  fail "timed out waiting for /$2/ in $1"
}
reasons() { grep '^Reason: ' "$1" | sort | uniq -c | awk '{ printf "%s x%d; ", $3, $1 }'; }
# start NAME SIGNALS MODE ARG: runs dump_host MODE ARG with a threadcreate
# dump into $TMP/NAME.log and CPROF_DUMP_SIGNALS=SIGNALS ("-": unset), in
# the background (tracked), and waits until it is ready; sets pid.
start() {
  local env=(CPROF_DUMP=threadcreate CPROF_DUMP_OUT="$TMP/$1.log")
  [ "$2" != - ] && env+=(CPROF_DUMP_SIGNALS="$2")
  env "${env[@]}" "$host" "$3" "$4" >"$TMP/$1.out" 2>"$TMP/$1.err" &
  pid=$!
  track $pid
  wait_for "$TMP/$1.out" '^ready$'
}
# ended: waits for the program started last; sets status.
ended() {
  status=0
  wait $pid || status=$?
}
# usr1_ended NAME N: waits for the program started last as NAME (mode
# own-usr1), which must exit 0 having run its SIGUSR1 handler N times,
# with its exit dump written.
usr1_ended() {
  ended
  echo "$1: status $status, $(tr '\n' ' ' <"$TMP/$1.out"); reasons: $(reasons "$TMP/$1.log")"
  [ "$status" -eq 0 ] || { cat "$TMP/$1.err"; fail "$1: status $status"; }
  expect_match "$TMP/$1.out" "^usr1 handled $2\$" "$1: the program's own SIGUSR1 handler ran $2 times"
  expect_match "$TMP/$1.log" '^Reason: exit$' "$1: the exit dump is written"
}

# ThreadSanitizer defers a handler to the end of the interrupted call; the
# program's sleeps end every 10 ms, so every case below still works there.

# 1. The program's own SIGUSR1 handler, dump signals left as they are.
start own - own-usr1 2
kill -USR1 $pid
sleep 0.2
kill -USR1 $pid
usr1_ended own 2
expect_no_match "$TMP/own.log" '^Reason: SIGUSR1$' "no SIGUSR1 dump once the program took SIGUSR1"
lines=$(grep -c "^cprof: dump: the program set SIGUSR1's disposition itself; SIGUSR1 no longer dumps (CPROF_DUMP_SIGNALS chooses the dump signals)$" "$TMP/own.err" || true)
echo "stderr: $(cat "$TMP/own.err")"
[ "$lines" -eq 1 ] || fail "expected the line saying SIGUSR1 no longer dumps once, got $lines"
checks=$((checks + 1))
echo "ok: cprof said once that SIGUSR1 is the program's"

# 2. SIGUSR2 chosen: it dumps, the program's SIGUSR1 stays its own and
# nothing is said about it. Through cprof run's flag too.
start usr2 USR2 own-usr1 1
kill -USR2 $pid
wait_for "$TMP/usr2.log" '^Reason: SIGUSR2$'
kill -USR1 $pid
usr1_ended usr2 1
expect_no_match "$TMP/usr2.err" 'no longer dumps' "usr2: nothing said about SIGUSR1, which is not a dump signal"
if tsan_build "$host"; then
  skip_check "cprof run --dump-signals: the TSan build cannot preload (lib.bash)"
else
  rt=$(preload_env "$host" | sed 's#[^ ]*libcprof\.so##')
  LD_PRELOAD="$rt" "$cprof" run --dump threadcreate --dump-signals SIGUSR2 \
    --dump-out "$TMP/run.log" -- sleep 20 >"$TMP/run.out" 2>"$TMP/run.err" &
  pid=$!
  track $pid
  for _ in $(seq 100); do [ "$(cat /proc/$pid/comm 2>/dev/null)" = sleep ] && break; sleep 0.05; done
  sleep 0.2
  kill -USR2 $pid
  wait_for "$TMP/run.log" '^Reason: SIGUSR2$'
  kill -TERM $pid
  ended
  echo "cprof run --dump-signals SIGUSR2, sleep: status $status; reasons: $(reasons "$TMP/run.log")"
  [ "$status" -eq 143 ] || { cat "$TMP/run.err"; fail "cprof run: status $status, want 143"; }
  expect_no_match "$TMP/run.log" '^Reason: SIGTERM$' "cprof run --dump-signals SIGUSR2: SIGTERM, not listed, is sleep's own"
fi

# 3. A real-time signal.
start rt TERM,RTMIN+5 sleep 20
kill -s RTMIN+5 $pid
wait_for "$TMP/rt.log" '^Reason: SIGRTMIN\+5$'
kill -0 $pid 2>/dev/null || fail "SIGRTMIN+5 ended the program"
checks=$((checks + 1))
echo "ok: SIGRTMIN+5 dumped and the program carried on"
kill -TERM $pid
ended
[ "$status" -eq 143 ] || fail "SIGTERM: status $status, want 143"
expect_match "$TMP/rt.log" '^Reason: SIGTERM$' "SIGTERM, listed, made the final dump"

# 4. HUP: a final dump, then death by SIGHUP.
start hup HUP sleep 20
kill -HUP $pid
ended
echo "SIGHUP: status $status; reasons: $(reasons "$TMP/hup.log")"
[ "$status" -eq 129 ] || fail "SIGHUP: status $status, want 129 (death by SIGHUP)"
expect_match "$TMP/hup.log" '^Reason: SIGHUP$' "SIGHUP dumped before the program died of it"

# 5. none: SIGUSR1 keeps its default action.
start none none sleep 20
kill -USR1 $pid
ended
echo "none, SIGUSR1: status $status; reasons: $(reasons "$TMP/none.log")"
[ "$status" -eq 138 ] || fail "none: SIGUSR1 gave status $status, want 138 (its default action)"
expect_no_match "$TMP/none.log" '^Reason: ' "none: no dump on SIGUSR1"
CPROF_DUMP=threadcreate CPROF_DUMP_SIGNALS=none CPROF_DUMP_OUT="$TMP/none_exit.log" "$host" sleep 0 >/dev/null 2>&1 ||
  fail "none: the program failed"
expect_match "$TMP/none_exit.log" '^Reason: exit$' "none: the exit dump stays"

# 6. A bad value: one quoted line, no signal dumps, the exit dump stays.
start bad 'USR1,USR3' own-usr1 1
kill -USR1 $pid
ended
echo "bad value: stderr: $(cat "$TMP/bad.err")"
# cprof's lines (a sanitizer runtime may add its own).
lines=$(grep -c '^cprof:' "$TMP/bad.err" || true)
[ "$lines" -eq 1 ] || fail "a bad value: $lines lines from cprof on stderr, want 1"
expect_match "$TMP/bad.err" '^cprof: CPROF_DUMP_SIGNALS="USR1,USR3": a name that is not TERM, INT, HUP, USR1, USR2, RTMIN\+N or RTMAX-N \(or none\); no signal dumps, the exit dump stays$' \
  "a bad value: one quoted line"
expect_match "$TMP/bad.out" '^usr1 handled 1$' "a bad value: the program's signals are its own"
expect_match "$TMP/bad.log" '^Reason: exit$' "a bad value: the exit dump stays"
finish
