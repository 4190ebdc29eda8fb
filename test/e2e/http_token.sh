#!/usr/bin/env bash
# The bearer token: the whole Authorization value counts ("Bearer TOKEN",
# then a NUL and more, is a wrong token, wherever the header sits).
source "$(dirname "$0")/lib.bash"

start_server token --token s3cr3t
TOK=$PID
python3 - "$PORT" >"$TMP/nul.txt" <<'PY'
import socket, sys
import os
sys.path.insert(0, os.environ["CPROF_SRC"] + "/test/e2e")
from rawhttp import read_all
port = int(sys.argv[1])
def status(head):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head)
    out = read_all(s, 10)
    return out.split(b"\r\n")[0].decode()
for value, name in ((b"Bearer s3cr3t\0junk", "TOKEN NUL junk"),
                    (b"Bearer s3cr3t\0", "TOKEN NUL"),
                    (b"Bearer s3cr3t", "TOKEN")):
    for first in (True, False):
        auth = b"Authorization: " + value + b"\r\n"
        rest = b"Host: localhost\r\nConnection: close\r\n"
        head = b"GET /debug/pprof/cmdline HTTP/1.1\r\n" + \
            (auth + rest if first else rest + auth) + b"\r\n"
        print("%s (%s header): %s" % (name, "first" if first else "last", status(head)))
PY
cat "$TMP/nul.txt"
expect_match "$TMP/nul.txt" '^TOKEN NUL junk \(first header\): HTTP/1.1 401 Unauthorized$' "TOKEN NUL junk as the first header is refused"
expect_match "$TMP/nul.txt" '^TOKEN NUL junk \(last header\): HTTP/1.1 401 Unauthorized$' "TOKEN NUL junk as the last header is refused"
expect_match "$TMP/nul.txt" '^TOKEN NUL \(first header\): HTTP/1.1 401 Unauthorized$' "TOKEN NUL before the next header is refused"
expect_match "$TMP/nul.txt" '^TOKEN \(first header\): HTTP/1.1 200 OK$' "the token alone is accepted"
expect_match "$TMP/nul.txt" '^TOKEN \(last header\): HTTP/1.1 200 OK$' "the token alone is accepted as the last header"
stop_server "$TOK" token

finish
