#!/usr/bin/env bash
# Debug information found on this machine only, whether or not
# DEBUGINFOD_URLS is set: a program whose DWARF lives only in a separate
# file named by its .gnu_debuglink must get the functions, files and lines
# addr2line -i gives for the unstripped program, with DEBUGINFOD_URLS
# pointing at a local listener that must never be connected to (and, where
# strace works, no connect() at all). Copies: a, with a build ID, its debug
# file beside it; b, without one, its debug file in .debug/ (only the
# link's CRC ties the two); c, without one, beside another program's
# debug file under the right name, which the CRC must refuse. libc's
# lines come from the build-id tree, also with the variable set.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
orig=$CPROFTEST_BUILD/test/progs/nofp_callbacks
nobid=$CPROFTEST_BUILD/test/progs/nofp_callbacks_nobuildid
checker=$CPROFTEST_SRC/test/e2e/addr2line_check.py
if tsan_build "$orig"; then
  skip_rest "preloaded runs are covered by the plain and ASan builds"
fi
rt=$(preload_env "$orig" | sed 's#[^ ]*libcprof\.so##')

# A listener standing for a debuginfod server: it records every connection.
cat >"$TMP/listen.py" <<'PY'
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    with open(sys.argv[1], "a") as f:
        f.write("connection\n")
    c.close()
PY
: >"$TMP/connections"
python3 "$TMP/listen.py" "$TMP/connections" >"$TMP/port" &
track $!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
port=$(head -1 "$TMP/port")
[ -n "$port" ] || fail "listener did not start"
python3 -c "import socket; socket.create_connection(('127.0.0.1', $port)).close()"
for _ in $(seq 50); do [ -s "$TMP/connections" ] && break; sleep 0.05; done
[ "$(wc -l <"$TMP/connections")" -eq 1 ] || fail "the listener missed a test connection"
: >"$TMP/connections"
urls="DEBUGINFOD_URLS=http://127.0.0.1:$port/"
checks=$((checks + 1))
echo "ok: a listener on port $port records connections"

mkdir -p "$TMP/a" "$TMP/b/.debug" "$TMP/c"
objcopy --only-keep-debug "$orig" "$TMP/a/prog.debug"
objcopy --strip-debug --add-gnu-debuglink="$TMP/a/prog.debug" "$orig" "$TMP/a/prog"
objcopy --only-keep-debug "$nobid" "$TMP/b/.debug/prog.debug"
(cd "$TMP/b/.debug" && objcopy --strip-debug --add-gnu-debuglink=prog.debug "$nobid" "$TMP/b/prog")
cp "$TMP/b/prog" "$TMP/c/prog"
cp "$TMP/a/prog.debug" "$TMP/c/prog.debug"
# (grep reads files here, not pipes: with pipefail, grep -q's early exit
# can fail the writer of a pipe.)
for d in a b c; do
  readelf -S "$TMP/$d/prog" >"$TMP/$d.sections"
  grep -q '\.debug_info' "$TMP/$d.sections" && fail "$d/prog still has .debug_info"
  grep -q '\.gnu_debuglink' "$TMP/$d.sections" || fail "$d/prog has no .gnu_debuglink"
done
readelf -n "$TMP/b/prog" >"$TMP/b.notes"
grep -q 'Build ID' "$TMP/b.notes" && fail "b/prog has a build ID"
checks=$((checks + 1))
echo "ok: stripped copies with their debug information only in .gnu_debuglink files"

# strace, where it works; not in a sanitizer build, whose leak checker
# refuses to run under ptrace.
use_strace=0
if ! sanitized_build "$orig"; then
  strace -f -qq -e trace=connect -o "$TMP/strace.try" true 2>/dev/null && use_strace=1
fi

# run NAME PROG [ENV...]: profiles PROG under cprof run (and strace, when it
# works); leaves $TMP/NAME.cpu.raw and $TMP/NAME.heap.raw.
run() {
  local name=$1 prog=$2
  shift 2
  local cmd=(env "$@" DEBUGINFOD_CACHE_PATH="$TMP/cache" CPROF_HEAP_RATE=65536
    LD_PRELOAD="$rt" "$cprof" run --dump cpu,heap --dump-out "$TMP/$name.log" --
    "$prog" 1)
  if [ "$use_strace" = 1 ]; then
    strace -f -qq -e trace=connect -o "$TMP/$name.strace" "${cmd[@]}" >/dev/null
  else
    "${cmd[@]}" >/dev/null
  fi
  "$cprof" extract -o "$TMP/$name" "$TMP/$name.log" >/dev/null
  for kind in cpu heap; do
    pprof -raw -symbolize=none "$TMP/$name/$kind"-*.pb.gz >"$TMP/$name.$kind.raw"
  done
}

libc_debug=$(readelf -n /lib/x86_64-linux-gnu/libc.so.6 2>/dev/null |
  awk '/Build ID/ {print "/usr/lib/debug/.build-id/" substr($3, 1, 2) "/" substr($3, 3) ".debug"}')

# hot_line NAME DIR LABEL ORIGINAL: the comparator's hottest line, as
# addr2line on ORIGINAL (the unstripped program) names the sampled
# addresses, is named with its file. Which of its lines is hottest depends
# on the CPU the program ran on.
hot_line() {
  local name=$1 dir=$2 label=$3 original=$4
  sed "s#$TMP/$dir/prog#$original#" "$TMP/$name.cpu.raw" >"$TMP/$name.orig.raw"
  python3 "$checker" --hot compare_records "$TMP/$name.orig.raw" >"$TMP/$name.hot" ||
    { cat "$TMP/$name.hot" >&2; fail "$label: addr2line puts no sample in compare_records"; }
  echo "$label: addr2line on the unstripped program, samples by the comparator's line: $(sed -n 's/^line //p' "$TMP/$name.hot" | tr '\n' ' ')"
  local hot
  hot=$(sed -n 's/^hot nofp_callbacks\.c:\([0-9]*\) .*/\1/p' "$TMP/$name.hot")
  [ -n "$hot" ] || { cat "$TMP/$name.hot" >&2; fail "$label: the comparator's hottest line is not in nofp_callbacks.c"; }
  pprof -top -lines "$TMP/$name"/cpu-*.pb.gz >"$TMP/$name.top"
  expect_match "$TMP/$name.top" "compare_records .*nofp_callbacks\\.c:$hot\$" \
    "$label: the comparator's hottest line by addr2line (nofp_callbacks.c:$hot) is in cprof's profile"
}

# same_as NAME DIR LABEL ORIGINAL: the profiles' lines are those of
# ORIGINAL, the unstripped program, as addr2line -i gives them there; and
# some libc location has a line, from libc's file in the build-id tree.
same_as() {
  local name=$1 dir=$2 label=$3 original=$4
  as_addr2line "$name" "$dir" "$label" "$original"
  if [ -n "$libc_debug" ] && [ -f "$libc_debug" ]; then
    awk '/^Mappings/ {m = 1} m && / \/[^ ]*\/libc\.so\.6 / {sub(":", "", $1); id = $1}
      !m && / M=[0-9]+ / {loc[++n] = $0}
      END {for (i = 1; i <= n; i++) if (loc[i] ~ (" M=" id " ") && loc[i] ~ /:[1-9][0-9]* s=/) ok = 1; exit !ok}' \
      "$TMP/$name.cpu.raw" ||
      fail "$label: no libc location has a line (its debug file is in the build-id tree)"
    checks=$((checks + 1))
    echo "ok: $label: libc's lines from the build-id tree"
  fi
}

run a-plain "$TMP/a/prog" -u DEBUGINFOD_URLS
run a-urls "$TMP/a/prog" "$urls"
run b-urls "$TMP/b/prog" "$urls"
run c-urls "$TMP/c/prog" "$urls"
hot_line a-plain a "a/prog, DEBUGINFOD_URLS unset" "$orig"
hot_line a-urls a "a/prog, $urls" "$orig"
hot_line b-urls b "b/prog (no build ID, .debug/), $urls" "$nobid"
pprof -top -lines "$TMP/c-urls"/cpu-*.pb.gz >"$TMP/c-urls.top"
expect_match "$TMP/c-urls.top" ' compare_records( |$)' "c/prog: compare_records named by its symbol"
expect_no_match "$TMP/c-urls.top" 'nofp_callbacks\.c:' "c/prog: the other program's debug file refused"
same_as a-plain a "a/prog, DEBUGINFOD_URLS unset" "$orig"
same_as a-urls a "a/prog, $urls" "$orig"
same_as b-urls b "b/prog (no build ID, .debug/), $urls" "$nobid"

[ -s "$TMP/connections" ] &&
  fail "the debuginfod listener was connected to $(wc -l <"$TMP/connections") times"
[ -e "$TMP/cache" ] && fail "a debuginfod client cache was created"
checks=$((checks + 1))
echo "ok: no connection to DEBUGINFOD_URLS, no client cache"
if [ "$use_strace" = 1 ]; then
  for f in "$TMP"/*-*.strace; do
    if grep -q 'connect(' "$f"; then
      cat "$f" >&2
      fail "$(basename "$f"): connect() was called"
    fi
  done
  checks=$((checks + 1))
  echo "ok: strace -f saw no connect() in any run"
else
  echo "note: no strace (it cannot trace here, or this is a sanitizer build); the listener alone says no connection was made"
fi
finish
