#!/usr/bin/env bash
# A dump starts only what the profiles it names need (docs/labels.md): with
# --dump cpu,heap no heap_peak tracker thread (cprof-heappeak) runs; with
# --dump heap,heap_peak it runs from the program's start, and the dumped
# heap_peak holds the 500 MB peak of test/progs/plain_heap_peak, held by
# peak_site, while heap holds the 80 MB left at its end. "About" is 15%:
# at --heap-rate 65536 a block of 256 KiB is sampled with probability
# 0.98, so the estimates are within about 1%.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
prog=$CPROFTEST_BUILD/test/progs/plain_heap_peak
if sanitized_build "$prog"; then
  # The sanitizer's own allocator serves the preloaded program's malloc:
  # its heap profile would have no sample.
  skip_rest "a heap profile of a preloaded program needs the plain build"
fi

"$cprof" run --dump cpu,heap --dump-out "$TMP/a.log" -- "$prog" \
  >"$TMP/a.threads" ||
  fail "the program failed under --dump cpu,heap"
expect_match "$TMP/a.threads" '^cprof-dump$' "--dump cpu,heap: the program lists cprof's dump thread"
expect_no_match "$TMP/a.threads" '^cprof-heappeak$' "--dump cpu,heap: no heap_peak tracker runs"
"$cprof" extract -o "$TMP/a" "$TMP/a.log" >/dev/null
ls "$TMP/a"/heap-*.pb.gz >/dev/null || fail "--dump cpu,heap: no heap profile ($(ls "$TMP/a"))"

"$cprof" run --heap-rate 65536 --dump heap,heap_peak --dump-out "$TMP/b.log" \
  -- "$prog" >"$TMP/b.threads" ||
  fail "the program failed under --dump heap,heap_peak"
expect_match "$TMP/b.threads" '^cprof-heappeak$' "--dump heap,heap_peak: the tracker runs"
"$cprof" extract -o "$TMP/b" "$TMP/b.log" >/dev/null

about_mb "heap at the end" "$(inuse_mb "$TMP/b"/heap-*.pb.gz)" 80
about_mb "heap_peak" "$(inuse_mb "$TMP/b"/heap_peak-*.pb.gz)" 500
pprof -top -sample_index=inuse_space "$TMP/b"/heap_peak-*.pb.gz >"$TMP/top.txt"
expect_match "$TMP/top.txt" '^ *[0-9.]+MB +(100|9[0-9](\.[0-9]+)?)% .* peak_site$' "heap_peak: peak_site holds the peak"
finish
