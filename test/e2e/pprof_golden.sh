#!/usr/bin/env bash
# Writes a profile that sets every profile.proto field (test/progs/
# golden_profile.c) and reads it back with `go tool pprof`, checking that
# each value arrives intact. The expected lines are pprof's own formatting
# of the values golden_profile.c writes; pprof renumbers locations in the
# order samples first reach them, which is why the ids below differ from the
# program's. Go 1.19's pprof predates doc_url, so that one is checked in the
# decompressed bytes instead.
set -euo pipefail

: "${CPROFTEST_BUILD:?set CPROFTEST_BUILD to the build directory}"
: "${CPROFTEST_TMP:?set CPROFTEST_TMP to a scratch directory}"

mkdir -p "$CPROFTEST_TMP"
work=$(mktemp -d "$CPROFTEST_TMP/pprof_golden.XXXXXX")
trap 'rm -rf "$work"' EXIT

# pprof keeps state under $HOME/pprof and reads PPROF_TMPDIR; keep both in
# the scratch directory, and pin the time zone the Time lines are shown in.
export HOME="$work" PPROF_TMPDIR="$work" TZ=UTC

# go lifts the soft address-space limit of make test-matrix's ulimit-v row
# for itself, as test/e2e/lib.bash's does: the limit is for the program
# under test.
go() { (ulimit -S -v "$(ulimit -H -v)" 2>/dev/null; command go "$@"); }

if ! command -v go >/dev/null 2>&1; then
  echo "pprof_golden: go is not installed; it provides go tool pprof" >&2
  exit 1
fi

prof="$work/golden.pb.gz"
"$CPROFTEST_BUILD/test/progs/golden_profile" "$prof"

raw=$(go tool pprof -raw "$prof" 2>&1) || {
  echo "go tool pprof -raw failed:" >&2
  echo "$raw" >&2
  exit 1
}
top=$(go tool pprof -top "$prof" 2>&1) || {
  echo "go tool pprof -top failed:" >&2
  echo "$top" >&2
  exit 1
}

failures=0
checks=0

# expect NAME OUTPUT LINE: LINE must be a whole line of OUTPUT.
expect() {
  local name=$1 output=$2 line=$3
  checks=$((checks + 1))
  if grep -qxF -- "$line" <<<"$output"; then
    echo "ok   $name: $line"
  else
    echo "FAIL $name: missing line: '$line'" >&2
    failures=$((failures + 1))
  fi
}

# Scalars and sample types; [dflt] marks default_sample_type.
expect raw "$raw" "Comment: golden comment one"
expect raw "$raw" "Comment: golden comment two"
expect raw "$raw" "PeriodType: cpu nanoseconds"
expect raw "$raw" "Period: 10000000"
expect raw "$raw" "Time: 2023-11-14 22:13:20 +0000 UTC"
expect raw "$raw" "Duration: 2.5s"
expect raw "$raw" "samples/count cpu/nanoseconds[dflt]"

# Samples: values, location ids (leaf first) and labels. Sample 4's
# drop_me frame is gone (drop_frames) while sample 5's drop_but_keep frame
# stays (keep_frames).
expect raw "$raw" "          3   30000000: 1 2 "
expect raw "$raw" "                thread:[worker]"
expect raw "$raw" "                size:[4096 bytes]"
expect raw "$raw" "          5   50000000: 3 1 2 "
expect raw "$raw" "                thread:[main]"
expect raw "$raw" "                wait:[1500 nanoseconds]"
expect raw "$raw" "          1   10000000: 2 "
expect raw "$raw" "                count:[7]"
expect raw "$raw" "          2   20000000: 2 "
expect raw "$raw" "          4   40000000: 5 2 "

# Locations, including the inlined pair (callee first) and a folded one.
expect raw "$raw" "     1: 0x401100 M=1 inlined_helper /src/helper.h:33 s=30"
expect raw "$raw" "             foo::bar() /src/foo.cc:25 s=20(_ZN3foo3barEv)"
expect raw "$raw" "     2: 0x401000 M=1 main /src/main.c:15 s=10"
expect raw "$raw" "     3: 0x7f0000001234 M=2 lib_work /src/lib.c:44 s=40"
expect raw "$raw" "     4: 0x401200 M=1 drop_me /src/main.c:55 s=50"
expect raw "$raw" "     5: 0x401300 M=1 [F] drop_but_keep /src/main.c:66 s=60"

# Mappings with build ids and has_* flags.
expect raw "$raw" "1: 0x400000/0x500000/0x1000 /usr/bin/golden 0123456789abcdef0123456789abcdef01234567 [FN][FL][LN][IN]"
expect raw "$raw" "2: 0x7f0000000000/0x7f0000100000/0x2000 /usr/lib/libgolden.so cafef00d [FN]"

# The report view: default sample type, comments and function names.
expect top "$top" "Build ID: 0123456789abcdef0123456789abcdef01234567"
expect top "$top" "Type: cpu"
expect top "$top" "golden comment one"
expect top "$top" "Duration: 2.50s, Total samples = 150ms ( 6.00%)"
expect top "$top" "      50ms 33.33% 33.33%       50ms 33.33%  lib_work"
expect top "$top" "      40ms 26.67% 60.00%       40ms 26.67%  drop_but_keep"
expect top "$top" "      30ms 20.00% 80.00%       80ms 53.33%  inlined_helper (inline)"
expect top "$top" "      30ms 20.00%   100%      150ms   100%  main"
expect top "$top" "         0     0%   100%       80ms 53.33%  foo::bar()"

checks=$((checks + 1))
gzip -dc "$prof" >"$work/golden.pb"
if grep -qaF "https://example.com/cprof/golden" "$work/golden.pb"; then
  echo "ok   bytes: doc_url string present"
else
  echo "FAIL bytes: doc_url string missing" >&2
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
  echo "pprof_golden: $failures of $checks checks failed" >&2
  echo "--- go tool pprof -raw ---" >&2
  echo "$raw" >&2
  echo "--- go tool pprof -top ---" >&2
  echo "$top" >&2
  exit 1
fi
echo "pprof_golden: all $checks checks passed"
