#!/usr/bin/env bash
# A pre-fork server nobody here built: Debian's nginx (nginx-light), one
# master and two workers, under `cprof run --dump cpu,heap` while wrk loads
# it. The workers are fork children that do not exec: each keeps
# profiling and dumps its own blocks, named by its pid. The extracted
# profiles must hold a CPU and a heap profile for each worker, each CPU
# profile with nginx's request-processing functions, and the workers'
# sampled CPU time must match what /proc/PID/stat counts for them (read
# just before they are told to stop) within 5%.
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/nginx_lib.bash"
cprof=$CPROFTEST_BUILD/cprof
plain=$CPROFTEST_BUILD/test/progs/plain_forks
nginx_prepare

port=$(free_port)
nginx_start "$port" --dump cpu,heap --dump-out "$TMP/run.log"
echo "master $master, workers ${workers[*]}"

wrk -t1 -c16 -d4s "http://127.0.0.1:$port/" >"$TMP/wrk.txt"
expect_match "$TMP/wrk.txt" 'Requests/sec' "wrk loaded nginx"
proc_ms=0
for w in "${workers[@]}"; do
  ms=$(stat_cpu_ms "$w")
  echo "worker $w: $ms ms of CPU in /proc/$w/task/$w/stat (its main thread)"
  proc_ms=$((proc_ms + ms))
done
kill -QUIT "$master"
wait "$runner" || { cat "$TMP/nginx.out"; fail "nginx did not stop cleanly"; }

"$cprof" extract -o "$TMP/x" "$TMP/run.log" >"$TMP/extract.txt" 2>&1 ||
  { cat "$TMP/extract.txt"; fail "extract failed"; }
ls "$TMP/x"
prof_ms=0
for w in "${workers[@]}"; do
  cpu=$TMP/x/cpu-$w-1.pb.gz
  [ -f "$cpu" ] || fail "no CPU profile of worker $w"
  ls "$TMP"/x/heap-"$w"-*.pb.gz >/dev/null 2>&1 || fail "no heap profile of worker $w"
  checks=$((checks + 1))
  echo "ok: worker $w dumped a CPU and a heap profile of its own"
  pprof -top -unit=ms "$cpu" >"$TMP/$w.top"
  for fn in ngx_http_process_request ngx_http_core_run_phases; do
    expect_match "$TMP/$w.top" " $fn( \\(inline\\))?$" "worker $w: $fn in its CPU profile"
  done
  ms=$(sed -nE 's/.*Total samples = ([0-9.]+)ms .*/\1/p' "$TMP/$w.top")
  [ -n "$ms" ] || { cat "$TMP/$w.top"; fail "worker $w: no total in its CPU profile"; }
  echo "worker $w: $ms ms of CPU in its profile"
  prof_ms=$(awk -v a="$prof_ms" -v b="$ms" 'BEGIN { printf "%d", a + b }')
done
echo "workers: $prof_ms ms sampled, $proc_ms ms in /proc"
[ "$proc_ms" -ge 200 ] || fail "the workers used too little CPU ($proc_ms ms) to compare"
awk -v p="$prof_ms" -v t="$proc_ms" 'BEGIN { d = (p - t) / t; exit !(d <= 0.05 && d >= -0.05) }' ||
  fail "the workers' sampled CPU ($prof_ms ms) is not within 5% of /proc's ($proc_ms ms)"
checks=$((checks + 1))
echo "ok: the workers' CPU profiles match /proc/PID/stat within 5%"
finish
