#!/usr/bin/env bash
# The dump spec's rate= parameter: CPROF_DUMP="mutex=rate=5,block=rate=1000,
# heap=rate=4096" switches the mutex profile to fraction 5, the block
# profile to 1000 ns and heap sampling to 4096 bytes when the library
# loads, read back through the public getters; and a heap dump's text
# header carries the rate it was sampled at.
source "$(dirname "$0")/lib.bash"
host=$CPROFTEST_BUILD/test/progs/dump_host

"$host" rates >"$TMP/default.txt" 2>"$TMP/default.err"
expect_match "$TMP/default.txt" '^mutex=0 block=0 heap=524288$' "without rates: mutex and block off, heap at its default"

CPROF_DUMP="mutex=rate=5,block=rate=1000,heap=rate=4096" "$host" rates >"$TMP/rates.txt" 2>"$TMP/rates.err"
expect_match "$TMP/rates.txt" '^mutex=5 block=1000 heap=4096$' "rate= sets the mutex fraction, the block rate and the heap rate"
expect_match "$TMP/rates.err" '^-----BEGIN PPROF MUTEX-----$' "the exit dump happened"

# The rate given to the dump is the one a heap profile is written with.
CPROF_DUMP="heap=debug=1:rate=8192" CPROF_DUMP_OUT="$TMP/heap.log" "$host" rates >"$TMP/heap.txt" 2>&1
expect_match "$TMP/heap.txt" 'heap=8192$' "heap=debug=1:rate=8192 sets the heap rate"
"$CPROFTEST_BUILD/cprof" extract -o "$TMP/x" "$TMP/heap.log" >/dev/null
expect_match "$(ls "$TMP"/x/heap-*.txt)" '^heap profile: .* @ heap/16384$' "the heap dump's header shows the rate (heap/2*rate, as Go writes it)"

# The rate wins over the environment variable of the same setting.
CPROF_MUTEX_FRACTION=9 CPROF_DUMP="mutex=rate=3" "$host" rates >"$TMP/both.txt" 2>/dev/null
expect_match "$TMP/both.txt" '^mutex=3 ' "the dump's rate wins over CPROF_MUTEX_FRACTION"
finish
