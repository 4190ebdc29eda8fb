#!/usr/bin/env bash
# profilez through an application's own admin protocol: the example
# admin-server answers "Profiling is not enabled" until ENABLE, keeps the
# block profile off unless it was enabled, and serves heap and CPU profiles
# that go tool pprof opens.
source "$(dirname "$0")/lib.bash"
server=$CPROFTEST_BUILD/examples/admin-server
"$server" >"$TMP/port" &
spid=$!
track $spid
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
port=$(head -1 "$TMP/port")

# ask COMMAND OUTFILE: sends one command; the status line goes to stdout,
# the payload (if any) to OUTFILE.
ask() {
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf '%s\n' "$1" >&3
  local status len
  IFS= read -r status <&3
  echo "$status"
  case $status in
    "OK "*) len=${status#OK }; head -c "$len" <&3 >"$2" ;;
  esac
  printf 'QUIT\n' >&3 2>/dev/null || true
  exec 3<&-
}

[ "$(ask 'PROFILEZ heap 0' "$TMP/x")" = "ERR Profiling is not enabled" ] || fail "profilez answered before profiling was enabled"
echo "ok: 'Profiling is not enabled' before ENABLE"
[ "$(ask 'ENABLE' /dev/null)" = "OK" ] || fail "ENABLE failed"
[ "$(ask 'PROFILEZ block 0' "$TMP/x")" = "ERR block profile is not enabled" ] || fail "the block profile was served without being enabled"
echo "ok: the block profile stays off unless enabled"
[ "$(ask 'PROFILEZ mutex 0' "$TMP/x")" = "ERR mutex profile is not enabled" ] || fail "the mutex profile was served without being enabled"
[ "$(ask 'PROFILEZ nosuch 0' "$TMP/x")" = "ERR Unknown profile" ] || fail "unknown profile"
echo "ok: unknown and disabled profiles refused with their own errors"
checks=$((checks + 3))

status=$(ask 'PROFILEZ cpu 0 2' "$TMP/cpu.pb.gz")
case $status in "OK "*) ;; *) fail "cpu: $status" ;; esac
pprof -top "$TMP/cpu.pb.gz" >"$TMP/cpu.txt"
expect_match "$TMP/cpu.txt" ' hash_requests$' "a 2 s CPU profile through profilez names the hot function"
expect_match "$TMP/cpu.txt" '^Duration: 2' "the CPU profile covers the 2 seconds asked for"
status=$(ask 'PROFILEZ heap 0' "$TMP/heap.pb.gz")
case $status in "OK "*) ;; *) fail "heap: $status" ;; esac
pprof -sample_index=inuse_space -top "$TMP/heap.pb.gz" >"$TMP/heap.txt"
if sanitized_build "$server"; then
  # The sanitizer's malloc comes before the shared libcprof's in symbol
  # lookup, so a sanitized program linked with -lcprof has no heap samples.
  expect_match "$TMP/heap.txt" '^Type: inuse_space$' "heap through profilez (sanitizer build: no samples expected)"
else
  expect_match "$TMP/heap.txt" ' cache_entry$' "heap through profilez names the allocating function"
fi
status=$(ask 'PROFILEZ goroutine 1' "$TMP/threads.txt")
expect_match "$TMP/threads.txt" '^goroutine profile: total [0-9]+$' "text formats through profilez"
status=$(ask 'PROFILEZ threadcreate 0 1' "$TMP/tc.pb.gz")
case $status in "OK "*) ;; *) fail "threadcreate delta: $status" ;; esac
pprof -raw "$TMP/tc.pb.gz" >"$TMP/tc.txt"
expect_match "$TMP/tc.txt" '^Duration: 1' "seconds on a named profile gives a delta"
finish
