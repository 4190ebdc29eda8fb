#!/usr/bin/env bash
# Runs the bundled demo program and shows what cprof recorded, read back by
# the reference reader, `go tool pprof`: first live, through the demo's
# /debug/pprof/ endpoint, then from the files it writes when it ends.
set -euo pipefail
build=${1:-build}
out="$build/demo-profiles"
rm -rf "$out"
mkdir -p "$out"
export PPROF_TMPDIR="$build/pprof-tmp"
mkdir -p "$PPROF_TMPDIR"

"$build/examples/demo" -t 6 -o "$out" -p "$out/port" &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$out/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$out/port")/debug/pprof"
echo "demo: serving $url/"
echo
echo "== go tool pprof -top -lines '$url/profile?seconds=3'   (CPU, fetched live)"
go tool pprof -top -lines -nodecount=10 "$url/profile?seconds=3" 2>&1 | grep -v '^Saved profile'
echo
echo "== go tool pprof -sample_index=inuse_space -top '$url/heap'   (live heap)"
go tool pprof -sample_index=inuse_space -top -nodecount=8 "$url/heap" 2>&1 | grep -v '^Saved profile'
echo
echo "== go tool pprof -top '$url/mutex'   (who held the contended lock)"
go tool pprof -top -nodecount=6 "$url/mutex" 2>&1 | grep -v '^Saved profile'
wait $demo
trap - EXIT
echo
echo "== go tool pprof -top -lines $out/threadcreate.pb.gz   (written at exit)"
go tool pprof -top -lines "$out/threadcreate.pb.gz" 2>&1
