#!/usr/bin/env bash
# A dump log cprof creates is private to the user (0600): profiles name
# the program's functions and files. A file that exists keeps its mode.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
umask 022
CPROF_DUMP=threadcreate CPROF_DUMP_OUT="$TMP/new.log" "$host" rates >/dev/null 2>&1
mode=$(stat -c %a "$TMP/new.log")
echo "created with mode $mode"
[ "$mode" = 600 ] || fail "a new dump log was created $mode, not 600"
expect_match "$TMP/new.log" '^-----BEGIN PPROF THREADCREATE-----$' "the dump is in the new log"
: >"$TMP/old.log"
chmod 644 "$TMP/old.log"
CPROF_DUMP=threadcreate CPROF_DUMP_OUT="$TMP/old.log" "$host" rates >/dev/null 2>&1
mode=$(stat -c %a "$TMP/old.log")
[ "$mode" = 644 ] || fail "an existing log's mode changed to $mode"
expect_match "$TMP/old.log" '^-----BEGIN PPROF THREADCREATE-----$' "an existing log is appended to and keeps its mode 644"
finish
