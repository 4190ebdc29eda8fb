#!/usr/bin/env bash
# A daemon that closes every descriptor it did not open, first thing in
# main, with cprof's endpoint on (CPROF_HTTP, started by the constructor
# before main): it must serve all its connections, its data file must be
# byte-identical to an unprofiled run's, and cprof's endpoint must go on
# serving, since its descriptors are protected from the program's close,
# close_range and closefrom. With the close_range system call itself
# (which no interposer sees), the daemon must still serve everything
# with the same data, and the endpoint stops with one line on stderr the
# next time it is used, never touching the numbers the program now holds.
source "$(dirname "$0")/lib.bash"

prog=$CPROFTEST_BUILD/test/progs/fds_daemon
N=6

# client.py DAEMON_PORT CPROF_PORT N: N connections to the daemon, each
# after a request to cprof's endpoint; prints one line for each.
cat >"$TMP/client.py" <<'PY'
import socket, sys
dport, cport, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def endpoint(i):
    try:
        s = socket.create_connection(("127.0.0.1", cport), timeout=3)
        s.sendall(b"GET /debug/pprof/ HTTP/1.1\r\nHost: localhost\r\n"
                  b"Connection: close\r\n\r\n")
        head = s.recv(64).split(b"\r\n")[0].decode() or "(empty reply)"
        s.close()
    except OSError as e:
        head = "error " + e.__class__.__name__
    print("endpoint before %d: %s" % (i, head))
for i in range(n):
    if cport:
        endpoint(i)
    try:
        s = socket.create_connection(("127.0.0.1", dport), timeout=5)
        s.sendall(b"hello %d\n" % i)
        got = s.recv(64)
        s.close()
        print("daemon %d: %s" % (i, got.decode().strip() or "(closed)"))
    except OSError as e:
        print("daemon %d: error %s" % (i, e.__class__.__name__))
PY

# run NAME HOW [cprof]: runs the daemon (with the endpoint when the third
# argument is given) and its client; leaves $TMP/NAME.{out,err,client,data}.
run() {
  local name=$1 how=$2 env=()
  [ $# -gt 2 ] && env=(CPROF_HTTP=127.0.0.1:0)
  env "${env[@]}" "$prog" "$how" "$TMP/$name.data" "$N" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  local pid=$!
  track "$pid"
  for _ in $(seq 200); do
    [ -s "$TMP/$name.out" ] && break
    sleep 0.05
  done
  local dport cport=0
  dport=$(awk '{print $2}' "$TMP/$name.out")
  [ -n "$dport" ] || { cat "$TMP/$name.err"; fail "$name: the daemon did not start"; }
  if [ $# -gt 2 ]; then
    cport=$(sed -n 's/.*serving \/debug\/pprof\/ on .* (port \([0-9]*\)).*/\1/p' "$TMP/$name.err")
    [ -n "$cport" ] || { cat "$TMP/$name.err"; fail "$name: cprof's endpoint did not start"; }
  fi
  timeout 60 python3 "$TMP/client.py" "$dport" "$cport" "$N" >"$TMP/$name.client" || true
  # A daemon that lost its connections waits for ever: ended here.
  timeout 10 tail --pid="$pid" -f /dev/null || kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" && echo "exit 0" >>"$TMP/$name.client" || echo "exit $?" >>"$TMP/$name.client"
  echo "---- $name ($how$([ $# -gt 2 ] && echo ", cprof endpoint on port $cport")): $(cat "$TMP/$name.out")"
  cat "$TMP/$name.client" "$TMP/$name.err"
  echo "data file: $(wc -c <"$TMP/$name.data") bytes"
}

run plain loop
[ "$(grep -c '^daemon [0-9]*: ok' "$TMP/plain.client")" = "$N" ] || fail "the unprofiled daemon did not serve its connections"

for how in loop close_range closefrom; do
  run "$how" "$how" cprof
  expect_match "$TMP/$how.client" "^exit 0$" "$how: the daemon served all $N connections and exited 0"
  [ "$(grep -c '^daemon [0-9]*: ok' "$TMP/$how.client")" = "$N" ] || fail "$how: a daemon connection was not answered"
  cmp "$TMP/plain.data" "$TMP/$how.data" || {
    od -c "$TMP/$how.data" | head -20
    fail "$how: the data file differs from the unprofiled run's"
  }
  echo "ok: $how: the data file is byte-identical to the unprofiled run's"
  checks=$((checks + 1))
  [ "$(grep -c '^endpoint before [0-9]*: HTTP/1.1 200 OK' "$TMP/$how.client")" = "$N" ] ||
    fail "$how: cprof's endpoint did not answer every request"
  echo "ok: $how: cprof's endpoint went on serving (200 to all $N requests)"
  checks=$((checks + 1))
  expect_no_match "$TMP/$how.err" "stopped|refused" "$how: cprof printed nothing more"
done

run raw raw cprof
expect_match "$TMP/raw.client" "^exit 0$" "raw: the daemon served all $N connections and exited 0"
cmp "$TMP/plain.data" "$TMP/raw.data" || {
  od -c "$TMP/raw.data" | head -20
  fail "raw: the data file differs from the unprofiled run's"
}
echo "ok: raw: the data file is byte-identical to the unprofiled run's"
checks=$((checks + 1))
[ "$(grep -c 'HTTP endpoint on port [0-9]* stopped' "$TMP/raw.err")" = 1 ] ||
  fail "raw: cprof did not say once that its endpoint stopped"
echo "ok: raw: cprof's endpoint stopped, said so once: $(grep 'stopped' "$TMP/raw.err")"
checks=$((checks + 1))
finish
