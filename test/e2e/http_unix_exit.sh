#!/usr/bin/env bash
# A unix socket's file is removed when the process exits with its server
# still running (exit, or a return from main), whether the server came
# from CPROF_HTTP (preloaded) or from cprof_http_start; a file that has
# replaced the socket at that path is left alone.
source "$(dirname "$0")/lib.bash"

# The linked program, returning from main without cprof_http_stop.
sock=$TMP/linked.sock
start_server linked --addr "unix:$sock" --no-stop
[ -S "$sock" ] || fail "no socket file"
st=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' --unix-socket "$sock" http://localhost/debug/pprof/cmdline)
[ "$st" = 200 ] || fail "status $st over the socket"
kill -TERM "$PID"
wait "$PID" || fail "the program failed"
[ ! -e "$sock" ] || fail "the socket file outlived the process (exit without stop)"
echo "ok: linked: the socket file is gone after exit"
checks=$((checks + 1))

# The same server, but the path now names a regular file of someone else's.
sock=$TMP/replaced.sock
start_server replaced --addr "unix:$sock" --no-stop
rm "$sock"
echo data >"$sock"
kill -TERM "$PID"
wait "$PID" || fail "the program failed"
[ "$(cat "$sock")" = data ] || fail "the file that replaced the socket was removed"
echo "ok: a file that replaced the socket is left alone"
checks=$((checks + 1))

plain=$CPROFTEST_BUILD/test/progs/plain_signalfd
tsan_build "$plain" && skip_rest "preloaded runs under TSan (see lib.bash)"
sock=$TMP/preloaded.sock
mkfifo "$TMP/in"
CPROF_HTTP=unix:$sock LD_PRELOAD=$(preload_env "$plain") "$plain" <"$TMP/in" >"$TMP/pre.out" 2>"$TMP/pre.err" &
pre=$!
track $pre
exec 3>"$TMP/in"
for _ in $(seq 100); do grep -q ready "$TMP/pre.out" 2>/dev/null && break; sleep 0.05; done
[ -S "$sock" ] || { cat "$TMP/pre.err"; fail "no socket file from CPROF_HTTP"; }
kill -TERM $pre
wait $pre || fail "the program failed"
[ ! -e "$sock" ] || fail "the socket file outlived the preloaded process"
echo "ok: preloaded: the socket file is gone after exit"
checks=$((checks + 1))
finish
