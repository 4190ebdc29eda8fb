#!/usr/bin/env bash
# A process that makes itself not dumpable (prctl PR_SET_DUMPABLE 0, as
# daemons holding secrets do) owns none of its private /proc files: the
# kernel refuses it /proc/self/task/*/syscall and /proc/self/auxv. Its
# goroutine profile still lists every thread (it was "total 1": only the
# collecting thread), running ones with their stacks, those waiting in
# the kernel as cprof_thread_not_dumpable, with one line on stderr saying
# why; and every profile keeps its function names (libdw's report of the
# process read auxv first and gave up: no names anywhere), the maps file,
# readable by all, telling the objects instead.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/nondumpable

# LeakSanitizer stops the world with ptrace, which a process that is not
# dumpable refuses it.
rc=0
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$prog" >"$TMP/out.txt" 2>"$TMP/err.txt" || rc=$?
cat "$TMP/err.txt"
[ "$rc" = 3 ] && skip_rest "the program runs as root and cannot become nobody here ($(cat "$TMP/err.txt"))"
[ "$rc" = 0 ] || { cat "$TMP/out.txt"; fail "nondumpable exited $rc"; }
echo "running as $(id -un); the program dropped to nobody: $([ "$(id -u)" = 0 ] && echo yes || echo no)"
sed -n '1,/^-- threadcreate$/p' "$TMP/out.txt" >"$TMP/goroutine.txt"
sed -n '/^-- threadcreate$/,$p' "$TMP/out.txt" >"$TMP/threadcreate.txt"
cat "$TMP/out.txt"

threads=$(sed -n 's/^threads \([0-9]*\)$/\1/p' "$TMP/err.txt")
[ -n "$threads" ] || fail "the program did not say how many threads it has"
expect_match "$TMP/goroutine.txt" "^goroutine profile: total $threads\$" \
  "the goroutine profile counts all $threads threads /proc/self/task lists (the collector, two asleep, one spinning, and any of a sanitizer's runtime)"
# The two asleep (and a sanitizer runtime's own thread, asleep too).
waiting=$(awk '/^[0-9]+ @ / {n = $1} /\tcprof_thread_not_dumpable\+/ {print n; exit}' "$TMP/goroutine.txt")
[ "${waiting:-0}" -ge 2 ] || fail "${waiting:-no} threads shown as cprof_thread_not_dumpable, not the two waiting in the kernel"
checks=$((checks + 1))
echo "ok: the $waiting threads waiting in the kernel are shown as cprof_thread_not_dumpable"
expect_match "$TMP/goroutine.txt" '	spin_here\+0x[0-9a-f]+	.*nondumpable\.c:[0-9]+$' \
  "the spinning thread has its stack, named with file and line"
expect_match "$TMP/goroutine.txt" '	main\+0x[0-9a-f]+	.*nondumpable\.c:[0-9]+$' \
  "the collecting thread's stack is named"
n=$(grep -c 'is not dumpable' "$TMP/err.txt" || true)
[ "$n" = 1 ] || fail "the not-dumpable line came $n times on stderr, not once"
checks=$((checks + 1))
echo "ok: one line on stderr says why threads have no stacks"
expect_match "$TMP/err.txt" '^cprof: goroutine: the process is not dumpable \(prctl PR_SET_DUMPABLE 0\)' \
  "the line names the cause"
expect_match "$TMP/threadcreate.txt" "^threadcreate profile: total $((threads - 1))\$" \
  "threadcreate counts the $((threads - 1)) threads started after the main one"
expect_match "$TMP/threadcreate.txt" '	main\+0x[0-9a-f]+	.*nondumpable\.c:[0-9]+$' \
  "threadcreate names the creating function, file and line"
finish
