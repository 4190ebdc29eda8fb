#!/usr/bin/env bash
# A server that daemonizes keeps its endpoint: test/progs/plain_forks in
# its daemon modes under `cprof run --http`. The process cprof started in
# forks the daemon and leaves at once (daemon(3), whose parent leaves by
# an _exit inside libc; exit() after its own fork, as nginx does; or a
# double fork, whose first child hands the endpoint on again); the daemon
# leaves the session (setsid) and forks two workers. The endpoint
# must go on in the daemon:
#   - cprof run itself returns 0 at once, as the program's parent did;
#   - /debug/pprof/processes names the daemon as the root and both
#     workers as members;
#   - profile?seconds=2: at least 90% of the samples in the workers' pids;
#   - on a unix socket, the socket file outlives the first process, and the
#     daemon removes it when it exits;
#   - when the daemon and its workers have exited, the port is free (a
#     server binds it again) and nothing of the tree is left.
#   - cprof's daemon() does what glibc's does: the working directory, the
#     standard descriptors and the new session, for each nochdir and
#     noclose, are the same with cprof loaded and without.
#   - a root that exits right after its child ended (reaped) waits for no
#     heir: `plain_forks spawn` (fork, exec, wait, exit) under
#     `cprof run --http` ends within 200 ms of its time without cprof,
#     best of 3 each (a wait for an heir would add 250 ms).
# A child that stays in the session is no heir (e2e/fds_fork).
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
plain=$CPROFTEST_BUILD/test/progs/plain_forks
tree_prepare "$plain"
rt=$(preload_env "$plain" | sed 's#[^ ]*libcprof\.so##')

# daemon_case MODE ADDR CURL_ARGS...: starts `plain_forks MODE 20` under
# cprof run --http ADDR; sets master and workers.
daemon_case() {
  local mode=$1 addr=$2
  shift 2
  local t0 t1
  t0=$(date +%s%N)
  LD_PRELOAD="$rt" "$cprof" run --http "$addr" -- "$plain" "$mode" 20 >"$TMP/$mode.out" 2>"$TMP/$mode.err" ||
    { cat "$TMP/$mode.err"; fail "$mode: cprof run failed"; }
  t1=$(date +%s%N)
  echo "$mode: cprof run returned 0 after $(((t1 - t0) / 1000000)) ms"
  checks=$((checks + 1))
  for _ in $(seq 100); do
    [ "$(grep -c '^worker' "$TMP/$mode.out")" -eq 2 ] && break
    sleep 0.05
  done
  master=$(awk '/^master/ {print $2}' "$TMP/$mode.out")
  mapfile -t workers < <(awk '/^worker/ {print $2}' "$TMP/$mode.out")
  [ -n "$master" ] && [ "${#workers[@]}" -eq 2 ] || { cat "$TMP/$mode.out" "$TMP/$mode.err"; fail "$mode: no daemon and two workers"; }
  track "$master"
  track "${workers[0]}"
  track "${workers[1]}"
  [ "$(awk '{print $6}' "/proc/$master/stat")" != "$(awk '{print $6}' "/proc/$$/stat")" ] ||
    fail "$mode: the daemon $master did not leave the session"
  for _ in $(seq 100); do
    curl -sf "$@" "$url/processes" >"$TMP/$mode.processes" 2>/dev/null &&
      [ "$(grep -c '	member	' "$TMP/$mode.processes")" -eq 2 ] && break
    sleep 0.1
  done
  cat "$TMP/$mode.processes"
  expect_match "$TMP/$mode.processes" "^$master	[0-9]+	-	root	" "$mode: the daemon $master is the tree's root"
  for w in "${workers[@]}"; do
    expect_match "$TMP/$mode.processes" "^$w	$master	.*	member	" "$mode: worker $w is a member"
  done
  curl -sf -m 20 "$@" -o "$TMP/$mode.pb.gz" "$url/profile?seconds=2" || fail "$mode: profile?seconds=2 failed"
  workers_hold "$TMP/$mode.pb.gz" "$mode" "${workers[@]}"
}

# stop_daemon MODE: SIGTERM to the daemon, which passes it on and waits.
stop_daemon() {
  kill -TERM "$master"
  for _ in $(seq 100); do
    kill -0 "$master" 2>/dev/null || break
    sleep 0.05
  done
  ! kill -0 "$master" 2>/dev/null || fail "$1: the daemon did not exit"
}

# daemon_check NOCHDIR NOCLOSE [LD_PRELOAD]: what the daemon reports.
daemon_check() {
  local out="$TMP/check.$1$2${3:+.cprof}"
  rm -f "$out"
  (cd "$TMP" && LD_PRELOAD="${3:-}" "$plain" daemon-check "$out" "$1" "$2" </dev/null >"$TMP/check.stdout" 2>&1)
  for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.05; done
  cat "$out"
}
for nochdir in 0 1; do
  for noclose in 0 1; do
    daemon_check "$nochdir" "$noclose" >"$TMP/glibc.txt"
    daemon_check "$nochdir" "$noclose" "$rt $CPROFTEST_BUILD/libcprof.so" >"$TMP/cprof.txt"
    grep -q '^daemon 0$' "$TMP/glibc.txt" || { cat "$TMP/glibc.txt"; fail "glibc's daemon($nochdir, $noclose) failed"; }
    cmp -s "$TMP/glibc.txt" "$TMP/cprof.txt" ||
      { diff "$TMP/glibc.txt" "$TMP/cprof.txt"; fail "daemon($nochdir, $noclose): cprof's differs from glibc's"; }
    echo "ok: daemon($nochdir, $noclose) as glibc's: $(tr '\n' ' ' <"$TMP/cprof.txt")"
    checks=$((checks + 1))
  done
done

# best_ms CMD...: the shortest wall time of 3 runs, in ms.
best_ms() {
  local best=999999 t0 t1 i
  for i in 1 2 3; do
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1 || fail "$* failed"
    t1=$(date +%s%N)
    [ $(((t1 - t0) / 1000000)) -lt "$best" ] && best=$(((t1 - t0) / 1000000))
  done
  echo "$best"
}
bare=$(best_ms env LD_PRELOAD="$rt" "$plain" spawn)
with=$(best_ms env LD_PRELOAD="$rt" "$cprof" run --http 127.0.0.1:0 -- "$plain" spawn)
echo "a root whose child ended: $with ms under cprof run --http, $bare ms without"
[ "$with" -lt $((bare + 200)) ] || fail "a root whose child was reaped waited at its exit: $with ms against $bare ms"
checks=$((checks + 1))

port=$(free_port)
url=http://127.0.0.1:$port/debug/pprof
daemon_case daemon "127.0.0.1:$port"
stop_daemon daemon
# The port is free again: a server binds it.
python3 -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()' "$port" ||
  fail "daemon: port $port is still taken after the daemon exited"
echo "ok: daemon: port $port is free once the daemon exited"
checks=$((checks + 1))

port=$(free_port)
url=http://127.0.0.1:$port/debug/pprof
daemon_case daemon-double "127.0.0.1:$port"
stop_daemon daemon-double

sock=$TMP/cprof.sock
url=http://localhost/debug/pprof
daemon_case daemon-exit "unix:$sock" --unix-socket "$sock"
[ -S "$sock" ] || fail "daemon-exit: the socket file went with the first process"
echo "ok: daemon-exit: the socket file outlived the first process"
checks=$((checks + 1))
stop_daemon daemon-exit
[ ! -e "$sock" ] || fail "daemon-exit: the daemon left its socket file behind"
echo "ok: daemon-exit: the daemon removed the socket file at its exit"
checks=$((checks + 1))
finish
