#!/usr/bin/env bash
# A dump into a pipe whose reader is gone must not kill the program with
# SIGPIPE: the exit dump runs on the program's own thread, after main, and
# the program's exit status must be what it returned.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
# LeakSanitizer (in the ASan build) prints the suppressions it used on
# stderr at exit: here stderr is what is being checked.
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}print_suppressions=0"

# stderr is a pipe whose reader (true) has exited by the time of the exit
# dump.
set +o pipefail
CPROF_DUMP=threadcreate "$host" sleep 0.5 2>&1 >"$TMP/out1" | true
status=${PIPESTATUS[0]}
set -o pipefail
echo "stderr pipe without a reader: exit status $status"
[ "$status" -eq 0 ] || fail "the program's exit status became $status (141 is SIGPIPE)"
expect_match "$TMP/out1" '^ready$' "the program ran"

# CPROF_DUMP_OUT is a FIFO whose reader went away after opening it.
mkfifo "$TMP/fifo"
(exec 3<>"$TMP/fifo"; : >"$TMP/opened"; sleep 0.3) &
reader=$!
for _ in $(seq 200); do [ -e "$TMP/opened" ] && break; sleep 0.05; done
status=0
CPROF_DUMP=threadcreate CPROF_DUMP_OUT="$TMP/fifo" "$host" sleep 1 >"$TMP/out2" 2>"$TMP/err2" || status=$?
wait $reader || true
echo "FIFO whose reader left: exit status $status"
[ "$status" -eq 0 ] || fail "the program's exit status became $status (141 is SIGPIPE)"
checks=$((checks + 1))

finish
