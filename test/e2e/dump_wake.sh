#!/usr/bin/env bash
# The SIGUSR1 handler never blocks the thread it interrupts: with the
# dumper stuck on a full stderr pipe, 100,000 SIGUSR1 (more than the wake-up
# pipe holds) all return at once, because pending requests are one flag
# and the wake-up pipe, non-blocking, holds at most one byte.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
mkfifo "$TMP/fifo"
exec 3<>"$TMP/fifo"   # a reader that never reads: stderr fills up

status=0
t0=$(date +%s%N)
CPROF_DUMP=threadcreate timeout -s KILL 20 "$host" fill-usr1 100000 >"$TMP/out" 2>"$TMP/fifo" || status=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "100000 SIGUSR1 with the dumper stuck: status $status after $ms ms"
[ "$status" -eq 0 ] || fail "the program hung in the SIGUSR1 handler (status $status after $ms ms; 137 is the timeout's SIGKILL)"
expect_match "$TMP/out" '^raised 100000$' "every raise() returned"
[ "$ms" -lt 15000 ] || fail "100000 raises took $ms ms"
exec 3>&-
finish
