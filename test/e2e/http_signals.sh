#!/usr/bin/env bash
# The application's signals stay the application's: with the endpoint
# started by the constructor (CPROF_HTTP, preloaded), a program that then
# blocks SIGUSR1 and SIGTERM in main and reads them from a signalfd
# receives every one of them, while cprof's threads (libmicrohttpd's
# listener, a connection's thread, the accept thread) block every signal
# and so are never picked to run one (the default action of SIGUSR1 and
# SIGTERM would kill the process).
source "$(dirname "$0")/lib.bash"
plain=$CPROFTEST_BUILD/test/progs/plain_signalfd
tsan_build "$plain" && skip_rest "preloaded runs under TSan (see lib.bash)"

mkfifo "$TMP/out"
CPROF_HTTP=127.0.0.1:0 LD_PRELOAD=$(preload_env "$plain") "$plain" <"$TMP/out" >"$TMP/sig.out" 2>"$TMP/sig.err" &
SIG=$!
track $SIG
exec 3>"$TMP/out" # keeps its stdin open
for _ in $(seq 100); do grep -q ready "$TMP/sig.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$TMP/sig.out" || { cat "$TMP/sig.err"; fail "the program did not start"; }
port=$(sed -nE 's/.*serving \/debug\/pprof\/ on .* \(port ([0-9]+)\)$/\1/p' "$TMP/sig.err")
[ -n "$port" ] || { cat "$TMP/sig.err"; fail "no server"; }

# A connection kept open, so that a connection thread exists too.
python3 - "$port" <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /debug/pprof/cmdline HTTP/1.1\r\nHost: localhost\r\n\r\n")
s.recv(65536)
time.sleep(8)
PY
holder=$!
track $holder
sleep 0.5
echo "threads and the signals they block:"
for t in /proc/$SIG/task/*; do
  echo "  thread ${t##*/} $(cat "$t/comm"): SigBlk=$(awk '/^SigBlk:/ {print $2}' "$t/status")"
done
died() {
  local st=0
  wait $SIG || st=$?
  fail "the process died (exit status $st) after $1 SIGUSR1 reached its signalfd"
}
for i in $(seq 20); do
  kill -USR1 $SIG 2>/dev/null || died $((i - 1))
  for _ in $(seq 200); do grep -qx "usr1 $i" "$TMP/sig.out" && break; kill -0 $SIG 2>/dev/null || break; sleep 0.01; done
  grep -qx "usr1 $i" "$TMP/sig.out" || { kill -0 $SIG 2>/dev/null && fail "SIGUSR1 number $i did not reach the program's signalfd"; died $((i - 1)); }
done
echo "ok: 20 SIGUSR1 received through the program's signalfd"
checks=$((checks + 1))
for t in /proc/$SIG/task/*; do
  tid=${t##*/}
  blk=$(awk '/^SigBlk:/ {print $2}' "$t/status")
  # Every thread but main is cprof's. SIGUSR1 is bit 9, SIGTERM bit 14.
  [ "$tid" = "$SIG" ] || { (((0x$blk >> 9) & 1)) && (((0x$blk >> 14) & 1)); } ||
    fail "thread $tid ($(cat "$t/comm")) does not block SIGUSR1 and SIGTERM"
done
n=$(ls /proc/$SIG/task | wc -l)
[ "$n" -ge 4 ] || fail "expected the main thread and at least three of cprof's, found $n threads"
echo "ok: all $((n - 1)) of cprof's threads block SIGUSR1 and SIGTERM"
checks=$((checks + 1))

kill -TERM $SIG
status=0
wait $SIG || status=$?
[ "$status" = 0 ] || fail "exit status $status after SIGTERM (want 0: read from the signalfd, then a return from main)"
expect_match "$TMP/sig.out" '^term 20$' "SIGTERM read from the signalfd, the program returned 0"
finish
