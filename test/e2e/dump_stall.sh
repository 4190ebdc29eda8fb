#!/usr/bin/env bash
# A dump into a stderr pipe that is full and never read must not keep the
# program alive: SIGTERM still ends it, within cprof's documented bound
# (a write that makes no progress for 2 s is abandoned; a terminating
# signal waits at most 5 s for its dump in any case).
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
mkfifo "$TMP/fifo"
# The test holds the FIFO open for reading and writing, never reads it,
# and fills it.
exec 3<>"$TMP/fifo"
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
try:
    while True:
        os.write(fd, b"x" * 4096)
except BlockingIOError:
    pass
' "$TMP/fifo"

CPROF_DUMP=threadcreate "$host" park >"$TMP/out" 2>"$TMP/fifo" &
pid=$!
track $pid
for _ in $(seq 200); do grep -q ready "$TMP/out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$TMP/out" || fail "the program did not start"
t0=$(date +%s%N)
kill -TERM $pid
alive=1
for _ in $(seq 150); do  # up to 15 s: three times the bound
  kill -0 $pid 2>/dev/null || { alive=0; break; }
  sleep 0.1
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ $alive -eq 1 ]; then
  kill -KILL $pid
  fail "SIGTERM not honoured: still alive $ms ms later, the dumper blocked on the full pipe"
fi
status=0
wait $pid || status=$?
echo "full stderr pipe: died $ms ms after SIGTERM, status $status"
[ "$status" -eq 143 ] || fail "status $status, want 143 (SIGTERM)"
[ "$ms" -lt 9000 ] || fail "SIGTERM took $ms ms, beyond the documented 5 s bound"
checks=$((checks + 1))
exec 3>&-
finish
