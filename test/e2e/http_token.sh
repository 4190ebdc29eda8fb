#!/usr/bin/env bash
# The bearer token: the whole Authorization value counts ("Bearer TOKEN",
# then a NUL and more, is a wrong token, wherever the header sits). The
# token also works as HTTP Basic credentials, which is how go tool pprof
# sends it from a URL (http://pprof:TOKEN@host/...): heap and a CPU profile
# fetched that way, 401 without it or with a wrong one.
source "$(dirname "$0")/lib.bash"

start_server token --token s3cr3t
TOK=$PID
python3 - "$PORT" >"$TMP/nul.txt" <<'PY'
import socket, sys
import os
sys.path.insert(0, os.environ["CPROFTEST_SRC"] + "/test/e2e")
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
for p in heap 'profile?seconds=1'; do
  pprof -raw "http://pprof:s3cr3t@127.0.0.1:$PORT/debug/pprof/$p" >"$TMP/basic.txt"
  expect_match "$TMP/basic.txt" '^Samples:' "go tool pprof http://pprof:TOKEN@.../$p reads the profile"
done
pprof -raw "http://127.0.0.1:$PORT/debug/pprof/heap" >"$TMP/none.txt" || true
expect_match "$TMP/none.txt" 'server response: 401 Unauthorized' "go tool pprof without the token gets 401"
pprof -raw "http://pprof:wrong@127.0.0.1:$PORT/debug/pprof/heap" >"$TMP/wrong.txt" || true
expect_match "$TMP/wrong.txt" 'server response: 401 Unauthorized' "go tool pprof with a wrong password gets 401"
st=$(curl -s -o /dev/null -w '%{http_code}' -u "anyone:s3cr3t" "http://127.0.0.1:$PORT/debug/pprof/cmdline")
[ "$st" = 200 ] || fail "curl -u anyone:TOKEN: $st"
checks=$((checks + 1))
echo "ok: curl -u anyone:TOKEN (Basic) is accepted"
stop_server "$TOK" token

# cprof run --token: an unmodified program's endpoint, read by go tool
# pprof with the token in the URL.
cprof=$CPROFTEST_BUILD/cprof
if tsan_build "$cprof"; then
  skip_rest "cprof run --token (the TSan build cannot preload, see lib.bash)"
fi
rt=$(preload_env "$cprof" | sed 's#[^ ]*libcprof\.so##')
LD_PRELOAD="$rt" "$cprof" run --http 127.0.0.1:0 --token runtok -- sleep 30 >/dev/null 2>"$TMP/run.err" &
RUNPID=$!
track "$RUNPID"
port=
for _ in $(seq 200); do
  port=$(sed -n 's/.*serving \/debug\/pprof\/ on .* (port \([0-9]*\)).*/\1/p' "$TMP/run.err")
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { cat "$TMP/run.err"; fail "cprof run --http --token: no endpoint"; }
pprof -raw "http://pprof:runtok@127.0.0.1:$port/debug/pprof/heap" >"$TMP/run_basic.txt"
expect_match "$TMP/run_basic.txt" '^Samples:' "cprof run --token: go tool pprof with http://pprof:TOKEN@ reads the heap"
pprof -raw "http://127.0.0.1:$port/debug/pprof/heap" >"$TMP/run_none.txt" || true
expect_match "$TMP/run_none.txt" 'server response: 401 Unauthorized' "cprof run --token: without the token, 401"
kill -TERM "$RUNPID"
wait "$RUNPID" 2>/dev/null || true

finish
