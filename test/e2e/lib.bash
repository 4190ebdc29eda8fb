# Shared helpers for the end-to-end tests (sourced, not run on its own).
# CPROFTEST_BUILD, CPROFTEST_SRC and CPROFTEST_TMP come from ctest.
set -euo pipefail
: "${CPROFTEST_BUILD:?}" "${CPROFTEST_TMP:?}"
mkdir -p "$CPROFTEST_TMP"
TMP=$(mktemp -d "$CPROFTEST_TMP/$(basename "$0" .sh).XXXXXX")
export PPROF_TMPDIR="$TMP/pprof"
export HOME="${HOME:-$TMP}"
mkdir -p "$PPROF_TMPDIR"
# Background processes a test starts are killed when it ends, however it
# ends: track PID registers one. Its scratch directory goes too, unless
# CPROFTEST_KEEP_TMP is set (to read a failed run's files afterwards).
tracked=()
track() { tracked+=("$1"); }
# A tracked process's children go too: a program started through a shell
# function in the background (unlimited, below) runs in a subshell of the
# process $! names.
trap 'for p in "${tracked[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; [ -n "${CPROFTEST_KEEP_TMP:-}" ] || rm -rf "$TMP"' EXIT
checks=0

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# expect_match FILE REGEX DESCRIPTION: FILE must have a line matching the
# extended regex; on failure the file is shown.
expect_match() {
  if grep -Eq -- "$2" "$1"; then
    checks=$((checks + 1))
    echo "ok: $3"
  else
    echo "---- $1" >&2
    cat "$1" >&2
    fail "$3 (no line matches /$2/)"
  fi
}

expect_no_match() {
  if grep -Eq -- "$2" "$1"; then
    echo "---- $1" >&2
    cat "$1" >&2
    fail "$3 (a line matches /$2/)"
  fi
  checks=$((checks + 1))
  echo "ok: $3"
}

# The address-space limit of `make test-matrix`'s ulimit-v row is a soft
# one, meant for the programs under test: the reference tools lift it for
# themselves (to the hard limit, unlimited there), so that the row says
# what the limit does to cprof, not to go, node or chromium.
# unlimited CMD ARGS...: runs a tool (the Go reference server, a browser
# under timeout) with the soft limit lifted.
unlimited() { (ulimit -S -v "$(ulimit -H -v)" 2>/dev/null; exec "$@"); }
go() { unlimited go "$@"; }
node() { unlimited node "$@"; }
chromium() { unlimited chromium "$@"; }

# free_port: a TCP port free on loopback now.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# stat_cpu_ms PID: the CPU time (utime + stime), in ms, of the process's
# main thread, from /proc/PID/task/PID/stat: the program's own work in
# the single-threaded workers the tests profile. The process's total
# would count cprof's own threads too (a member of a process tree
# encodes and symbolizes the profiles it is asked for, 100 ms and more in
# its first seconds), which no CPU profile holds.
stat_cpu_ms() {
  awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%d", ($12 + $13) * 1000 / t }' "/proc/$1/task/$1/stat"
}

# tree_wait URL PID...: waits (at most 10 s) until the process tree behind
# URL (its /debug/pprof base) lists every PID as a member; leaves the
# listing in $TMP/processes and prints it.
tree_wait() {
  local url=$1 p all
  shift
  for _ in $(seq 100); do
    all=1
    curl -sf "$url/processes" >"$TMP/processes" 2>/dev/null || all=0
    for p in "$@"; do grep -q "^$p	" "$TMP/processes" || all=0; done
    [ "$all" = 1 ] && break
    sleep 0.1
  done
  cat "$TMP/processes"
}

# pid_share PROFILE PID: the share (%) of PROFILE's samples labelled
# pid=PID (a process tree's profile, docs/processes.md).
# workers_hold FILE WHAT PID...: the pids' shares of FILE's samples (label
# pid) add up to at least 90%.
workers_hold() {
  local file=$1 what=$2 p s sum=0 shares=()
  shift 2
  for p in "$@"; do
    s=$(pid_share "$file" "$p")
    shares+=("${s:-0}%")
    sum=$(awk -v a="$sum" -v b="${s:-0}" 'BEGIN { print a + b }')
  done
  echo "$what: the workers' shares of the samples: ${shares[*]}"
  awk -v s="$sum" 'BEGIN { exit !(s >= 90) }' ||
    fail "$what: the workers hold ${shares[*]} of the samples, want at least 90% together"
  checks=$((checks + 1))
}
# tree_prepare PROG: skips the test in the TSan build, where a process
# tree cannot run: preloading is not possible (see tsan_build), and linked
# instead, a fork child would start cprof's agent thread, which TSan does
# not support after a multi-threaded fork (with die_after_fork=0 it aborts:
# "dup thread with used id").
tree_prepare() {
  if tsan_build "$1"; then
    skip_rest "preloaded runs (the TSan build cannot preload, see lib.bash), and TSan cannot run a fork child's threads"
  fi
}
pid_share() {
  pprof -top -tagfocus="pid=$2" "$1" 2>/dev/null |
    sed -nE 's/^Showing nodes accounting for [^,]+, ([0-9.]+)% of .* total$/\1/p'
}

# start_receiver DIR MODE: starts pyroscope_receiver.py (a loopback
# Pyroscope ingest, tracked) saving into DIR in MODE; sets rpid and rport.
start_receiver() {
  mkdir -p "$1"
  python3 "$(dirname "${BASH_SOURCE[0]}")/pyroscope_receiver.py" "$1" "$2" >"$1/port" &
  rpid=$!
  track $rpid
  for _ in $(seq 100); do [ -s "$1/port" ] && break; sleep 0.05; done
  rport=$(head -1 "$1/port")
  [ -n "$rport" ] || fail "the receiver did not start"
}

# push_uploads DIR PID cpu|heap: what the receiver in DIR saved for the
# series of process PID (its label pid=PID): the CPU windows (they carry a
# sampleRate) or the others; a line "FILE FROM UNTIL" each.
push_uploads() {
  awk -F'\t' -v d="$1" -v p="pid=$2," -v k="$3" \
    'index($2, p) && ((k == "cpu") == ($6 != "-")) { print d "/" $1 ".pb.gz", $3, $4 }' "$1/index.tsv"
}

# push_tree_check DIR ROOT PID FUNC: the receiver in DIR got a series of
# its own for process PID, a member of ROOT's tree: at least two CPU
# windows, each with the same from..until as one of ROOT's own series,
# that together hold FUNC, and at least one heap snapshot.
push_tree_check() {
  local dir=$1 root=$2 pid=$3 fn=$4 n aligned
  push_uploads "$dir" "$pid" cpu >"$TMP/push.$pid"
  push_uploads "$dir" "$root" cpu >"$TMP/push.root"
  n=$(grep -c . "$TMP/push.$pid" || true)
  aligned=$(awk 'NR == FNR { w[$2 " " $3] = 1; next } ($2 " " $3) in w' "$TMP/push.root" "$TMP/push.$pid" | grep -c . || true)
  echo "pushed for pid $pid: $n CPU windows ($aligned aligned with the root's), $(push_uploads "$dir" "$pid" heap | grep -c .) heap snapshots"
  [ "$n" -ge 2 ] || { cat "$dir/index.tsv"; fail "pid $pid: $n CPU windows pushed, want at least 2"; }
  [ "$aligned" = "$n" ] || fail "pid $pid: $((n - aligned)) of its $n CPU windows have no window of the root's with the same from..until"
  # shellcheck disable=SC2046
  pprof -top $(awk '{ print $1 }' "$TMP/push.$pid") >"$TMP/push.$pid.top"
  expect_match "$TMP/push.$pid.top" " $fn( \\(inline\\))?\$" "pid $pid's pushed CPU windows hold $fn"
  [ -n "$(push_uploads "$dir" "$pid" heap)" ] || fail "pid $pid: no heap snapshot pushed"
  checks=$((checks + 1))
  echo "ok: pid $pid is pushed as a series of its own, its windows aligned with the root's"
}

# pprof ARGS...: the reference reader, with its output captured in the
# caller's redirection; stderr goes along so errors show up in checks.
pprof() {
  go tool pprof "$@" 2>&1
}

# inuse_mb FILE: a heap profile's inuse_space in MiB, summed over its
# samples (go tool pprof -raw).
inuse_mb() {
  pprof -raw -sample_index=inuse_space "$1" | awk '
    /^Samples:/ {on = 1; getline; next} /^Locations/ {on = 0}
    on && /^ *[0-9]+( +[0-9]+)*: / {split($0, f, ":"); split(f[1], v, " "); s += v[4]}
    END {printf "%.0f\n", s / 1048576}'
}

# about_mb WHAT GOT WANT: GOT MiB within 15% of WANT, or the test fails.
about_mb() {
  local what=$1 got=$2 want=$3
  awk -v g="$got" -v w="$want" 'BEGIN {exit !(g > 0.85 * w && g < 1.15 * w)}' ||
    fail "$what: $got MiB, expected about $want MiB"
  checks=$((checks + 1))
  echo "ok: $what: $got MiB (expected about $want)"
}

# preload_env PROG: the LD_PRELOAD value that loads libcprof.so into PROG,
# keeping a sanitizer runtime first when PROG was built with one.
preload_env() {
  local rt
  rt=$(ldd "$1" | awk '/lib(a|ub|t)san/ {print $3}' | tr '\n' ' ')
  echo "${rt}$CPROFTEST_BUILD/libcprof.so"
}

# start_server NAME ARGS...: runs test/progs/http_server in the
# background (tracked) and sets PORT (0 for a unix socket) and PID; its
# stderr goes to $TMP/NAME.log.
start_server() {
  local name=$1
  shift
  "$CPROFTEST_BUILD/test/progs/http_server" "$@" >"$TMP/$name.port" 2>"$TMP/$name.log" &
  PID=$!
  track "$PID"
  for _ in $(seq 100); do
    [ -s "$TMP/$name.port" ] && break
    sleep 0.05
  done
  PORT=$(head -1 "$TMP/$name.port")
  [ -n "$PORT" ] || { cat "$TMP/$name.log"; fail "$name did not start"; }
}

# rss_kb PID: the process's resident set (VmRSS) in KiB.
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# stop_server PID NAME: SIGTERM, the program stops the server and exits 0
# (under ASan, also without a leak report).
stop_server() {
  kill -TERM "$1"
  wait "$1" || { cat "$TMP/$2.log"; fail "$2 did not stop cleanly"; }
  checks=$((checks + 1))
  echo "ok: $2 stopped cleanly"
}

# True when PROG was built with ThreadSanitizer. TSan's pthread_create
# interceptor must run before any instrumented code on a new thread; with
# cprof preloaded after libtsan, cprof's thread trampoline would run first,
# so preloaded runs are skipped in the TSan build (linked runs cover it).
tsan_build() {
  [[ $(ldd "$1") == *libtsan* ]]
}

# True when PROG was built with any sanitizer. (Not "ldd | grep -q": with
# pipefail, grep's early exit makes the pipeline fail when it matches.)
sanitized_build() {
  [[ $(ldd "$1") == *lib[at]san* ]]
}

# browser_missing: why the page tests cannot drive a browser here, or
# nothing when they can: chromium or node is not installed, or the address
# space is limited (ulimit -v) below what V8, which reserves gigabytes at
# start, needs.
browser_missing() {
  if ! command -v chromium >/dev/null || ! command -v node >/dev/null; then
    echo "chromium or node is not installed"
  elif [ "$(ulimit -v)" != unlimited ] &&
    ! { node -e 0 && unlimited timeout 60 chromium --headless --no-sandbox --dump-dom about:blank; } >/dev/null 2>&1; then
    echo "node or chromium cannot start under ulimit -v $(ulimit -v) KiB"
  fi
}

# skip_rest REASON: ends the test early, saying why. With no check run
# yet the whole test is skipped: exit 77, which ctest reports as skipped
# (SKIP_RETURN_CODE); after some checks, it passed those. Either way the
# reason is also left in $CPROFTEST_TMP/skips/NAME ("skipped: REASON" or
# "skipped in part: REASON"), for the suite's summary to name it: ctest
# shows no output of a skipped test.
skip_rest() {
  local name kind=skipped
  name=$(basename "$0" .sh)
  [ "$checks" -gt 0 ] && kind="skipped in part"
  echo "skip: $*"
  mkdir -p "$CPROFTEST_TMP/skips"
  echo "$kind: $*" >>"$CPROFTEST_TMP/skips/$name"
  if [ "$checks" -eq 0 ]; then
    echo "$(basename "$0"): skipped, no check run"
    exit 77
  fi
  finish
  exit 0
}

# skip_check REASON: leaves out one check that does not apply here and
# goes on, saying why; the suite's summary names it as a test skipped in
# part.
skip_check() {
  local name
  name=$(basename "$0" .sh)
  echo "skip: $*"
  mkdir -p "$CPROFTEST_TMP/skips"
  echo "skipped in part: $*" >>"$CPROFTEST_TMP/skips/$name"
}

# split_debug ORIGINAL DIR: DIR/prog, ORIGINAL without its DWARF and with
# a .gnu_debuglink to DIR/prog.debug, which holds the DWARF compressed
# (zlib), as distributions ship debug files.
split_debug() {
  mkdir -p "$2"
  objcopy --only-keep-debug --compress-debug-sections=zlib "$1" "$2/prog.debug"
  objcopy --strip-debug --add-gnu-debuglink="$2/prog.debug" "$1" "$2/prog"
}

# wreck_debug_info FILE: zeroes FILE's .debug_info after its compression
# header, in place (its size and inode kept), so that it names no line.
wreck_debug_info() {
  local off size
  read -r off size < <(readelf -SW "$1" 2>/dev/null |
    sed -n 's/.* \.debug_info  *PROGBITS  *[0-9a-f]* \([0-9a-f]*\) \([0-9a-f]*\) .*/\1 \2/p')
  [ -n "$off" ] || fail "cannot find .debug_info in $1"
  off=$((16#$off)) size=$((16#$size))
  [ "$size" -gt 64 ] || fail ".debug_info of $1 is $size bytes"
  dd if=/dev/zero of="$1" bs=1 seek=$((off + 24)) count=$((size - 24)) conv=notrunc status=none
}

# as_addr2line NAME DIR LABEL ORIGINAL: every location of $TMP/NAME.cpu.raw
# and $TMP/NAME.heap.raw (go tool pprof -raw -symbolize=none output of a
# copy of ORIGINAL at $TMP/DIR/prog) is what addr2line -i gives for
# ORIGINAL, the unstripped program (test/e2e/addr2line_check.py).
as_addr2line() {
  local name=$1 dir=$2 label=$3 original=$4
  sed "s#$TMP/$dir/prog#$original#" "$TMP/$name.cpu.raw" >"$TMP/$name.orig.raw"
  sed "s#$TMP/$dir/prog#$original#" "$TMP/$name.heap.raw" >"$TMP/$name.orig-heap.raw"
  python3 "$CPROFTEST_SRC/test/e2e/addr2line_check.py" "$TMP/$name.orig.raw" \
    "$TMP/$name.orig-heap.raw" >"$TMP/$name.check" ||
    { cat "$TMP/$name.check" >&2; fail "$label: locations differ from addr2line on the unstripped program"; }
  checks=$((checks + 1))
  echo "ok: $label: as addr2line -i on the unstripped program ($(tail -1 "$TMP/$name.check"))"
}


# Ends the test: it fails when it ran no check at all (a test that checks
# nothing would pass on any machine).
finish() {
  [ "$checks" -gt 0 ] || fail "$(basename "$0") ran no check"
  echo "$(basename "$0"): $checks checks passed"
}
