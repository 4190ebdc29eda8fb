#!/usr/bin/env bash
# Debian's redis-server under load (redis-benchmark, 3 s), profiled by cprof
# (cprof run --dump cpu, dumped at SIGTERM) and by perf record --call-graph
# dwarf in a second run: stack depth, the share of samples reaching main
# (or a thread's start), the cumulative share of aeMain, and for cprof the
# share of samples holding a location outside every mapping (a data word
# followed as a frame pointer; the frame-pointer walk had 29.9% of them).
# Usage: bench/redis_stacks.sh BUILD. Needs redis-server, redis-cli and
# redis-benchmark (Debian's redis-server and redis-tools).
set -euo pipefail
build=${1:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
cprof=$build/cprof
for t in redis-server redis-benchmark redis-cli; do
  command -v $t >/dev/null || { echo "$t missing: n/a"; exit 0; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 20000))

load() {
  for _ in $(seq 50); do
    [ "$(timeout 2 redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
    sleep 0.1
  done
  timeout 4 redis-benchmark -p "$port" -c 8 -n 10000000 -q -t set,get,lpush,lpop >/dev/null 2>&1 || true
}

CPROF_CPU_HZ=1000 "$cprof" run --dump cpu --dump-out "$tmp/redis.log" -- \
  redis-server --port "$port" --save "" --appendonly no >/dev/null 2>&1 &
pid=$!
load
kill -TERM "$pid"; wait "$pid" || true
"$cprof" extract -o "$tmp/x" "$tmp/redis.log" >/dev/null
prof=$(ls "$tmp"/x/cpu-*.pb.gz | head -1)
go tool pprof -traces "$prof" 2>/dev/null >"$tmp/traces"
go tool pprof -raw "$prof" 2>/dev/null >"$tmp/raw"
d=$(python3 "$src/test/e2e/traces.py" --depths <"$tmp/traces")
m=$(python3 "$src/test/e2e/traces.py" "main|start_thread|clone3" <"$tmp/traces" | awk '{print $2}')
a=$(python3 "$src/test/e2e/traces.py" aeMain <"$tmp/traces" | awk '{print $2}')
stray=$(python3 - "$tmp/raw" <<'PY'
import re, sys
locs, total, bad = {}, 0, 0
section = None
samples = []
for line in open(sys.argv[1]):
    if line.startswith(("Samples:", "Locations", "Mappings")):
        section = line.split()[0].rstrip(":")
        continue
    if section == "Samples":
        m = re.match(r"^\s+(\d+)\s+\d+: ([\d ]+)$", line)
        if m:
            samples.append((int(m.group(1)), m.group(2).split()))
    elif section == "Locations":
        m = re.match(r"^\s+(\d+): 0x[0-9a-f]+ (M=\d+)?", line)
        if m:
            locs[m.group(1)] = bool(m.group(2)) or "[cprof" in line
for n, ids in samples:
    total += n
    if not all(locs.get(i, True) for i in ids):
        bad += n
print("%.1f" % (100.0 * bad / total if total else 0))
PY
)
printf '%-6s %-24s main %5s%%  aeMain %5s%%  samples with a frame outside every mapping %s%%\n' cprof "$d" "$m" "$a" "$stray"

if perf record -q -e cpu-clock -o "$tmp/probe" -- true >/dev/null 2>&1; then
  perf record -q -e cpu-clock -F 999 --call-graph dwarf -o "$tmp/perf.data" -- \
    redis-server --port "$port" --save "" --appendonly no >/dev/null 2>&1 &
  pid=$!
  load
  kill -TERM "$pid"; wait "$pid" || true
  perf script -i "$tmp/perf.data" 2>/dev/null | python3 "$src/bench/perf_stacks.py" aeMain >"$tmp/perf.txt"
  head=$(head -1 "$tmp/perf.txt")
  printf '%-6s %-24s main %5s%%  aeMain %5s%%\n' perf "$(awk '{print $1, $2, $3, $4}' <<<"$head")" \
    "$(awk '{print $6}' <<<"$head")" "$(awk 'NR == 2 {print $2}' "$tmp/perf.txt")"
fi
