#!/usr/bin/env bash
# Heap sampling, measured: overhead and memory (bench_heap_overhead: CPU
# time and peak RSS of a malloc/free churn with cprof preloaded vs without,
# and jemalloc prof:true vs plain jemalloc), then accuracy: RUNS runs of
# test/progs/heap_live at the default rate, the inuse_space estimate of each
# site (read through go tool pprof) against the truth and against the
# spread the sampling maths predicts.
#   bench/heap.sh BUILD_DIR [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PPROF_TMPDIR=$tmp

echo "== overhead and memory"
"$build/bench/bench_heap_overhead"

echo
echo "== accuracy: $runs runs of heap_live at the default rate (524288)"
prog=$build/test/progs/heap_live
for i in $(seq 1 "$runs"); do
  "$prog" "$tmp/run" >"$tmp/truth.txt"
  go tool pprof -sample_index=inuse_space -top -unit=B -nodecount=100 \
    "$tmp/run.heap.pb.gz" 2>/dev/null >"$tmp/top.txt"
  awk -v run="$i" '$NF == "hold_pages" || $NF == "hold_records" {
      v = $1; sub(/B$/, "", v); print run, $NF, v }' "$tmp/top.txt" >>"$tmp/est.txt"
done
# Each site is objects of one size s (plus one array of pointers, which is
# sampled almost surely); the estimate of N objects sampled with
# p = 1 - exp(-s/rate) has standard deviation s * sqrt(N (1 - p) / p).
awk -v runs="$runs" '
  FNR == NR { if ($1 == "truth") truth[$2] = $3; next }
  { n[$2]++; sum[$2] += $3; sum2[$2] += $3 * $3 }
  END {
    size["hold_pages"] = 4096; size["hold_records"] = 100
    printf "%-13s %12s %12s %8s %8s %10s %10s %9s\n", "site", "truth", "mean", "mean err", "std err", "spread", "expected", "spread/exp"
    for (s in n) {
      mean = sum[s] / n[s]
      sd = sqrt(sum2[s] / n[s] - mean * mean)
      obj = size[s]; ptr = 8
      N = truth[s] / (obj + ptr)
      p = 1 - exp(-obj / 524288)
      exp_sd = obj * sqrt(N * (1 - p) / p)
      printf "%-13s %12d %12.0f %+7.2f%% %7.2f%% %9.2f%% %9.2f%% %9.2f\n", s, truth[s], mean,
        (mean / truth[s] - 1) * 100, exp_sd / sqrt(n[s]) / truth[s] * 100,
        sd / truth[s] * 100, exp_sd / truth[s] * 100, sd / exp_sd
    }
    printf "(mean err: the mean estimate against the truth; std err: the standard\n"
    printf " error that mean is expected to have over %d runs; spread: the measured\n", runs
    printf " standard deviation of one run; expected: the binomial/Poisson one)\n"
  }' "$tmp/truth.txt" "$tmp/est.txt"

echo
echo "== exactness at CPROF_HEAP_RATE=1"
CPROF_HEAP_RATE=1 "$prog" "$tmp/exact" >"$tmp/truth1.txt"
go tool pprof -sample_index=inuse_space -top -unit=B -nodecount=100 \
  "$tmp/exact.heap.pb.gz" 2>/dev/null >"$tmp/top1.txt"
awk 'FNR == NR { if ($1 == "truth") truth[$2] = $3; next }
  $NF == "hold_pages" || $NF == "hold_records" {
    v = $1; sub(/B$/, "", v)
    printf "%-13s truth %d profile %d %s\n", $NF, truth[$NF], v, v == truth[$NF] ? "exact" : "DIFFERS" }' \
  "$tmp/truth1.txt" "$tmp/top1.txt"
