#!/usr/bin/env bash
# Requests per second the /debug/pprof/ endpoint sustains at concurrency 8
# (wrk, 8 connections, 2 threads, 10 s each) while the test program's
# workload runs: the heap profile (threadcreate when this build has no heap
# profile), goroutine?debug=1 (threadcreate?debug=1 without a goroutine
# profile), and the index page as a baseline. Usage: bench/http_load.sh [BUILD]
set -euo pipefail
build=${1:-build}
prog=$build/test/progs/http_server
command -v wrk >/dev/null || { echo "http_load: wrk is not installed (apt-get install wrk); skipped"; exit 0; }
[ -x "$prog" ] || { echo "http_load: $prog not built; skipped"; exit 0; }
duration=${HTTP_LOAD_SECONDS:-10}
out=$(mktemp)
"$prog" >"$out" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.05; done
base=http://127.0.0.1:$(head -1 "$out")/debug/pprof
index=$(curl -s "$base/")
has() { grep -q "href='$1?debug=1'" <<<"$index"; }
heap=heap; has heap || heap=threadcreate
text=goroutine; has goroutine || text=threadcreate
for path in "$heap" "$text?debug=1" ""; do
  curl -sf -o /dev/null "$base/$path" || { echo "http_load: $base/$path fails"; exit 1; }
  rps=$(wrk -t2 -c8 -d"${duration}s" "$base/$path" | awk '/^Requests\/sec:/ {print $2}')
  bytes=$(curl -s "$base/$path" | wc -c)
  printf 'http_load: %-24s %10s requests/s at concurrency 8 (%s bytes/response)\n' \
    "/${path:-(index)}" "$rps" "$bytes"
done
