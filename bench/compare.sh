#!/usr/bin/env bash
# cprof against the tools people would otherwise use, on the same binaries,
# measured alternately in one run. Each cell is the median over ROUNDS of
# the whole command's CPU time (user + system, the profiler's own work
# included) divided by the median of the same binary with nothing attached
# (jemalloc and tcmalloc rows: divided by that allocator without
# profiling). Usage: bench/compare.sh BUILD_DIR [ROUNDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
b=$build/bench
lib=$(readlink -f "$build/libcprof.so")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
multiarch=$(gcc -print-multiarch)
libdir=/usr/lib/$multiarch
profiler=$libdir/libprofiler.so.0
tcmalloc=$libdir/libtcmalloc.so.4
jemalloc=$libdir/libjemalloc.so.2

# cpu_seconds CMD...: the CPU time the command used, in seconds.
cpu_seconds() {
  local TIMEFORMAT='%3U %3S'
  { time "$@" >/dev/null 2>&1; } 2>&1 | awk '{print $1 + $2}'
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# measure NAME CMD...: appends one sample to $tmp/NAME.
measure() {
  local name=$1
  shift
  cpu_seconds "$@" >>"$tmp/$name"
}

ratio() { # NAME BASE
  if [ -s "$tmp/$1" ] && [ -s "$tmp/$2" ]; then
    awk -v a="$(median <"$tmp/$1")" -v b="$(median <"$tmp/$2")" 'BEGIN {printf "%.3f", a / b}'
  else
    echo "n/a"
  fi
}

have() { [ -e "$1" ] || command -v "$1" >/dev/null 2>&1; }

echo "compare: $rounds alternating rounds per configuration" >&2
for r in $(seq "$rounds"); do
  echo "compare: round $r" >&2
  # CPU: 2 threads, 40-frame stacks.
  work=("$b/plain_cpu_work" 1200)
  measure cpu_none "${work[@]}"
  for hz in 100 1000; do
    env LD_PRELOAD="$lib" CPROF_DUMP="cpu=hz=$hz" CPROF_DUMP_OUT=/dev/null \
      bash -c 'exec "$@"' _ "${work[@]}" >/dev/null 2>&1 || true
    measure "cpu_cprof_$hz" env LD_PRELOAD="$lib" CPROF_DUMP="cpu=hz=$hz" CPROF_DUMP_OUT=/dev/null "${work[@]}"
    if have "$profiler"; then
      measure "cpu_gperf_$hz" env LD_PRELOAD="$profiler" CPUPROFILE="$tmp/gperf.prof" CPUPROFILE_FREQUENCY=$hz "${work[@]}"
    fi
    if have perf; then
      measure "cpu_perf_$hz" perf record -q -F "$hz" -g -o "$tmp/perf.data" -- "${work[@]}"
    fi
  done
  # Heap: malloc/free churn, 2 threads.
  churn=("$b/plain_churn" 60)
  small=("$b/plain_churn" 2)
  measure heap_none "${churn[@]}"
  measure heap_none_small "${small[@]}"
  measure heap_cprof env LD_PRELOAD="$lib" CPROF_DUMP=heap CPROF_DUMP_OUT=/dev/null "${churn[@]}"
  if have "$jemalloc"; then
    measure heap_je env LD_PRELOAD="$jemalloc" "${churn[@]}"
    measure heap_je_prof env LD_PRELOAD="$jemalloc" MALLOC_CONF=prof:true,lg_prof_sample:19 "${churn[@]}"
  fi
  if have "$tcmalloc"; then
    measure heap_tc env LD_PRELOAD="$tcmalloc" "${churn[@]}"
    measure heap_tc_small env LD_PRELOAD="$tcmalloc" "${small[@]}"
    # The heap profiler records every allocation: a shorter run.
    measure heap_tc_prof env LD_PRELOAD="$tcmalloc" HEAPPROFILE="$tmp/tc" HEAP_PROFILE_ALLOCATION_INTERVAL=1073741824 "${small[@]}"
  fi
  if have heaptrack && [ "$r" -le 1 ]; then
    # heaptrack records every allocation: one round is enough to see it.
    measure heap_heaptrack heaptrack -o "$tmp/ht" "${small[@]}"
  fi
done

echo
echo "| workload | cprof | gperftools | jemalloc prof:true | tcmalloc heap profiler | heaptrack | perf record |"
echo "|---|---|---|---|---|---|---|"
echo "| CPU, 2 threads, 40-frame stacks, 100 Hz | $(ratio cpu_cprof_100 cpu_none) | $(ratio cpu_gperf_100 cpu_none) | | | | $(ratio cpu_perf_100 cpu_none) |"
echo "| CPU, same, 1000 Hz | $(ratio cpu_cprof_1000 cpu_none) | $(ratio cpu_gperf_1000 cpu_none) | | | | $(ratio cpu_perf_1000 cpu_none) |"
echo "| malloc/free churn, 2 threads, default rates | $(ratio heap_cprof heap_none) | | $(ratio heap_je_prof heap_je) | $(ratio heap_tc_prof heap_tc_small) | $(ratio heap_heaptrack heap_none_small) | |"
echo
echo "Each cell: whole-process CPU time with the profiler / without it (median of $rounds; heaptrack: 1 round)."
echo "The tcmalloc heap profiler and heaptrack record every allocation, so they run a churn 30 times shorter, against the same short baseline."
echo "Baselines: CPU $(median <"$tmp/cpu_none") s, churn on glibc $(median <"$tmp/heap_none") s."
