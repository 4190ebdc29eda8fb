#!/usr/bin/env bash
# Values that go into the pusher's HTTP headers (CPROF_PUSH_TOKEN in
# Authorization, CPROF_PUSH_TENANT in X-Scope-OrgID) must not carry CR, LF
# or any other control character: one would end the header and let the
# environment inject headers of its own. Such a value is refused with one
# line and pushing does not start; a receiver that logs every request's
# headers sees nothing.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host

# A receiver that writes every request's header block to a file and
# answers 200.
python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
out = open(sys.argv[1], "ab", buffering=0)
while True:
    c, _ = s.accept()
    c.settimeout(5)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    out.write(data.split(b"\r\n\r\n")[0] + b"\n----\n")
    try:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except OSError:
        pass
    c.close()
' "$TMP/headers.log" >"$TMP/port" &
track $!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
port=$(head -1 "$TMP/port")
[ -n "$port" ] || fail "the receiver did not start"
: >"$TMP/headers.log"

# Both refusals at once: each program would have pushed within 1 s.
pids=()
for var in CPROF_PUSH_TOKEN CPROF_PUSH_TENANT; do
  env CPROF_PUSH_URL="http://127.0.0.1:$port" CPROF_PUSH_INTERVAL=1 \
    "$var=$(printf 'abc\r\nX-Injected: yes')" \
    "$host" sleep 2 >/dev/null 2>"$TMP/$var.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a program failed"; done
sleep 0.2
n=$(grep -c '^----$' "$TMP/headers.log" || true)
echo "CR LF in the token and in the tenant: $n requests received, $(grep -c X-Injected "$TMP/headers.log" || true) with an injected header"
expect_no_match "$TMP/headers.log" 'X-Injected' "no header was injected"
[ "$n" -eq 0 ] || fail "pushing started anyway ($n requests)"
for var in CPROF_PUSH_TOKEN CPROF_PUSH_TENANT; do
  expect_match "$TMP/$var.err" "^cprof: CPROF_PUSH_\\*: $var must not contain control characters; pushing disabled\$" "$var: one line says why pushing is off"
  [ "$(wc -l <"$TMP/$var.err")" -eq 1 ] || { cat -v "$TMP/$var.err"; fail "$var: expected one line on stderr"; }
done

# A clean token and tenant still go through, as headers.
: >"$TMP/headers.log"
# The program runs until its first push arrives (a push is slow under a
# sanitizer on a loaded machine), 20 s at most.
CPROF_PUSH_URL="http://127.0.0.1:$port" CPROF_PUSH_INTERVAL=1 CPROF_PUSH_TOKEN=tok CPROF_PUSH_TENANT=team \
  "$host" sleep 20 >/dev/null 2>"$TMP/ok.err" &
okpid=$!
track $okpid
for _ in $(seq 200); do grep -q '^----$' "$TMP/headers.log" 2>/dev/null && break; sleep 0.1; done
kill "$okpid" 2>/dev/null || true
wait "$okpid" 2>/dev/null || true
expect_match "$TMP/headers.log" $'^Authorization: Bearer tok\r$' "a clean token is sent"
expect_match "$TMP/headers.log" $'^X-Scope-OrgID: team\r$' "a clean tenant is sent"
finish
