#!/usr/bin/env bash
# Runs every benchmark in the build (bench/bench_*) and every script in
# bench/ one after another; each prints its own figures, measured against a
# baseline in the same run. compare.sh goes last: its table of cprof against
# the other profilers closes the output. bench/README.md says how to read it.
set -euo pipefail
build=${1:-build}
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  # Driven by their scripts below.
  case $b in *_accuracy | */bench_heap_overhead | */bench_mutex) continue ;; esac
  echo "== $(basename "$b")"
  "$b"
  echo
done
for s in bench/*.sh; do
  [ -f "$s" ] && [ "$s" != bench/compare.sh ] || continue
  echo "== $(basename "$s")"
  bash "$s" "$build"
  echo
done
echo "== compare.sh"
bash bench/compare.sh "$build"
