#!/usr/bin/env bash
# The wall-clock profile's cost on a CPU-bound program, against the same
# work unprofiled in the same run, alternating (bench/bench_wall_overhead.c):
# at the default rate (20 Hz per thread) and at 100 Hz.
# Usage: bench/wall.sh BUILD_DIR [ROUNDS] [WORK_MILLIONS]
set -euo pipefail
build=${1:-build}
rounds=${2:-10}
work=${3:-1500}
"$build/bench/bench_wall_overhead" "$rounds" "$work"
"$build/bench/bench_wall_overhead" "$rounds" "$work" 100
