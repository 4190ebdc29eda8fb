#!/usr/bin/env bash
# Runs every benchmark in the build (bench/bench_*) one after another. Each
# prints its own figures, measured against a baseline in the same run.
set -euo pipefail
build=${1:-build}
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
  echo
done
