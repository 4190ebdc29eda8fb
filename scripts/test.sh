#!/usr/bin/env bash
# The whole test suite, as `make test` runs it:
#   1. the normal build and every test (unit + end-to-end with go tool pprof);
#   2. the unit tests and the end-to-end tests of the library's own paths
#      under AddressSanitizer + UndefinedBehaviorSanitizer (not those
#      labelled plain_only in test/CMakeLists.txt: agreement with outside
#      tools, accuracy on a quiet machine);
#   3. the same under ThreadSanitizer (nor those labelled not_tsan);
#   4. a short run of every libFuzzer target over its seed corpus.
# With an argument, runs only those stages (build, asan, tsan, fuzz), or
# `check`: the normal build, the unit tests and the end-to-end tests whose
# names match the extended regex $AREA (all of them by default), as
# `make check` runs it, or `matrix`: those tests of the normal build in
# five hostile environments, as `make test-matrix` runs it (stage_matrix). The build directories are $BUILD (default build),
# $BUILD-asan, $BUILD-tsan and $BUILD-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
jobs=$(nproc)
fuzz_seconds=${FUZZ_SECONDS:-6}
passed=0
failed=0
skipped=0

flaky=()
# "build dir: test: reason" for each test that skipped all or part of its
# checks (test/e2e/lib.bash's skip_rest), listed at the end.
skips=()
# A command ctest runs under (taskset, a ulimit, a seccomp filter), and
# the name the lists at the end give the run instead of its directory.
ctest_wrap=()
ctest_label=

# Runs ctest in a build directory and adds its counts to the totals
# (only the stress test when STRESS_ONLY is set, as `make stress` does).
# A test that fails is run once more (TEST_ATTEMPTS=1: never): many check
# shares of samples and timings on a machine shared with the other tests,
# and one slow moment should not fail the suite. A test that needed its
# second run is still listed, with its first run's output above, at the
# end as flaky; one that fails twice fails the suite. A test that skipped
# (exit 77, ctest's "Skipped") counts as neither passed nor failed, and is
# listed at the end with the reason it gave, as is one that skipped part
# of its checks. Further arguments go to ctest (e.g. -R REGEX).
run_ctest() {
  local dir=$1 log filter=()
  shift
  [ -n "${STRESS_ONLY:-}" ] && filter=(-R e2e/stress)
  log=$(mktemp)
  rm -rf "$dir/test/tmp/skips"
  local label=${ctest_label:-$dir}
  if "${ctest_wrap[@]}" ctest --test-dir "$dir" --output-on-failure -j"$jobs" \
    --repeat until-pass:"${TEST_ATTEMPTS:-2}" "${filter[@]}" "$@" 2>&1 | tee "$log"; then :; fi
  local t
  while read -r t; do
    grep -Eq "^ *([0-9]+/[0-9]+ )?Test +#[0-9]+: $t \.+ +Passed" "$log" &&
      flaky+=("$label: $t")
  done < <(sed -nE 's/^ *([0-9]+\/[0-9]+ )?Test +#[0-9]+: ([^ ]+) \.+\*\*\*(Failed|Timeout|Exception).*/\2/p' "$log" | sort -u)
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1 || true)
  if [ -z "$line" ]; then
    rm -f "$log"
    echo "test: no ctest summary from $label" >&2
    failed=$((failed + 1))
    return
  fi
  local nfail total nskip
  nfail=$(sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
  nskip=$(sed -nE 's/^\s+[0-9]+ - ([^ ]+) \(Skipped\)$/\1/p' "$log" | sort -u | wc -l)
  rm -f "$log"
  passed=$((passed + total - nfail - nskip))
  failed=$((failed + nfail))
  skipped=$((skipped + nskip))
  local f reason
  for f in "$dir"/test/tmp/skips/*; do
    [ -f "$f" ] || continue
    while read -r reason; do
      skips+=("$label: e2e/$(basename "$f"): $reason")
    done < <(sort -u "$f")
  done
}

configure_build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
}

stage_build() {
  echo "== stage: build + tests"
  configure_build "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  run_ctest "$build"
}

stage_check() {
  echo "== stage: build + unit tests + e2e tests matching '${AREA:-.*}'"
  configure_build "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  run_ctest "$build" -R "^unit/|^e2e/.*(${AREA:-.*})"
}

# The normal build's tests (those stage_check runs) in hostile
# environments, each a full run with a row in a table at the end:
#   one-cpu   ctest and every test pinned to CPU 0 (taskset), one at a time;
#   cpu-hogs  a CPU hog on every CPU for the whole run;
#   no-perf   CPROF_PERF_EVENTS=0;
#   seccomp   everything under a seccomp filter that allows every call
#             (scripts/with_seccomp.py), as in a container: cprof does not
#             try perf events there either;
#   ulimit-v  address space limited to what go tool pprof, the tests'
#             reader, needs here (measured first, in 64 MiB steps) plus
#             the 96 MiB cprof may take at most with every feature on
#             (docs/heap.md#address-space): a soft limit, which the
#             programs under test inherit and the tests' own tools (go,
#             node, chromium) lift for themselves (test/e2e/lib.bash).
stage_matrix() {
  echo "== stage: matrix of hostile environments, tests matching '${AREA:-.*}'"
  configure_build "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  local regex="^unit/|^e2e/.*(${AREA:-.*})" rows=() row p0 f0 s0 n
  hogs=()
  matrix_row() {
    rows+=("$(printf '%-10s %6d %7d %6d' "$1" $((passed - p0)) $((skipped - s0)) $((failed - f0)))")
  }
  p0=$passed f0=$failed s0=$skipped
  echo "== matrix: one-cpu (taskset -c 0, one test at a time)"
  local saved_jobs=$jobs
  jobs=1 ctest_label=one-cpu ctest_wrap=(taskset -c 0)
  run_ctest "$build" -R "$regex"
  jobs=$saved_jobs
  matrix_row one-cpu

  p0=$passed f0=$failed s0=$skipped
  n=$(nproc)
  echo "== matrix: cpu-hogs ($n hogs)"
  trap 'kill "${hogs[@]}" 2>/dev/null || true' EXIT
  for _ in $(seq "$n"); do yes >/dev/null & hogs+=($!); done
  ctest_label=cpu-hogs ctest_wrap=()
  run_ctest "$build" -R "$regex"
  kill "${hogs[@]}" 2>/dev/null || true
  wait "${hogs[@]}" 2>/dev/null || true
  trap - EXIT
  matrix_row cpu-hogs

  p0=$passed f0=$failed s0=$skipped
  echo "== matrix: no-perf (CPROF_PERF_EVENTS=0)"
  ctest_label=no-perf ctest_wrap=(env CPROF_PERF_EVENTS=0)
  run_ctest "$build" -R "$regex"
  matrix_row no-perf

  p0=$passed f0=$failed s0=$skipped
  echo "== matrix: seccomp (an allow-all seccomp filter)"
  ctest_label=seccomp ctest_wrap=(python3 scripts/with_seccomp.py)
  run_ctest "$build" -R "$regex"
  matrix_row seccomp

  p0=$passed f0=$failed s0=$skipped
  local kib=65536 prof
  prof=$(mktemp --suffix=.pb.gz)
  "$build/test/progs/cpuburn" profile 100 >"$prof" 2>/dev/null || true
  while [ "$kib" -lt $((8 * 1024 * 1024)) ] &&
    ! (ulimit -v "$kib" && go tool pprof -top "$prof" >/dev/null 2>&1); do
    kib=$((kib + 65536))
  done
  rm -f "$prof"
  echo "== matrix: ulimit-v: go tool pprof runs under $((kib / 1024)) MiB; soft limit $(( (kib + 98304) / 1024 )) MiB for the programs under test (the tests' go, node and chromium lift it: test/e2e/lib.bash)"
  kib=$((kib + 98304))
  ctest_label="ulimit-v" ctest_wrap=(bash -c 'ulimit -S -v "$0" && exec "$@"' "$kib")
  run_ctest "$build" -R "$regex"
  matrix_row "ulimit-v"
  ctest_label= ctest_wrap=()

  echo
  echo "environment passed skipped failed"
  for row in "${rows[@]}"; do echo "$row"; done
}

stage_asan() {
  echo "== stage: ASan + UBSan"
  configure_build "$build-asan" -DCMAKE_BUILD_TYPE=Debug \
    -DCPROF_SANITIZE=address,undefined
  LSAN_OPTIONS=suppressions=$PWD/test/lsan.supp \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_ctest "$build-asan" \
    -LE plain_only
}

stage_tsan() {
  echo "== stage: TSan"
  configure_build "$build-tsan" -DCMAKE_BUILD_TYPE=Debug -DCPROF_SANITIZE=thread
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest "$build-tsan" \
    -LE 'plain_only|not_tsan'
}

# Runs one fuzz target over a copy of its seed corpus; its exit status and
# output are left in $2.rc and $2.log.
fuzz_one() {
  local f=$1 out=$2 name corpus work
  name=$(basename "$f")
  corpus="fuzz/corpus/${name#fuzz_}"
  work=$(mktemp -d)
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  local rc=0
  "$f" -max_total_time="$fuzz_seconds" -print_final_stats=0 "$work" \
    >"$out.log" 2>&1 || rc=$?
  echo "$rc" >"$out.rc"
  rm -rf "$work"
}

stage_fuzz() {
  echo "== stage: fuzz (${fuzz_seconds}s per target, $jobs at a time)"
  CC=clang CXX=clang++ configure_build "$build-fuzz" -DCMAKE_BUILD_TYPE=Debug \
    -DCPROF_FUZZ=ON -DCPROF_TESTS=OFF
  local results f name running=0
  results=$(mktemp -d)
  for f in "$build"-fuzz/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    fuzz_one "$f" "$results/$(basename "$f")" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
  done
  wait
  for f in "$build"-fuzz/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    # A target that links cprof's interposers puts them in front of the
    # sanitizer's (its allocations unchecked, its threads unseen by the
    # leak checker): each must pull in only the parsers it fuzzes.
    local front
    front=$(nm "$f" | awk '$2 == "T" && $3 ~ /^(malloc|free|calloc|pthread_create|pthread_mutex_lock|sigaction|_exit|_Exit|execve)$/ {print $3}' | tr '\n' ' ')
    if [ -n "$front" ]; then
      echo "fuzz: $name FAILED: it links cprof's interposers: $front"
      failed=$((failed + 1))
      continue
    fi
    if [ "$(cat "$results/$name.rc" 2>/dev/null)" = 0 ]; then
      echo "fuzz: $name ran ${fuzz_seconds}s without findings"
      passed=$((passed + 1))
    else
      echo "fuzz: $name FAILED"; tail -40 "$results/$name.log"
      failed=$((failed + 1))
    fi
  done
  rm -rf "$results"
}

stages=${1:-build asan tsan fuzz}
for s in $stages; do "stage_$s"; done
echo
for t in "${skips[@]}"; do echo "skip: $t"; done
for t in "${flaky[@]}"; do echo "flaky: $t failed once, passed when run again"; done
echo "all stages: $passed passed, $failed failed, $skipped skipped, ${#flaky[@]} passed on a second run"
[ "$failed" -eq 0 ]
