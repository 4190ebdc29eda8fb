#!/usr/bin/env bash
# Heap sampling nothing can read is not done (docs/heap.md, "Sampling
# nobody reads"): a preloaded program whose dumps name no heap profile
# samples nothing (its rate reads 0), and every way of reading heap
# samples keeps the default rate: dumps of heap, allocs or heap_peak, an
# endpoint, a pusher, a rate set by --heap-rate or CPROF_HEAP_RATE, a
# program linked with cprof, a preloaded one without dumps. A preloaded
# program that asks for its heap profile itself (cprof_profilez) brings
# sampling back from then on: the profile it asks for next holds the
# 100 MB that kept_site allocated after the question. Writing its heap
# profile (cprof_profile_write_file) does the same, and a rate the program
# set stays as it set it.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
plain=$CPROFTEST_BUILD/test/progs/plain_heap_rate
linked=$CPROFTEST_BUILD/test/progs/linked_heap_rate
if tsan_build "$linked"; then
  # TSan's runtime must be the first library: cprof cannot be preloaded.
  skip_rest "a preloaded program needs a build without TSan"
fi

# A sanitizer runtime the programs were built with goes first.
rt=$(preload_env "$plain" | sed 's#[^ ]*libcprof\.so##')

# rate_under LABEL EXPECTED ARGS...: the rate the plain program prints
# under cprof run ARGS.
rate_under() {
  local label=$1 want=$2
  shift 2
  LD_PRELOAD="$rt" "$cprof" run "$@" --dump-out "$TMP/dump.log" -- "$plain" >"$TMP/rate.out" ||
    fail "$label: the program failed"
  expect_match "$TMP/rate.out" "^rate $want\$" "$label: the heap sampling rate is $want"
}

rate_under "--dump cpu" 0 --dump cpu
rate_under "--dump goroutine,threadcreate" 0 --dump goroutine,threadcreate
rate_under "--dump cpu,heap" 524288 --dump cpu,heap
rate_under "--dump allocs" 524288 --dump allocs
rate_under "--dump cpu,heap_peak" 524288 --dump cpu,heap_peak
rate_under "--dump cpu --heap-rate 4096" 4096 --dump cpu --heap-rate 4096
CPROF_HEAP_RATE=8192 rate_under "--dump cpu, CPROF_HEAP_RATE=8192" 8192 --dump cpu
rate_under "--dump cpu --http" 524288 --dump cpu --http 127.0.0.1:0
# A pusher that reaches nothing is still configured.
CPROF_PUSH_URL=http://127.0.0.1:1 rate_under "--dump cpu, CPROF_PUSH_URL" 524288 --dump cpu
# Preloaded without dumps: the program may look cprof up and write its own
# profiles (as test/progs/heap_live.c does).
LD_PRELOAD=$(preload_env "$plain") "$plain" >"$TMP/nodump.out"
expect_match "$TMP/nodump.out" '^rate 524288$' "preloaded, no dumps: the default rate"
"$plain" >"$TMP/bare.out"
expect_match "$TMP/bare.out" '^rate none$' "without cprof the program finds no rate"

# Linked, not preloaded: the program may ask for any profile at any time.
CPROF_DUMP=cpu CPROF_DUMP_OUT="$TMP/linked.log" "$linked" >"$TMP/linked.out" ||
  fail "the linked program failed"
expect_match "$TMP/linked.out" '^rate 524288$' "linked, CPROF_DUMP=cpu: the default rate"

# Asked by the program itself: sampling from then on.
LD_PRELOAD="$rt" "$cprof" run --dump cpu --dump-out "$TMP/dump.log" -- "$plain" ask \
  "$TMP/heap.txt" >"$TMP/ask.out" || fail "the asking program failed"
head -1 "$TMP/ask.out" >"$TMP/ask.first"
tail -1 "$TMP/ask.out" >"$TMP/ask.last"
expect_match "$TMP/ask.first" '^rate 0$' "--dump cpu: off before the program asks"
expect_match "$TMP/ask.last" '^rate 524288$' "--dump cpu: the default rate once it asked for heap"
# Asked through cprof_profile_write_file: the same.
LD_PRELOAD="$rt" "$cprof" run --dump cpu --dump-out "$TMP/dump.log" -- "$plain" write \
  "$TMP/heap.written" >"$TMP/write.out" || fail "the writing program failed"
tail -1 "$TMP/write.out" >"$TMP/write.last"
expect_match "$TMP/write.last" '^rate 524288$' "--dump cpu: the default rate once it wrote its heap profile"
# A rate the program set stays: asking for heap does not put the default
# back.
LD_PRELOAD="$rt" "$cprof" run --dump cpu --dump-out "$TMP/dump.log" -- "$plain" setrate \
  "$TMP/heap.set" >"$TMP/set.out" || fail "the program that sets a rate failed"
tail -1 "$TMP/set.out" >"$TMP/set.last"
expect_match "$TMP/set.last" '^rate 65536$' "--dump cpu: the rate the program set stays after it asked for heap"
if sanitized_build "$plain"; then
  # The sanitizer's own allocator serves the preloaded program's malloc.
  skip_rest "a heap profile of a preloaded program needs the plain build"
fi
# Go's text: each record "N: BYTES [...] @ pcs", then its frames. 1000
# blocks of 100 KB at the default rate give about 177 samples (each is
# taken with probability 1 - exp(-102400/524288), a standard deviation of
# about 12): at least 100 is over 6 standard deviations of margin.
samples=$(awk '/^[0-9]+: [0-9]+ \[/ {n = $1 + 0} /kept_site/ {s += n; n = 0} END {print s + 0}' "$TMP/heap.txt")
echo "kept_site samples: $samples"
[ "$samples" -ge 100 ] ||
  { cat "$TMP/heap.txt" >&2; fail "the heap profile asked for after sampling came back holds $samples samples of kept_site (want at least 100)"; }
checks=$((checks + 1))
finish
