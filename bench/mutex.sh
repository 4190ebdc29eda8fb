#!/usr/bin/env bash
# Mutex interposition overhead. Uncontended lock/unlock pairs with the
# profiles off, cprof-linked against plain glibc (the same code built
# twice), and a contended 4-thread workload with mutex fraction 0 vs 1.
# Medians of RUNS runs. Usage: bench/mutex.sh BUILD_DIR [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-5}
b=$build/bench

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
run() { for _ in $(seq "$runs"); do "$@" | sed 's/.*=//'; done | median; }

plain=$(run "$b/plain_mutex" uncontended 50000000)
off=$(run "$b/bench_mutex" uncontended 50000000)
c0=$(run "$b/bench_mutex" contended 2 0)
c1=$(run "$b/bench_mutex" contended 2 1)
printf '%-44s %14s %14s %8s\n' workload baseline cprof ratio
printf '%-44s %11s ns %11s ns %8.3f\n' "uncontended lock+unlock, profiles off" \
  "$plain" "$off" "$(awk -v a="$off" -v b="$plain" 'BEGIN {print a / b}')"
printf '%-44s %10s ops/s %10s ops/s %8.3f\n' "4 threads contended, fraction 0 -> 1" \
  "$c0" "$c1" "$(awk -v a="$c0" -v b="$c1" 'BEGIN {print a / b}')"
echo "(ratio = cprof time / baseline time; for throughput, baseline ops / cprof ops)"
