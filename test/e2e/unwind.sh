#!/usr/bin/env bash
# Whole stacks through code without frame pointers: programs built -O2
# without frame-pointer flags, run under `cprof run --dump cpu,heap`. Their
# CPU samples must reach main, a qsort or std::sort callback must keep its
# caller, and allocations through strdup, std::string, std::vector,
# std::map and exceptions must be charged to the calling function. With
# CPROF_UNWIND=fp the old frame-pointer walk is used, and it cannot.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
shares=$CPROFTEST_SRC/test/e2e/traces.py
progs=$CPROFTEST_BUILD/test/progs
rt=$(preload_env "$progs/nofp_callbacks" | sed 's#[^ ]*libcprof\.so##')
if tsan_build "$progs/nofp_callbacks"; then
  skip_rest "preloaded runs are covered by the plain and ASan builds"
fi

# run NAME PROG [ENV...]: profiles PROG for 1.5 CPU seconds; leaves the
# extracted files in $TMP/NAME.
run() {
  local name=$1 prog=$2
  shift 2
  env "$@" LD_PRELOAD="$rt" "$cprof" run --dump cpu,heap \
    --dump-out "$TMP/$name.log" -- "$prog" 1.5 >/dev/null
  "$cprof" extract -o "$TMP/$name" "$TMP/$name.log" >/dev/null
}

# share NAME PROFILE [pprof options] -- [traces.py arguments]: prints the
# second column of traces.py's first line. pprof's -traces output for a
# profile and options is read once and kept: each run of it takes about a
# second and a half, and the same profile is asked several questions.
share() {
  local name=$1 kind=$2
  shift 2
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  local traces="$TMP/$name/traces-$kind${opts[*]// /_}.txt"
  [ -f "$traces" ] || pprof -traces "${opts[@]}" "$TMP/$name"/"$kind"-*.pb.gz >"$traces"
  python3 "$shares" "$@" <"$traces" | awk 'NR == 1 {print $2}'
}

# at_least VALUE MIN WHAT
at_least() {
  awk -v v="$1" -v m="$2" 'BEGIN { exit !(v + 0 >= m + 0) }' ||
    fail "$3: $1% (at least $2% expected)"
  checks=$((checks + 1))
  echo "ok: $3: $1%"
}

run c "$progs/nofp_callbacks" CPROF_HEAP_RATE=65536
at_least "$(share c cpu -- main)" 95 "C: CPU samples reaching main"
at_least "$(share c cpu -- --given compare_records sort_records)" 95 \
  "C: samples in the qsort comparator that keep sort_records"
if sanitized_build "$progs/nofp_callbacks"; then
  # AddressSanitizer's strdup allocates from its own heap, never through
  # malloc: cprof does not see those bytes at all.
  echo "skip: strdup under AddressSanitizer"
else
  # strdup goes by its DWARF name (glibc's __GI___strdup) where libc's debug
  # information is installed, by its symbol (__strdup) where it is not.
  strdup=__strdup
  pprof -traces "$TMP"/c/heap-*.pb.gz >"$TMP/c-heap-traces"
  grep -q '__GI___strdup' "$TMP/c-heap-traces" && strdup=__GI___strdup
  at_least "$(share c heap -sample_index=alloc_space -- --given "$strdup" make_names)" 95 \
    "C: strdup's bytes charged to make_names"
fi

# Sampling every 64 KiB, so that even the small exception objects are
# sampled many times in a run.
run cxx "$progs/nofp_cxx" CPROF_HEAP_RATE=65536
at_least "$(share cxx cpu -- main)" 95 "C++: CPU samples reaching main"
at_least "$(share cxx cpu -- --given weigh sort_phase)" 90 \
  "C++: the std::sort comparator's samples that keep sort_phase"
if sanitized_build "$progs/nofp_cxx"; then
  # The sanitizers' operator new does not go through malloc.
  echo "skip: C++ allocations under a sanitizer"
else
  at_least "$(share cxx heap -sample_index=alloc_space -- main)" 95 \
    "C++: allocated bytes reaching main"
  for f in grow_strings grow_vector map_phase; do
    at_least "$(share cxx heap -sample_index=alloc_space -- "$f")" 0.1 \
      "C++: allocations charged to $f"
  done
  at_least "$(share cxx heap -sample_index=alloc_space -- --given _M_mutate "grow_strings|map_phase")" 95 \
    "C++: std::string growth charged to its callers"
  at_least "$(share cxx heap -sample_index=alloc_objects -- --given __cxa_allocate_exception throw_some)" 95 \
    "C++: exception objects charged to throw_some"
fi

# A program nobody here built: Debian's sqlite3 (and libsqlite3, built -O2
# without frame pointers) running a recursive query. Its samples reach
# __libc_start_call_main (main itself is not in its symbol tables) through
# sqlite3_step; in epilogues, the rows name save slots below the stack
# pointer, which once cut 2% of the samples to one frame.
if command -v sqlite3 >/dev/null; then
  LD_PRELOAD="$rt" CPROF_CPU_HZ=1000 "$cprof" run --dump cpu --dump-out "$TMP/sq.log" -- sqlite3 :memory: \
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<1500000) SELECT sum(x) FROM c;" >/dev/null
  "$cprof" extract -o "$TMP/sq" "$TMP/sq.log" >/dev/null
  at_least "$(share sq cpu -- __libc_start_call_main)" 99 "sqlite3: CPU samples reaching __libc_start_call_main"
  at_least "$(share sq cpu -- sqlite3_step)" 95 "sqlite3: CPU samples under sqlite3_step"
else
  echo "skip: sqlite3 is not installed"
fi

# No frame outside the loaded code: every location of both CPU profiles
# lies in a mapping (cprof's own synthetic frames aside).
for name in c cxx; do
  pprof -raw "$TMP/$name"/cpu-*.pb.gz >"$TMP/$name.raw"
  sed -n '/^Locations/,/^Mappings/p' "$TMP/$name.raw" |
    awk '/^ +[0-9]+: 0x/ && !/ M=[0-9]/ && !/\[cprof/' >"$TMP/$name.stray"
  stray=$(wc -l <"$TMP/$name.stray")
  [ "$stray" -eq 0 ] || {
    cat "$TMP/$name.stray"
    sed -n '/^Mappings/,$p' "$TMP/$name.raw"
    fail "$name: $stray locations outside any mapping"
  }
  checks=$((checks + 1))
  echo "ok: $name: every location lies in a mapping"
done

# The knob, through cprof run's option (which sets CPROF_UNWIND).
LD_PRELOAD="$rt" "$cprof" run --unwind fp --dump cpu --dump-out "$TMP/fp.log" -- \
  "$progs/nofp_callbacks" 1.5 >/dev/null
"$cprof" extract -o "$TMP/fp" "$TMP/fp.log" >/dev/null
fp_main=$(share fp cpu -- main)
awk -v v="$fp_main" 'BEGIN { exit !(v + 0 < 50) }' ||
  fail "CPROF_UNWIND=fp reached main in $fp_main% of samples: the knob had no effect"
checks=$((checks + 1))
echo "ok: CPROF_UNWIND=fp walks frame pointers only (main in $fp_main%)"

CPROF_UNWIND=sideways LD_PRELOAD="$rt" "$cprof" run -- /bin/true 2>"$TMP/bad.txt"
expect_match "$TMP/bad.txt" '^cprof: CPROF_UNWIND="sideways": not auto, fp or cfi; using auto$' \
  "a bad CPROF_UNWIND gives one line"
finish
