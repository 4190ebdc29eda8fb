#!/usr/bin/env bash
# CPU profile accuracy, cprof against the truth (CLOCK_THREAD_CPUTIME_ID)
# and against gperftools' libprofiler on the same program, read through
# go tool pprof. Usage: bench/cpu_accuracy.sh BUILD_DIR [SECONDS]
set -euo pipefail
build=${1:-build}
secs=${2:-5}
prog=$build/bench/bench_cpu_accuracy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PPROF_TMPDIR=$tmp

# report MODE TRUTH_FILE TOP_FILE: prints measured vs true shares.
report() {
  local mode=$1 truth=$2 top=$3
  awk -v mode="$mode" '
    FNR == NR { if ($1 == "truth") t[$2] = $3; next }
    /ms / && NF >= 6 {
      f = $1; c = $4; sub(/ms$/, "", f); sub(/ms$/, "", c)
      flat[$6] += f; cum[$6] += c
    }
    /^Showing nodes accounting for/ { for (i = 1; i <= NF; i++) if ($i == "total") total = $(i - 1) }
    END {
      sub(/ms$/, "", total)
      printf "%-10s total sampled %.0f ms vs measured %.0f ms (%+.1f%%)\n",
        mode, total, t["total"] * 1000, (total / (t["total"] * 1000) - 1) * 100
      split("busy_thread half_thread", th, " ")
      for (i = 1; i <= 2; i++) {
        n = th[i]
        printf "%-10s thread %-12s %5.1f%% of samples vs %5.1f%% true (%+.1f points)\n",
          mode, n, 100 * cum[n] / total, 100 * t[n] / t["total"],
          100 * cum[n] / total - 100 * t[n] / t["total"]
      }
      split("busy_hot busy_cold half_hot half_cold", fn, " ")
      for (i = 1; i <= 4; i++) {
        n = fn[i]
        printf "%-10s func   %-12s %5.1f%% of samples vs %5.1f%% true (%+.1f points)\n",
          mode, n, 100 * flat[n] / total, 100 * t[n] / t["total"],
          100 * flat[n] / total - 100 * t[n] / t["total"]
      }
    }' "$truth" "$top"
}

"$prog" "$secs" "$tmp/cprof.pb.gz" cprof 100 >"$tmp/cprof.truth"
go tool pprof -top -unit=ms -nodecount=100 "$tmp/cprof.pb.gz" >"$tmp/cprof.top" 2>&1
report cprof "$tmp/cprof.truth" "$tmp/cprof.top"

if "$prog" "$secs" "$tmp/gperf.prof" gperftools >"$tmp/gperf.truth" 2>"$tmp/gperf.err"; then
  go tool pprof -top -unit=ms -nodecount=100 "$prog" "$tmp/gperf.prof" >"$tmp/gperf.top" 2>&1
  report gperftools "$tmp/gperf.truth" "$tmp/gperf.top"
else
  echo "gperftools: not measured ($(head -1 "$tmp/gperf.err"))"
fi
