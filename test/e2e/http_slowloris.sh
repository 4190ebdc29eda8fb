#!/usr/bin/env bash
# Slow clients (slowloris): 40 connections that each send a byte a second
# and never finish their request must not keep a legitimate client out.
# With the default 32 connections and a 3 s header timeout, a client that
# arrives while they hold every slot is answered (one of them is closed
# to make room), and every slow connection is closed by the server,
# however steadily it trickles, within a few header timeouts.
source "$(dirname "$0")/lib.bash"

start_server slow --header-timeout 3 --log
SLOW=$PID
B=http://127.0.0.1:$PORT/debug/pprof

# The slow clients, in the background: each prints "closed SECONDS" when
# the server closes it, or "open" if it is still open after 20 s.
python3 - "$PORT" >"$TMP/slow.txt" <<'PY' &
import socket, sys, time
port = int(sys.argv[1])
start = time.time()
conns = []
for _ in range(40):
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    conns.append(s)
line = b"GET /debug/pprof/cmdline HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 100
pos, closed = 0, {}
while len(closed) < len(conns) and time.time() - start < 20:
    for i, s in enumerate(conns):
        if i in closed:
            continue
        try:
            if s.recv(4096) == b"":
                closed[i] = time.time() - start
                continue
        except BlockingIOError:
            pass
        except OSError:
            closed[i] = time.time() - start
            continue
        try:
            s.send(line[pos % len(line):pos % len(line) + 1])
        except OSError:
            closed[i] = time.time() - start
    pos += 1
    time.sleep(1)
for i in range(len(conns)):
    print("closed %.1f" % closed[i] if i in closed else "open")
PY
slow=$!
track $slow
sleep 1.5 # the slow clients hold every slot
start=$(date +%s%N)
st=$(curl -sS -m 15 -o "$TMP/body" -w '%{http_code}' "$B/cmdline" 2>"$TMP/curl.err") || true
ms=$((($(date +%s%N) - start) / 1000000))
echo "a legitimate request while 40 slow clients hold the slots: status ${st:-none} after $ms ms $(cat "$TMP/curl.err")"
[ "$st" = 200 ] || fail "the legitimate request failed (status ${st:-none})"
tr '\0' ' ' <"$TMP/body" | grep -q 'http_server --header-timeout 3 --log' || fail "the answer is not the cmdline"
echo "ok: the legitimate request was answered"
checks=$((checks + 1))
wait $slow
sort "$TMP/slow.txt" | awk '{print $1}' | uniq -c
[ "$(grep -c '^closed ' "$TMP/slow.txt")" = 40 ] || fail "slow connections still open after 20 s"
latest=$(awk '{print $2}' "$TMP/slow.txt" | sort -n | tail -1)
echo "ok: the server closed all 40 slow connections (the last after $latest s)"
expect_match "$TMP/slow.log" 'connection\(s\) whose request took over 3 s' "the log says why"
checks=$((checks + 1))
stop_server "$SLOW" slow
finish
