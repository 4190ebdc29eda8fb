#!/usr/bin/env bash
# More clients than max_connections wait in the kernel's backlog and are
# answered when a connection frees up, rather than being accepted and
# closed at once. With --max-connections 2, two 2-second deltas take both
# slots; three more requests sent meanwhile are each answered, after a
# delta ends.
source "$(dirname "$0")/lib.bash"

start_server backlog --max-connections 2 --log
BL=$PID

python3 - "$PORT" >"$TMP/backlog.txt" <<'PY'
import socket, sys, time
import os
sys.path.insert(0, os.environ["CPROFTEST_SRC"] + "/test/e2e")
from rawhttp import read_all
port = int(sys.argv[1])
def send(path):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET /debug/pprof/%s HTTP/1.1\r\nHost: localhost\r\n"
               "Connection: close\r\n\r\n" % path).encode())
    return s
def answer(s):
    out = read_all(s, 30)
    return out
start = time.time()
deltas = [send("threadcreate?seconds=2") for _ in range(2)]
time.sleep(0.5) # both accepted and running
waiting = [send("threadcreate?debug=1") for _ in range(3)]
for s in deltas + waiting:
    out = answer(s)
    first = out.split(b"\r\n")[0].decode() or "(empty reply)"
    print("%s after %.1f s%s" % (first, time.time() - start,
          " with the threadcreate text" if b"threadcreate profile: total" in out else ""))
PY
cat "$TMP/backlog.txt"
[ "$(grep -c '^HTTP/1.1 200 OK' "$TMP/backlog.txt")" = 5 ] || fail "not every request was answered"
[ "$(grep -c 'with the threadcreate text$' "$TMP/backlog.txt")" = 3 ] || fail "the waiting requests did not get their profile"
echo "ok: 2 running deltas, 3 clients waited in the backlog and were answered"
checks=$((checks + 1))
stop_server "$BL" backlog
finish
