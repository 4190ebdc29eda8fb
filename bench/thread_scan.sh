#!/usr/bin/env bash
# What finding threads costs while a CPU profile runs: cprof's scanner
# thread (cprof-scan) reads /proc/self/task every 50 ms and arms a timer for
# any thread without one (bench/plain_threads: N sleeping threads, the main
# thread burning CPU). Prints the scanner's CPU time per second of profile
# (from /proc/PID/task/TID/schedstat, over 2 s once its scans have backed
# off to one every 800 ms) and per scan, for each N.
#   bench/thread_scan.sh BUILD_DIR [SECONDS]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
seconds=${2:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf "%8s %14s %12s\n" threads "scanner CPU/s" "per scan"
for n in 1 10 100; do
  "$build/cprof" run --dump cpu --dump-out "$tmp/log" -- "$build/bench/plain_threads" "$n" "$seconds" &
  sleep 1
  pid=$(pgrep -n -f "plain_threads $n $seconds")
  scan=""
  for t in /proc/"$pid"/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = cprof-scan ] && scan=$t
  done
  [ -n "$scan" ] || { echo "no cprof-scan thread in $pid" >&2; exit 1; }
  a=$(awk '{ print $1 }' "$scan/schedstat")
  sleep 2
  b=$(awk '{ print $1 }' "$scan/schedstat")
  wait
  awk -v n="$n" -v a="$a" -v b="$b" 'BEGIN {
    per_s = (b - a) / 2; printf "%8d %11.1f us %9.1f us\n", n, per_s / 1e3, per_s / 1.25 / 1e3 }'
done
