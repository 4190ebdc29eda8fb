#!/usr/bin/env bash
# nginx (Debian's nginx-light, a master and two workers) under the README's
# recipe, `cprof run --http ... --dump-signals RTMIN+4`, while wrk loads it.
# The master's endpoint answers for the tree (docs/processes.md):
#   - profile?seconds=3: at least 90% of the samples in the workers' pids,
#     nginx's request functions present, the CPU total within 10% of what
#     /proc/PID/stat counts for the workers over the window (scaled from the
#     request's wall time to the window's);
#   - ?pid=WORKER: that worker alone, with nginx's request functions;
#   - goroutine lists the three processes, goroutine?debug=2 has a section
#     for each worker;
#   - nginx's own SIGUSR1 (reopen the logs) still works: the error log
#     says the logs were reopened, and no dump was made;
#   - SIGRTMIN+4, the chosen dump signal, to the master dumps the tree:
#     the master's blocks and each worker's (Reason: tree); so does
#     processes?dump=1;
#   - with CPROF_PUSH_URL set too (1 s windows), a loopback Pyroscope
#     receiver gets a series for each worker, labelled with its pid, its
#     CPU windows aligned with the master's and holding nginx's request
#     handling, and its heap snapshots.
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/nginx_lib.bash"
plain=$CPROFTEST_BUILD/test/progs/plain_forks
nginx_prepare

start_receiver "$TMP/push" ok
export CPROF_PUSH_URL="http://127.0.0.1:$rport" CPROF_PUSH_INTERVAL=1 CPROF_PUSH_APP=nginx
port=$(free_port)
cport=$(free_port)
url=http://127.0.0.1:$cport/debug/pprof
nginx_start "$port" --http "127.0.0.1:$cport" --dump cpu --dump-signals RTMIN+4 \
  --dump-out "$TMP/run.log"
w0=${workers[0]}
w1=${workers[1]}
echo "master $master, workers $w0 $w1"
tree_wait "$url" "$w0" "$w1"
expect_match "$TMP/processes" "^$w0	$master	.*	member	nginx\$" "processes: worker $w0 is a member"
expect_match "$TMP/processes" "^$w1	$master	.*	member	nginx\$" "processes: worker $w1 is a member"

wrk -t1 -c16 -d6s "http://127.0.0.1:$port/" >"$TMP/wrk.txt" &
wrk=$!
sleep 1
before=$(($(stat_cpu_ms "$w0") + $(stat_cpu_ms "$w1")))
t0=$(date +%s%N)
curl -sf -o "$TMP/cpu.pb.gz" "$url/profile?seconds=3" || fail "profile?seconds=3 failed"
t1=$(date +%s%N)
after=$(($(stat_cpu_ms "$w0") + $(stat_cpu_ms "$w1")))
curl -sf -o "$TMP/w0.pb.gz" "$url/profile?seconds=1&pid=$w0" || fail "profile?pid=$w0 failed"
wait "$wrk"
expect_match "$TMP/wrk.txt" 'Requests/sec' "wrk loaded nginx"

pprof -top -unit=ms "$TMP/cpu.pb.gz" >"$TMP/cpu.top"
total_ms=$(sed -nE 's/.*Total samples = ([0-9.]+)ms .*/\1/p' "$TMP/cpu.top")
s0=$(pid_share "$TMP/cpu.pb.gz" "$w0")
s1=$(pid_share "$TMP/cpu.pb.gz" "$w1")
wall_ms=$(((t1 - t0) / 1000000))
proc_ms=$((after - before))
want_ms=$(awk -v p="$proc_ms" -v w="$wall_ms" 'BEGIN { printf "%d", p * 3000 / w }')
echo "window: cprof total ${total_ms:-0} ms; workers' shares ${s0:-0}% + ${s1:-0}%; /proc: $proc_ms ms over $wall_ms ms of wall time, $want_ms ms for the 3 s window"
awk -v a="${s0:-0}" -v b="${s1:-0}" 'BEGIN { exit !(a + b >= 90) }' ||
  { cat "$TMP/cpu.top"; fail "the workers hold ${s0:-0}% + ${s1:-0}% of the samples, not 90% or more"; }
checks=$((checks + 1))
echo "ok: the master's endpoint profiles nginx's workers"
for fn in ngx_http_process_request ngx_http_core_run_phases; do
  expect_match "$TMP/cpu.top" " $fn( \\(inline\\))?$" "$fn in the tree's CPU profile"
done
[ "$want_ms" -ge 300 ] || fail "the workers used too little CPU ($proc_ms ms) to compare"
# 10% as the issue asks; under a sanitizer, whose nginx runs several times
# slower and answers later, 15% (11% seen beside CPU hogs).
tol=10
sanitized_build "$plain" && tol=15
awk -v c="${total_ms:-0}" -v w="$want_ms" -v t="$tol" 'BEGIN { d = c - w; if (d < 0) d = -d; exit !(d <= t / 100 * w) }' ||
  fail "the tree's CPU total ${total_ms:-0} ms is not within $tol% of the workers' ${want_ms} ms"
checks=$((checks + 1))
echo "ok: the tree's CPU total is within $tol% of /proc's"

pprof -top "$TMP/w0.pb.gz" >"$TMP/w0.top"
expect_match "$TMP/w0.top" " ngx_http_core_run_phases( \\(inline\\))?$" "?pid=$w0: that worker's request handling"
pprof -raw "$TMP/w0.pb.gz" >"$TMP/w0.raw"
expect_no_match "$TMP/w0.raw" "pid:\\[" "?pid=$w0: one process, no pid labels"

curl -sf -o "$TMP/goroutine.pb.gz" "$url/goroutine" || fail "goroutine failed"
pprof -raw "$TMP/goroutine.pb.gz" >"$TMP/goroutine.raw"
for p in "$master" "$w0" "$w1"; do
  grep -q "pid:\\[$p\\]" "$TMP/goroutine.raw" || fail "goroutine has no thread of pid $p"
done
checks=$((checks + 1))
echo "ok: goroutine names the master and both workers"
curl -sf -o "$TMP/goroutine.txt" "$url/goroutine?debug=2" || fail "goroutine?debug=2 failed"
for p in "$w0" "$w1"; do
  expect_match "$TMP/goroutine.txt" "^# cprof tree: pid $p \\(nginx\\), parent $master\$" "goroutine?debug=2: a section for worker $p"
done

# nginx's own SIGUSR1: it reopens its logs.
kill -USR1 "$master"
for _ in $(seq 50); do grep -q 'reopening logs' "$TMP/error.log" && break; sleep 0.1; done
expect_match "$TMP/error.log" 'reopening logs' "nginx's SIGUSR1 still reopens its logs"
expect_no_match "$TMP/run.log" '^Reason: SIGUSR1$' "SIGUSR1 made no dump"
# reasons PID: the Reason headers of PID's blocks in the log.
reasons() { grep -A2 "^Pid: $1\$" "$TMP/run.log" | sed -n 's/^Reason: //p' | sort -u | tr '\n' ' '; }
# The chosen dump signal, to the master: the tree dumps, each process its
# own blocks.
kill -s RTMIN+4 "$master"
for _ in $(seq 100); do [ "$(grep -c '^Reason: tree$' "$TMP/run.log")" -ge 2 ] && break; sleep 0.1; done
echo "after SIGRTMIN+4 to the master: master: $(reasons "$master"); workers: $(reasons "$w0")/ $(reasons "$w1")"
expect_match "$TMP/run.log" '^Reason: SIGRTMIN\+4$' "SIGRTMIN+4 dumped the master"
for w in "$w0" "$w1"; do
  reasons "$w" | grep -q 'tree' || fail "SIGRTMIN+4 to the master: no dump of worker $w"
  checks=$((checks + 1))
  echo "ok: SIGRTMIN+4 to the master dumped worker $w too (Reason: tree)"
done
# The same through the endpoint.
curl -sf "$url/processes?dump=1" >"$TMP/dump.txt" || fail "processes?dump=1 failed"
expect_match "$TMP/dump.txt" "^dumped: process $master and 2 members\$" "processes?dump=1: the master and its 2 workers dumped"
reasons "$master" | grep -q 'http' || fail "processes?dump=1: no dump of the master"
checks=$((checks + 1))
echo "ok: processes?dump=1 dumped the master (Reason: http)"
kill -QUIT "$master"
wait "$runner" || { cat "$TMP/nginx.out"; fail "nginx did not stop cleanly"; }
kill "$rpid"
wait "$rpid" 2>/dev/null || true
for w in "$w0" "$w1"; do
  push_tree_check "$TMP/push" "$master" "$w" ngx_http_core_run_phases
done

# nginx's default, daemon on: the process cprof run started forks the
# master and exits; the endpoint goes on in the master, for the tree.
unset CPROF_PUSH_URL
rm -f "$TMP/nginx.pid"
port=$(free_port)
cport=$(free_port)
url=http://127.0.0.1:$cport/debug/pprof
NGINX_DAEMON=on nginx_start "$port" --http "127.0.0.1:$cport"
track "$master"
w0=${workers[0]}
w1=${workers[1]}
echo "daemon on: master $master, workers $w0 $w1"
tree_wait "$url" "$master" "$w0" "$w1"
expect_match "$TMP/processes" "^$master	[0-9]+	-	root	nginx\$" "daemon on: the master $master serves, as the tree's root"
wrk -t1 -c16 -d4s "http://127.0.0.1:$port/" >"$TMP/wrk2.txt" &
wrk=$!
sleep 0.5
curl -sf -o "$TMP/daemon.pb.gz" "$url/profile?seconds=2" || fail "daemon on: profile?seconds=2 failed"
wait "$wrk"
workers_hold "$TMP/daemon.pb.gz" "daemon on" "$w0" "$w1"
pprof -top "$TMP/daemon.pb.gz" >"$TMP/daemon.top"
expect_match "$TMP/daemon.top" " ngx_http_core_run_phases( \\(inline\\))?$" "daemon on: nginx's request handling in the tree's profile"
kill -QUIT "$master"
for _ in $(seq 100); do kill -0 "$master" 2>/dev/null || break; sleep 0.05; done
! curl -s -m 2 -o /dev/null "$url/" || fail "daemon on: the endpoint still answers after nginx stopped"
checks=$((checks + 1))
echo "ok: daemon on: the endpoint ends with nginx"
finish
