#!/usr/bin/env bash
# Request bodies: nothing of a body is read before the request is admitted
# (32 clients each sending 4 MB without the token get their 401 at once,
# and the server's resident set does not grow by what they sent); a body
# over the limit is refused from its Content-Length; and the bodies one
# server buffers at once are bounded over all connections, not only per
# request (the clients over the budget get 503, the others their answer).
source "$(dirname "$0")/lib.bash"
# The resident set is measured: under ASan, freed memory must not sit in
# its quarantine (the leak check at exit still runs); under TSan, whose
# shadow memory grows with every thread and byte touched, it is shown but
# not checked.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
rss_checked() {
  ! tsan_build "$CPROFTEST_BUILD/test/progs/http_server" || { echo "note: TSan build, resident set not checked"; return 1; }
}

start_server body --token s3cret --log
BODY=$PID
before=$(rss_kb "$BODY")
peak_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

# flood AUTH: 32 connections, each announcing and sending 4 MB to /symbol;
# prints the first status line each got, one per line.
flood() {
  python3 - "$PORT" "$1" <<'PY'
import select, socket, sys, time
import os
sys.path.insert(0, os.environ["CPROFTEST_SRC"] + "/test/e2e")
from rawhttp import read_all
port, auth = int(sys.argv[1]), sys.argv[2]
size = 4 * 1024 * 1024
head = ("POST /debug/pprof/symbol HTTP/1.1\r\nHost: localhost\r\n%s"
        "Content-Length: %d\r\n\r\n" % (auth, size)).encode()
chunk = b"0x1+" * 16384
conns = []
for _ in range(32):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head)
    s.setblocking(False)
    conns.append({"s": s, "sent": 0, "got": b"", "done": False})
end = time.time() + 30
while time.time() < end and not all(c["done"] for c in conns):
    live = [c for c in conns if not c["done"]]
    r, w, _ = select.select([c["s"] for c in live],
                            [c["s"] for c in live if c["sent"] < size], [], 1)
    for c in live:
        s = c["s"]
        if s in w:
            try:
                c["sent"] += s.send(chunk[: size - c["sent"]])
            except OSError:
                c["sent"] = size
        if s in r:
            try:
                d = s.recv(65536)
            except OSError:
                d = b""
            c["got"] += d
            if not d:
                c["done"] = True
for c in conns:
    print(c["got"].split(b"\r\n")[0].decode() or "(nothing)")
    c["s"].close()
PY
}

flood "" >"$TMP/noauth.txt"
peak=$(peak_kb "$BODY")
grow=$((peak - before))
sort "$TMP/noauth.txt" | uniq -c
echo "RSS ${before} KiB, peak ${peak} KiB while 32 clients sent 4 MB each without the token (+${grow} KiB)"
if rss_checked; then
  [ "$grow" -lt 16384 ] || fail "the server's peak grew by $grow KiB (it buffered the bodies)"
  echo "ok: the bodies were not buffered (+$grow KiB at the peak, limit 16384 KiB)"
fi
[ "$(grep -c '^HTTP/1.1 401 Unauthorized$' "$TMP/noauth.txt")" = 32 ] || fail "not every client got 401"
echo "ok: 32 clients without the token got 401"
checks=$((checks + 2))

# With the token, a body over the limit is refused from its length.
flood "Authorization: Bearer s3cret
" | tr -d '\r' >"$TMP/auth.txt"
sort "$TMP/auth.txt" | uniq -c
[ "$(grep -c '^HTTP/1.1 413 ' "$TMP/auth.txt")" = 32 ] || fail "not every 4 MB body got 413"
echo "ok: 32 bodies of 4 MB with the token got 413 from their Content-Length"
checks=$((checks + 1))

# The budget over all connections: 32 bodies of 60,000 bytes (each within
# the 64 KiB limit) held open at once need 1.9 MB; the server buffers at
# most 1 MiB, so some clients get 503 at once and the others, once their
# bodies are complete, 200.
python3 - "$PORT" >"$TMP/budget.txt" <<'PY'
import socket, sys, time
import os
sys.path.insert(0, os.environ["CPROFTEST_SRC"] + "/test/e2e")
from rawhttp import read_all
port = int(sys.argv[1])
body = b"0x1+" + b"z" * 59996  # two words: a real address, one skipped
head = ("POST /debug/pprof/symbol HTTP/1.1\r\nHost: localhost\r\n"
        "Authorization: Bearer s3cret\r\nConnection: close\r\n"
        "Content-Length: %d\r\n\r\n" % len(body)).encode()
conns = []
for _ in range(32):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head + body[:1000])
    conns.append(s)
time.sleep(1)
for s in conns:
    try:
        s.sendall(body[1000:])
    except OSError:
        pass
for s in conns:
    out = read_all(s, 20)
    print(out.split(b"\r\n")[0].decode() or "(nothing)")
    if out.startswith(b"HTTP/1.1 503"):
        print(out.split(b"\r\n\r\n", 1)[1].decode().strip())
PY
sort "$TMP/budget.txt" | uniq -c
ok=$(grep -c '^HTTP/1.1 200 OK$' "$TMP/budget.txt" || true)
busy=$(grep -c '^HTTP/1.1 503 Service Unavailable$' "$TMP/budget.txt" || true)
[ $((ok + busy)) = 32 ] || fail "answers other than 200 and 503"
[ "$busy" -ge 1 ] && [ "$ok" -ge 8 ] || fail "$ok answered, $busy refused: the bodies were not bounded over all connections"
expect_match "$TMP/budget.txt" '^too many request bodies at once \(limit 1048576 bytes in all\); retry later$' "the 503 says why"
echo "ok: $ok bodies buffered and answered, $busy refused with 503 (at most 1 MiB at once)"
checks=$((checks + 1))
stop_server "$BODY" body
finish
