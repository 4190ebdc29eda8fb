#!/usr/bin/env bash
# Message framing: a malformed Content-Length, two Content-Length headers,
# or Content-Length with Transfer-Encoding get one 400 (one status line,
# one set of headers, Go's error form) and the connection closed; a
# well-framed body (by length or chunked) is still served, and so is a
# request on the same connection after it.
source "$(dirname "$0")/lib.bash"

start_server framing --log
FR=$PID
python3 - "$PORT" >"$TMP/framing.txt" <<'PY'
import socket, sys
port = int(sys.argv[1])
def exchange(raw):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(raw)
    s.settimeout(5)
    out, closed = b"", False
    try:
        while True:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            out += d
    except OSError:
        pass
    s.close()
    return out, closed
head = b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: localhost\r\n"
cases = [
    ("bad length", head + b"Content-Length: 12abc\r\n\r\n0x1+0x2"),
    ("length list", head + b"Content-Length: 3, 3\r\n\r\n0x1"),
    ("huge length", head + b"Content-Length: 99999999999999999999999\r\n\r\n0x1"),
    ("two lengths", head + b"Content-Length: 3\r\nContent-Length: 7\r\n\r\n0x10x1+0"),
    ("same length twice", head + b"Content-Length: 3\r\nContent-Length: 3\r\n\r\n0x1"),
    ("length and chunked", head + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n0x1\r\n0\r\n\r\n"),
]
for name, raw in cases:
    out, closed = exchange(raw)
    body = out.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in out else b""
    print("%s: %s, %d status line(s), %s, body %r" % (
        name, out.split(b"\r\n")[0].decode() or "(nothing)",
        out.count(b"HTTP/1."), "closed" if closed else "left open", body.decode()))
ok = head + b"Content-Length: 3\r\n\r\n0x1"
chunked = head + b"Transfer-Encoding: chunked\r\n\r\n3\r\n0x1\r\n0\r\n\r\n"
then = b"GET /debug/pprof/cmdline HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
for name, raw in (("length", ok), ("chunked", chunked)):
    out, closed = exchange(raw + then)
    print("well framed by %s, then another request: %d answer(s) %s" % (
        name, out.count(b"HTTP/1.1 200 OK"),
        "with num_symbols" if b"num_symbols: 1\n" in out else "without num_symbols"))
PY
cat "$TMP/framing.txt"
for c in 'bad length' 'length list' 'huge length' 'two lengths' 'same length twice' 'length and chunked'; do
  grep -q "^$c: HTTP/1.1 400 Bad Request, 1 status line(s), closed, body '" "$TMP/framing.txt" || fail "$c: not one 400 and a close"
  echo "ok: $c: one 400, connection closed"
  checks=$((checks + 1))
done
expect_match "$TMP/framing.txt" "^bad length: .* body 'invalid Content-Length header\\\\n'$" "a malformed length says so"
expect_match "$TMP/framing.txt" "^two lengths: .* body 'more than one Content-Length header\\\\n'$" "two lengths say so"
expect_match "$TMP/framing.txt" "^length and chunked: .* body 'both Content-Length and Transfer-Encoding\\\\n'$" "length with chunked says so"
expect_match "$TMP/framing.txt" '^well framed by length, then another request: 2 answer\(s\) with num_symbols$' "a body framed by its length is served, and the next request too"
expect_match "$TMP/framing.txt" '^well framed by chunked, then another request: 2 answer\(s\) with num_symbols$' "a chunked body is served, and the next request too"
stop_server "$FR" framing
finish
