#!/usr/bin/env bash
# The goroutine profile over HTTP against Go's: requests per second at
# concurrency 8 (wrk, 2 threads, 8 connections) on
# /debug/pprof/goroutine?debug=1 and ?debug=2 and the index page, cprof's C host
# (bench/goroutine_host, N parked threads) and Go's net/http/pprof
# (bench/goref, N parked goroutines) alternating in one run, with the
# ratio cprof/Go; then the time one request takes with 1,000 threads (and
# 1,000 goroutines). Go is built here with `go build`; without Go only
# cprof's figures are printed.
#   bench/goroutine_http.sh [BUILD]   GOROUTINE_BENCH_SECONDS (5),
#                                     GOROUTINE_BENCH_ROUNDS (2),
#                                     GOROUTINE_BENCH_THREADS (10)
set -euo pipefail
build=${1:-build}
host=$build/bench/goroutine_host
secs=${GOROUTINE_BENCH_SECONDS:-5}
rounds=${GOROUTINE_BENCH_ROUNDS:-2}
nthreads=${GOROUTINE_BENCH_THREADS:-10}
command -v wrk >/dev/null || { echo "goroutine_http: wrk is not installed (apt-get install wrk); skipped"; exit 0; }
[ -x "$host" ] || { echo "goroutine_http: $host not built; skipped"; exit 0; }
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
goref=
if command -v go >/dev/null; then
  if (cd "$(dirname "$0")/goref" && GO111MODULE=off GOCACHE=$tmp/gocache \
      go build -o "$tmp/goref" main.go) 2>"$tmp/gobuild.log"; then
    goref=$tmp/goref
  else
    echo "goroutine_http: go build failed:"; cat "$tmp/gobuild.log"
  fi
fi

# start NAME PROG ARGS...: runs PROG in the background, sets PORT.
start() {
  local name=$1
  shift
  "$@" >"$tmp/$name.port" 2>"$tmp/$name.log" &
  pids+=($!)
  for _ in $(seq 200); do [ -s "$tmp/$name.port" ] && break; sleep 0.05; done
  PORT=$(head -1 "$tmp/$name.port")
  [ -n "$PORT" ] || { cat "$tmp/$name.log"; echo "goroutine_http: $name did not start"; exit 1; }
}

rate() { # URL -> requests/s
  curl -sf -o /dev/null "$1" || { echo "goroutine_http: $1 fails" >&2; echo 0; return; }
  wrk -t2 -c8 -d"${secs}s" "$1" | awk '/^Requests\/sec:/ {print $2}'
}

start cprof "$host" "$nthreads"
cport=$PORT
gport=
if [ -n "$goref" ]; then start go "$goref" "$nthreads"; gport=$PORT; fi
threads=$(ls /proc/"${pids[0]}"/task | wc -l)
echo "goroutine_http: cprof host $threads threads; Go reference $nthreads parked goroutines${gport:+ ($(ls /proc/"${pids[1]}"/task | wc -l) threads)}"
for path in "goroutine?debug=1" "goroutine?debug=2" ""; do
  name=${path:-(index)}
  c_sum=0 g_sum=0
  for r in $(seq "$rounds"); do
    c=$(rate "http://127.0.0.1:$cport/debug/pprof/$path")
    c_sum=$(awk -v a="$c_sum" -v b="$c" 'BEGIN {print a + b}')
    line="$name round $r: cprof $c req/s"
    if [ -n "$gport" ]; then
      g=$(rate "http://127.0.0.1:$gport/debug/pprof/$path")
      g_sum=$(awk -v a="$g_sum" -v b="$g" 'BEGIN {print a + b}')
      line="$line, Go $g req/s"
    fi
    echo "goroutine_http: $line"
  done
  if [ -n "$gport" ]; then
    awk -v d="$name" -v c="$c_sum" -v g="$g_sum" -v n="$rounds" 'BEGIN {
      printf "goroutine_http: %s  cprof %.0f req/s  Go %.0f req/s  ratio %.2fx\n", d, c / n, g / n, g ? c / g : 0 }'
  else
    awk -v d="$name" -v c="$c_sum" -v n="$rounds" 'BEGIN {
      printf "goroutine_http: %s  cprof %.0f req/s (no Go to compare)\n", d, c / n }'
  fi
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

# 1,000 threads: the median of 9 requests' total time.
timing() { # URL -> median seconds
  for _ in $(seq 9); do curl -s -o /dev/null -w '%{time_total}\n' "$1"; done |
    sort -n | sed -n 5p
}
start cprof1k "$host" 1000
c1k=$cport
c1k=$PORT
threads=$(ls /proc/"${pids[0]}"/task | wc -l)
for d in 0 1 2; do
  t=$(timing "http://127.0.0.1:$c1k/debug/pprof/goroutine?debug=$d")
  line="goroutine_http: $threads threads, goroutine?debug=$d: cprof $(awk -v t="$t" 'BEGIN {printf "%.1f ms", t * 1000}')"
  if [ -n "$goref" ]; then
    [ -n "${g1k:-}" ] || { start go1k "$goref" 1000; g1k=$PORT; }
    tg=$(timing "http://127.0.0.1:$g1k/debug/pprof/goroutine?debug=$d")
    line="$line, Go (1,000 goroutines) $(awk -v t="$tg" 'BEGIN {printf "%.1f ms", t * 1000}')"
  fi
  echo "$line"
done
