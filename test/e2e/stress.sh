#!/usr/bin/env bash
# The stress suite in its short form (make test; STRESS_SECONDS=N for the
# long one, which `make stress` runs): test/progs/stress with every profile
# on, while this script polls every profile over HTTP and fires SIGUSR1
# dumps. Passes when the program exits cleanly (under the sanitizers too),
# every poll got a 200 and every dump extracts.
source "$(dirname "$0")/lib.bash"
secs=${STRESS_SECONDS:-4}
prog=$CPROFTEST_BUILD/test/progs/stress
export CPROF_DUMP_OUT=$TMP/dumps.log
"$prog" "$secs" 8 "$TMP/port" >"$TMP/out.txt" 2>"$TMP/err.txt" &
pid=$!
track $pid
for _ in $(seq 200); do [ -s "$TMP/port" ] && break; sleep 0.05; done
port=$(head -1 "$TMP/port")
[ -n "$port" ] || { cat "$TMP/err.txt"; fail "the stress program did not start"; }
base="http://127.0.0.1:$port/debug/pprof"

polls=0 bad=0
poll_loop() {
  local n=0 b=0
  while kill -0 $pid 2>/dev/null; do
    for path in "" heap allocs "goroutine?debug=1" "goroutine?debug=2" threadcreate mutex block \
                "heap?debug=1" "mutex?debug=1" "profile?seconds=1" "threadcreate?seconds=1" cmdline; do
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 "$base/$path" || true)
      n=$((n + 1))
      # 000: the program ended mid-request; 500: CPU profile slots taken.
      case $code in 200|000) ;; 500) [ "${path%%\?*}" = profile ] || b=$((b + 1)) ;; *) b=$((b + 1)); echo "poll $path: HTTP $code" >&2 ;; esac
    done
  done
  echo "$n $b"
}
poll_loop >"$TMP/polls1" &
p1=$!
poll_loop >"$TMP/polls2" &
p2=$!
signals=0
while kill -0 $pid 2>/dev/null; do
  sleep 0.3
  kill -USR1 $pid 2>/dev/null && signals=$((signals + 1)) || true
done
status=0
wait $pid || status=$?
wait $p1 $p2
read -r n1 b1 <"$TMP/polls1"
read -r n2 b2 <"$TMP/polls2"
polls=$((n1 + n2)); bad=$((b1 + b2))
cat "$TMP/out.txt"
[ "$status" -eq 0 ] || { tail -50 "$TMP/err.txt"; fail "the stress program exited with $status"; }
[ "$bad" -eq 0 ] || fail "$bad of $polls polls failed"
if grep -E 'ERROR: (Address|Thread|Leak)Sanitizer|runtime error:|WARNING: ThreadSanitizer' "$TMP/err.txt"; then
  fail "a sanitizer reported a problem"
fi
"$CPROFTEST_BUILD/cprof" extract -o "$TMP/x" "$CPROF_DUMP_OUT" >"$TMP/extract.txt" 2>&1 || { cat "$TMP/extract.txt"; fail "a dump did not extract"; }
echo "stress: $polls HTTP requests served, $signals SIGUSR1 dumps fired, $(sed -n 's/.*: \([0-9]*\) profiles written.*/\1/p' "$TMP/extract.txt") profiles extracted"
checks=$((checks + 1))
finish
