#!/usr/bin/env bash
# The wall-clock profile (docs/wall.md), read by go tool pprof (its
# accuracy is wall_accuracy.sh):
#  1. /debug/pprof/wall through `go tool pprof -seconds 2`, with a CPU
#     profile window open at the same time, and the index lists it;
#  2. CPROF_DUMP=wall writes a block that `cprof extract` turns back into
#     a profile go tool pprof reads.
source "$(dirname "$0")/lib.bash"
mix=$CPROFTEST_BUILD/test/progs/wall_mix
cprof=$CPROFTEST_BUILD/cprof
# 1. Over HTTP, next to a CPU profile window.
start_server srv
url=http://127.0.0.1:$PORT/debug/pprof
curl -sf -o "$TMP/cpu.pb.gz" "$url/profile?seconds=3" &
cpu_pid=$!
sleep 0.3
pprof -seconds 2 -raw "$url/wall" >"$TMP/http.txt"
expect_match "$TMP/http.txt" '^samples/count wall/nanoseconds\[dflt\]$' "go tool pprof -seconds 2 .../wall"
expect_match "$TMP/http.txt" '^Period: 50000000$' "the default rate: 20 Hz per thread"
expect_match "$TMP/http.txt" 'state:\[running\]' "the CPU-burning thread is sampled running"
expect_match "$TMP/http.txt" 'state:\[(clock_nanosleep|nanosleep)\]' "sleeping threads are sampled in their system call"
wait "$cpu_pid" || fail "a CPU profile taken during the wall window failed"
pprof -raw "$TMP/cpu.pb.gz" >"$TMP/cpu.txt"
expect_match "$TMP/cpu.txt" '^samples/count cpu/nanoseconds$' "a CPU window and a wall window at the same time"
curl -s -o /dev/null -w '%{http_code}\n' "$url/wall?seconds=1&hz=0" >"$TMP/code.txt"
expect_match "$TMP/code.txt" '^400$' "hz=0 is refused"
curl -sf -o "$TMP/index.html" "$url/"
expect_match "$TMP/index.html" "href='wall" "the index lists wall"
stop_server "$PID" srv

# 2. A dump at exit, extracted.
CPROF_DUMP=wall CPROF_DUMP_OUT="$TMP/dump.log" "$mix" "$TMP/unused.pb.gz" 1 1 >/dev/null 2>"$TMP/mix2.err" ||
  { cat "$TMP/mix2.err"; fail "wall_mix with CPROF_DUMP=wall failed"; }
expect_match "$TMP/dump.log" '^-----BEGIN PPROF WALL-----$' "CPROF_DUMP=wall writes a WALL block"
"$cprof" extract -o "$TMP/x" "$TMP/dump.log" >"$TMP/extract.txt"
expect_match "$TMP/extract.txt" '1 profiles? written' "cprof extract reads it"
pprof -raw "$(ls "$TMP"/x/wall* | head -1)" >"$TMP/dumped.txt"
expect_match "$TMP/dumped.txt" '^samples/count wall/nanoseconds\[dflt\]$' "the extracted wall profile opens in go tool pprof"
expect_match "$TMP/dumped.txt" 'thread:\[w0\]' "with the worker's samples"
finish
