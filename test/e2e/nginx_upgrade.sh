#!/usr/bin/env bash
# nginx's binary upgrade under `cprof run --http` (docs/processes.md): a
# master that re-execs itself. `kill -USR2` makes nginx's master fork and
# exec a new master, which starts workers of its own on the inherited
# listening socket; the old master is then told to quit.
#   - the new master starts (its pid file, two workers) and nginx serves
#     throughout;
#   - the old master's endpoint still answers for its tree, and the new
#     master, an exec'd program, is not in it (nothing of cprof's crosses
#     an exec: its descriptors close on exec);
#   - once the old master has quit, the new one serves on, nothing
#     listens on cprof's port any more, and the new master quits cleanly.
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/nginx_lib.bash"
nginx_prepare

port=$(free_port)
cport=$(free_port)
url=http://127.0.0.1:$cport/debug/pprof
NGINX_ORPHAN=1 nginx_start "$port" --http "127.0.0.1:$cport"
old=$master
track "$old"
echo "old master $old, workers ${workers[*]}"
tree_wait "$url" "${workers[@]}" >/dev/null

# nginx's parent gone (it takes the upgrade only then).
wait "$runner" || true
kill -USR2 "$old"
new=
for _ in $(seq 100); do
  if [ -s "$TMP/nginx.pid.oldbin" ] && [ -s "$TMP/nginx.pid" ]; then
    new=$(cat "$TMP/nginx.pid")
    [ "$new" != "$old" ] && [ "$(pgrep -c -P "$new" || true)" = 2 ] && break
  fi
  sleep 0.1
done
[ -n "$new" ] && [ "$new" != "$old" ] || { cat "$TMP/error.log"; fail "no new master after SIGUSR2"; }
track "$new"
echo "new master $new, workers $(pgrep -P "$new" | tr '\n' ' ')"
expect_no_match "$TMP/error.log" 'execve\(\) failed' "the old master exec'd the new binary"
for i in 1 2 3 4 5; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/") || true
  [ "$code" = 200 ] || fail "request $i during the upgrade: status $code"
done
echo "ok: nginx answers during the upgrade"
checks=$((checks + 1))

curl -sf "$url/processes" >"$TMP/processes" || fail "the old master's endpoint failed during the upgrade"
expect_match "$TMP/processes" "^$old	.*	root	" "the old master's endpoint still answers for its tree"
expect_no_match "$TMP/processes" "^$new	" "the exec'd new master is not in the old master's tree"
curl -sf -o "$TMP/cpu.pb.gz" "$url/profile?seconds=1" || fail "profile?seconds=1 during the upgrade failed"
pprof -top "$TMP/cpu.pb.gz" >"$TMP/cpu.top" || { cat "$TMP/cpu.top"; fail "the old master's profile does not read"; }
echo "ok: the old master's endpoint serves a profile during the upgrade"
checks=$((checks + 1))

kill -QUIT "$old"
for _ in $(seq 100); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
kill -0 "$old" 2>/dev/null && { cat "$TMP/nginx.out"; fail "the old master did not quit"; }
for i in 1 2 3; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/") || true
  [ "$code" = 200 ] || fail "request $i after the old master quit: status $code"
done
echo "ok: the new master serves on after the old one quit"
checks=$((checks + 1))
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/" 2>/dev/null) || true
[ "$code" = 000 ] || fail "cprof's port still answers ($code) after the old master quit"
echo "ok: nothing listens on cprof's port once the old master is gone"
checks=$((checks + 1))
kill -QUIT "$new"
for _ in $(seq 100); do kill -0 "$new" 2>/dev/null || break; sleep 0.1; done
kill -0 "$new" 2>/dev/null && fail "the new master did not quit"
echo "ok: the new master quit"
checks=$((checks + 1))
finish
