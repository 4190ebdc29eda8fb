#!/usr/bin/env bash
# The CPU profiler's overhead on code without frame pointers, where every
# sample is walked by CFI rows: a fixed amount of work in
# test/progs/nofp_callbacks (built -O2 without frame-pointer flags; its hot
# code is a qsort comparator, 17 frames deep), unprofiled, under cprof at
# 100 and 1000 Hz, and under perf record --call-graph dwarf and gperftools
# at the same rates, alternating in one run. Each figure is the median CPU
# time (user + system, the profiler's own work included) over ROUNDS
# divided by the unprofiled median. Usage: bench/cpu_nofp.sh BUILD [ROUNDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-7}
lib=$(readlink -f "$build/libcprof.so")
prog=$build/test/progs/nofp_callbacks
work=("$prog" -n 240)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
profiler=/usr/lib/$(gcc -print-multiarch)/libprofiler.so.0

cpu_seconds() {
  local TIMEFORMAT='%3U %3S'
  { time "$@" >/dev/null 2>&1; } 2>&1 | awk '{print $1 + $2}'
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
measure() { local name=$1; shift; cpu_seconds "$@" >>"$tmp/$name"; }
ratio() {
  if [ -s "$tmp/$1" ]; then
    awk -v a="$(median <"$tmp/$1")" -v b="$(median <"$tmp/none")" 'BEGIN {printf "%.3f", a / b}'
  else
    echo "n/a"
  fi
}
perf_ok=0
perf record -q -e cpu-clock -o "$tmp/probe" -- true >/dev/null 2>&1 && perf_ok=1

for r in $(seq "$rounds"); do
  echo "cpu_nofp: round $r" >&2
  measure none "${work[@]}"
  for hz in 100 1000; do
    measure "cprof_$hz" env LD_PRELOAD="$lib" CPROF_DUMP="cpu=hz=$hz" CPROF_DUMP_OUT=/dev/null "${work[@]}"
    if [ "$perf_ok" = 1 ]; then
      measure "perf_$hz" perf record -q -e cpu-clock -F "$hz" --call-graph dwarf -o "$tmp/perf.data" -- "${work[@]}"
    fi
    if [ -e "$profiler" ]; then
      measure "gperf_$hz" env LD_PRELOAD="$profiler" CPUPROFILE="$tmp/gperf.prof" CPUPROFILE_FREQUENCY=$hz "${work[@]}"
    fi
  done
done
echo "unprofiled median: $(median <"$tmp/none") s CPU"
printf '%-28s %8s %8s\n' "profiler (stacks)" "100 Hz" "1000 Hz"
printf '%-28s %8s %8s\n' "cprof (CFI)" "$(ratio cprof_100)" "$(ratio cprof_1000)"
printf '%-28s %8s %8s\n' "perf --call-graph dwarf" "$(ratio perf_100)" "$(ratio perf_1000)"
printf '%-28s %8s %8s\n' "gperftools (frame pointers)" "$(ratio gperf_100)" "$(ratio gperf_1000)"
