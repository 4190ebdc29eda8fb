#!/usr/bin/env bash
# Runs the bundled demo program and shows what cprof recorded, read back by
# the reference reader, `go tool pprof`.
set -euo pipefail
build=${1:-build}
out="$build/demo-profiles"
rm -rf "$out"
export PPROF_TMPDIR="$build/pprof-tmp"
mkdir -p "$PPROF_TMPDIR"

"$build/examples/demo" -t 2 -o "$out"
echo
echo "== go tool pprof -top -lines $out/cpu.pb.gz  (CPU: where the time went)"
go tool pprof -top -lines -nodecount=12 "$out/cpu.pb.gz" 2>&1
echo
echo "== go tool pprof -top -lines $out/threadcreate.pb.gz"
go tool pprof -top -lines "$out/threadcreate.pb.gz" 2>&1
echo
echo "== go tool pprof -traces $out/threadcreate.pb.gz"
go tool pprof -traces "$out/threadcreate.pb.gz" 2>&1
