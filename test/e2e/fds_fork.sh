#!/usr/bin/env bash
# A fork child that does not exec and outlives its parent must not hold
# cprof's HTTP port: once the parent has exited, a request to the port is
# refused at once (not left hanging in a backlog nobody accepts from), and
# a restarted server binds the same port. The child's descriptors are
# listed to show that no socket of cprof's went with it.
source "$(dirname "$0")/lib.bash"

prog=$CPROFTEST_BUILD/test/progs/fds_forker
CPROF_HTTP=127.0.0.1:0 "$prog" fork 30 >"$TMP/parent.out" 2>"$TMP/parent.err" ||
  { cat "$TMP/parent.err"; fail "the forking program failed"; }
cat "$TMP/parent.out" "$TMP/parent.err"
child=$(awk '/^child/ {print $2}' "$TMP/parent.out")
port=$(sed -n 's/.*serving \/debug\/pprof\/ on .* (port \([0-9]*\)).*/\1/p' "$TMP/parent.err")
[ -n "$child" ] && [ -n "$port" ] || fail "no child pid or no endpoint port"
track "$child"
kill -0 "$child" || fail "the child did not outlive its parent"
echo "parent exited; child $child alive; its descriptors:"
for f in /proc/"$child"/fd/*; do echo "  ${f##*/} -> $(readlink "$f")"; done | tee "$TMP/child.fds"
# The child's sockets in the listening state on cprof's port, if any.
hexport=$(printf '%04X' "$port")
listening=$(awk -v p=":$hexport" '$2 ~ p"$" && $4 == "0A" {print $10}' /proc/net/tcp /proc/net/tcp6)
held=0
for ino in $listening; do
  grep -q "socket:\[$ino\]" "$TMP/child.fds" && held=1
done
[ "$held" = 0 ] || fail "the child holds a socket listening on cprof's port $port"
echo "ok: the child holds no socket listening on port $port"
checks=$((checks + 1))

python3 - "$port" >"$TMP/request.txt" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
start = time.time()
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(b"GET /debug/pprof/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
    got = s.recv(64)
    print("answered: %r" % got[:20])
except socket.timeout:
    print("hung: no answer after 3 s")
except OSError as e:
    print("refused: %s after %.2f s" % (e.__class__.__name__, time.time() - start))
PY
cat "$TMP/request.txt"
expect_match "$TMP/request.txt" "^refused: ConnectionRefusedError" "a request to the dead parent's port is refused, not left hanging"

CPROF_HTTP=127.0.0.1:$port "$prog" serve >"$TMP/again.out" 2>"$TMP/again.err" &
again=$!
track "$again"
for _ in $(seq 100); do
  [ -s "$TMP/again.out" ] && break
  sleep 0.05
done
cat "$TMP/again.err"
expect_match "$TMP/again.err" "serving /debug/pprof/ on 127.0.0.1:$port" "a restarted server binds port $port while the child lives"
expect_no_match "$TMP/again.err" "Address already in use" "no 'Address already in use'"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/debug/pprof/")
[ "$code" = 200 ] || fail "the restarted server answered $code"
echo "ok: the restarted server answers 200"
checks=$((checks + 1))
kill -TERM "$again"
wait "$again" || fail "the restarted server did not exit cleanly"
finish
