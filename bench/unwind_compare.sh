#!/usr/bin/env bash
# Stacks through code without frame pointers, cprof against
# `perf record --call-graph dwarf` on the same workloads: the two test
# programs built -O2 without frame-pointer flags, and Debian's sqlite3 and
# python3 (when installed). For each, the stack depth (median and mean
# frames), the share of samples reaching main or a thread's start, and the
# cumulative share of a few functions by each tool. Both sample CPU time at
# about 1 kHz for the same run length.
set -euo pipefail
build=${1:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
cprof=$build/cprof
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shares=$src/test/e2e/traces.py
perf_shares=$src/bench/perf_stacks.py
if ! perf record -q -e cpu-clock -o "$tmp/probe.data" -- true 2>/dev/null; then
  echo "perf cannot record here: n/a"
  exit 0
fi

# row NAME FUNCS... -- COMMAND...: one line per tool.
row() {
  local name=$1
  shift
  local funcs=()
  while [ "$1" != -- ]; do funcs+=("$1"); shift; done
  shift
  CPROF_CPU_HZ=1000 "$cprof" run --dump cpu --dump-out "$tmp/$name.log" -- "$@" >/dev/null 2>&1 || true
  "$cprof" extract -o "$tmp/$name" "$tmp/$name.log" >/dev/null
  local prof
  prof=$(ls "$tmp/$name"/cpu-*.pb.gz | head -1)
  go tool pprof -traces "$prof" 2>/dev/null >"$tmp/$name.traces"
  local d m c=()
  d=$(python3 "$shares" --depths <"$tmp/$name.traces")
  m=$(python3 "$shares" "main|__libc_start_call_main|start_thread|clone3" <"$tmp/$name.traces" | awk '{print $2}')
  for f in "${funcs[@]}"; do
    c+=("$f=$(python3 "$shares" "$f" <"$tmp/$name.traces" | awk '{print $2}')")
  done
  printf '%-16s cprof  %-22s main %5s%%  %s\n' "$name" "$d" "$m" "${c[*]}"
  perf record -q -e cpu-clock -F 999 --call-graph dwarf -o "$tmp/$name.data" -- "$@" >/dev/null 2>&1 || true
  perf script -i "$tmp/$name.data" 2>/dev/null >"$tmp/$name.script"
  local p
  p=$(python3 "$perf_shares" "${funcs[@]}" <"$tmp/$name.script")
  local head rest
  head=$(head -1 <<<"$p")
  rest=$(tail -n +2 <<<"$p" | awk '{printf "%s=%s ", $1, $2}')
  printf '%-16s perf   %-22s main %5s%%  %s\n' "$name" \
    "$(awk '{print $1, $2, $3, $4}' <<<"$head")" "$(awk '{print $6}' <<<"$head")" "$rest"
}

echo "workload         tool   depth                  reach       cumulative shares (%)"
row nofp_callbacks main sort_records compare_records make_names -- \
  "$build/test/progs/nofp_callbacks" 2
row nofp_cxx main sort_phase map_phase weigh -- "$build/test/progs/nofp_cxx" 2
if command -v sqlite3 >/dev/null; then
  row sqlite3 main sqlite3_step sqlite3VdbeExec -- sqlite3 :memory: \
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<2000000) SELECT sum(x) FROM c;"
fi
if [ -x /usr/bin/python3 ]; then
  row python3 main _PyEval_EvalFrameDefault PyObject_Vectorcall -- /usr/bin/python3 -c \
    "import time
t=time.process_time()
n=0
while time.process_time()-t<2: n+=sum(i*i for i in range(1000))"
fi
