#!/usr/bin/env bash
# cprof's own threads (the dumper, the pusher's two) block every signal,
# so a signal meant for the program is never handled on them: read from
# /proc/PID/task/*/status while dumps and pushing are on. (Threads of the
# HTTP server, libmicrohttpd's, are not looked at here.) No thread can
# block SIGKILL and SIGSTOP, and glibc keeps its own 32 and 33 unblocked.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host
CPROF_DUMP=cpu,threadcreate CPROF_PUSH_URL=http://127.0.0.1:1 CPROF_PUSH_INTERVAL=1 \
  "$host" park >"$TMP/out" 2>"$TMP/err" &
pid=$!
track $pid
for _ in $(seq 200); do grep -q ready "$TMP/out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$TMP/out" || fail "the program did not start"
sleep 0.3
# Every signal that can be blocked: all of 1..64 but SIGKILL (9), SIGSTOP
# (19) and glibc's 32 and 33.
all=fffffffe7ffbfeff
seen=""
for task in /proc/$pid/task/*; do
  name=$(cat "$task/comm")
  blk=$(awk '/^SigBlk:/ {print $2}' "$task/status")
  echo "thread $(basename "$task") $name: SigBlk $blk"
  case $name in
    cprof-*)
      seen="$seen $name"
      [ "$blk" = "$all" ] || fail "$name does not block every signal (SigBlk $blk, want $all)"
      ;;
  esac
done
for want in cprof-dump cprof-push cprof-upload; do
  [[ " $seen " == *" $want "* ]] || fail "no $want thread found (saw:$seen)"
done
echo "ok: cprof-dump, cprof-push and cprof-upload block every signal"
checks=$((checks + 1))
kill -TERM $pid
status=0
wait $pid || status=$?
[ "$status" -eq 143 ] || fail "status $status after SIGTERM, want 143"
finish
