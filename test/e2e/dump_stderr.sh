#!/usr/bin/env bash
# Dumps to stderr go to the stderr the program started with, through a
# descriptor of cprof's own: a program that closed fd 2 and reused it for
# a data file must not find PEM blocks in its data, and a program that
# closes stderr at exit (coreutils do) must still get its exit dump.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
# LeakSanitizer (in the ASan build) prints the suppressions it used on
# stderr at exit: here stderr is what is being checked.
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}print_suppressions=0"

CPROF_DUMP=threadcreate "$host" reuse-fd2 "$TMP/data" >"$TMP/out1" 2>"$TMP/err1"
size=$(stat -c %s "$TMP/data")
echo "reused fd 2: the data file has $size bytes (the program wrote 5)"
[ "$(cat "$TMP/data")" = DATA ] || { head -3 "$TMP/data"; fail "the program's data file holds $size bytes, not its 5"; }
checks=$((checks + 1))
expect_match "$TMP/err1" '^-----BEGIN PPROF THREADCREATE-----$' "the exit dump went to the original stderr"
expect_match "$TMP/err1" '^-----END PPROF THREADCREATE-----$' "and is whole"

CPROF_DUMP=threadcreate "$host" close-at-exit >"$TMP/out2" 2>"$TMP/err2"
echo "closed at exit: stderr holds $(stat -c %s "$TMP/err2") bytes"
expect_match "$TMP/err2" '^-----BEGIN PPROF THREADCREATE-----$' "a program that closes stderr at exit still gets its exit dump"
"$CPROFTEST_BUILD/cprof" extract -o "$TMP/x" "$TMP/err2" >"$TMP/extract.txt"
expect_match "$TMP/extract.txt" '1 profiles? written' "the dump extracts"
finish
