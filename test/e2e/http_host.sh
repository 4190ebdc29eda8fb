#!/usr/bin/env bash
# DNS rebinding: a server on loopback answers only requests whose Host
# names loopback (localhost, 127.x.y.z, [::1], with or without a port);
# any other name gets 403 before authentication or routing. A unix
# socket has no names to rebind and takes any Host.
source "$(dirname "$0")/lib.bash"

start_server host --log
HP=$PID
B=http://127.0.0.1:$PORT/debug/pprof
for h in evil.example "evil.example:$PORT" 127.0.0.1.evil.example localhost.evil.example 10.1.2.3; do
  st=$(curl -sS -m 10 -o "$TMP/body" -w '%{http_code}' -H "Host: $h" "$B/cmdline")
  [ "$st" = 403 ] || fail "Host: $h: status $st, want 403"
  grep -q '^Forbidden: the Host header must name a loopback address' "$TMP/body" || fail "Host: $h: body $(cat "$TMP/body")"
  echo "ok: Host: $h -> 403"
  checks=$((checks + 1))
done
for h in localhost "localhost:$PORT" 127.0.0.1 "127.0.0.1:$PORT" 127.1.2.3 "[::1]:$PORT"; do
  st=$(curl -sS -m 10 -o "$TMP/body" -w '%{http_code}' -H "Host: $h" "$B/cmdline")
  [ "$st" = 200 ] || fail "Host: $h: status $st, want 200"
  echo "ok: Host: $h -> 200"
  checks=$((checks + 1))
done
# An absolute-form target's authority stands for Host (RFC 9112), as in
# Go: a loopback one is served as its path, another is refused, whatever
# the Host header says.
st=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' --request-target "http://127.0.0.1:$PORT/debug/pprof/cmdline" -H 'Host: evil.example' "$B/")
[ "$st" = 200 ] || fail "absolute-form target with a loopback authority: status $st, want 200"
st=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' --request-target "http://evil.example/debug/pprof/cmdline" "$B/")
[ "$st" = 403 ] || fail "absolute-form target with authority evil.example: status $st, want 403"
checks=$((checks + 2))
echo "ok: an absolute-form target's authority is checked as Host: loopback 200, evil.example 403"
stop_server "$HP" host

sock=$TMP/host.sock
start_server hostunix --addr "unix:$sock"
st=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' --unix-socket "$sock" -H 'Host: evil.example' http://evil.example/debug/pprof/cmdline)
[ "$st" = 200 ] || fail "unix socket with Host: evil.example: status $st, want 200"
echo "ok: a unix socket takes any Host"
checks=$((checks + 1))
stop_server "$PID" hostunix
finish
