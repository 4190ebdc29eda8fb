#!/usr/bin/env bash
# Requests that libmicrohttpd drops before cprof's handler runs (a query
# with more '&' than the connection's 32 KiB can parse) must not leak the
# per-request state cprof sets up at the request line. With a token set
# (the case that was reported), thousands of them leave the server's
# resident set where it was, each gets one clean 431 answer, and under
# ASan the server exits without a leak report.
source "$(dirname "$0")/lib.bash"
# The resident set is measured: under ASan, freed memory must not sit in
# its quarantine (the leak check at exit still runs); under TSan, whose
# shadow memory grows with every thread and byte touched, it is shown but
# not checked.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
rss_checked() {
  ! tsan_build "$CPROFTEST_BUILD/test/progs/http_server" || { echo "note: TSan build, resident set not checked"; return 1; }
}

start_server leak --token s3cret
LEAK=$PID

# send N: N sequential connections, each one such request; prints how many
# got cprof's 431 answer (and only that).
send() {
  python3 - "$PORT" "$1" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
req = b"GET /debug/pprof/?" + b"&" * 600 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n"
good = 0
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(10)
    s.sendall(req)
    out = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            out += d
    except OSError:
        pass
    s.close()
    if out.startswith(b"HTTP/1.1 431 ") and out.count(b"HTTP/1.1") == 1 and \
            out.endswith(b"(limit 32768 bytes, query parameters included)\n"):
        good += 1
print(good)
PY
}

warm=$(send 500) # warm up: thread stacks, malloc arenas
before=$(rss_kb "$LEAK")
n=4000
got=$(send $n)
after=$(rss_kb "$LEAK")
grow=$((after - before))
echo "RSS ${before} KiB -> ${after} KiB after $n dropped requests (+${grow} KiB; a leak of the 4 KiB request state would be +$((n * 4)) KiB)"
limit=$n # KiB: a quarter of what the leak cost
if rss_checked; then
  [ "$grow" -lt $limit ] || fail "the server grew by $grow KiB over $n requests"
  echo "ok: resident set bounded (+$grow KiB, limit $limit KiB)"
fi
[ "$warm" = 500 ] && [ "$got" = $n ] || fail "$((warm + got)) of $((500 + n)) requests got one 431 answer"
echo "ok: each of the $((500 + n)) requests got exactly one 431 answer"
checks=$((checks + 2))
st=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$PORT/debug/pprof/")
[ "$st" = 200 ] || fail "the server no longer answers ($st)"
checks=$((checks + 1))
stop_server "$LEAK" leak # under ASan, a leak report fails it
finish
