#!/usr/bin/env bash
# Runs every benchmark in the build (bench/bench_*) one after another. Each
# prints its own figures, measured against a baseline in the same run.
set -euo pipefail
build=${1:-build}
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  case $b in *_accuracy) continue ;; esac  # driven by its script below
  echo "== $(basename "$b")"
  "$b"
  echo
done
for s in bench/*.sh; do
  [ -f "$s" ] || continue
  echo "== $(basename "$s")"
  bash "$s" "$build"
  echo
done
