#!/usr/bin/env bash
# The peak heap profile (docs/labels.md): test/progs/heap_peak's live heap
# rises to 500 MB, falls to 50 MB and ends at 80 MB. heap shows about
# 80 MB; heap_peak about 500 MB, held by peak_site; after a reset the peak
# is the heap of that moment again. "About" is 15%: the estimate's
# standard error at 128 KiB sampling is about 2% (docs/labels.md). Then
# a second without allocations: the tracker thread does not wake (it went
# to sleep 22 times a second before it slept on samples); 20 MB more wake
# it, and the peak after them is about 100 MB. A dump of heap alone starts
# no tracker; profilez's first request for heap_peak does, and so does
# cprof_profile_write_file's.
source "$(dirname "$0")/lib.bash"
mkdir -p "$TMP/out"
"$CPROFTEST_BUILD/test/progs/heap_peak" "$TMP/out" || fail "heap_peak failed"


about_mb "heap at the end" "$(inuse_mb "$TMP/out/heap.pb.gz")" 80
about_mb "heap_peak" "$(inuse_mb "$TMP/out/heap_peak.pb.gz")" 500
about_mb "heap_peak after a reset" "$(inuse_mb "$TMP/out/heap_peak_reset.pb.gz")" 80
about_mb "heap_peak after 20 MB more" "$(inuse_mb "$TMP/out/heap_peak_burst.pb.gz")" 100
idle=$(awk '$1 == "idle" {print $2}' "$TMP/out/wakes.txt")
burst=$(awk '$1 == "burst" {print $2}' "$TMP/out/wakes.txt")
[ "$idle" -le 2 ] || fail "the tracker slept $idle times in a second without allocations (at most 2 expected)"
checks=$((checks + 1))
echo "ok: the tracker slept $idle times in an idle second"
[ "$burst" -ge 1 ] || fail "20 MB of allocations did not wake the tracker"
checks=$((checks + 1))
echo "ok: allocations woke the tracker ($burst sleeps after them)"
pprof -top -sample_index=inuse_space "$TMP/out/heap_peak.pb.gz" >"$TMP/top.txt"
expect_match "$TMP/top.txt" '^ *[0-9.]+MB +(100|9[0-9](\.[0-9]+)?)% .* peak_site$' "heap_peak: peak_site holds the peak"
"$CPROFTEST_BUILD/test/progs/heap_peak" "$TMP/out" profilez 2>"$TMP/dump.txt" ||
  fail "heap_peak profilez failed: $(head -3 "$TMP/dump.txt")"
expect_match "$TMP/out/profilez.txt" '^before none$' "a dump of heap alone starts no tracker"
expect_match "$TMP/out/profilez.txt" '^after running$' "profilez's first request for heap_peak starts it"
"$CPROFTEST_BUILD/test/progs/heap_peak" "$TMP/out" write 2>"$TMP/dump.txt" ||
  fail "heap_peak write failed: $(head -3 "$TMP/dump.txt")"
expect_match "$TMP/out/write.txt" '^before none$' "write: a dump of heap alone starts no tracker"
expect_match "$TMP/out/write.txt" '^after running$' "cprof_profile_write_file's first request for heap_peak starts it"
pprof -top -sample_index=inuse_space "$TMP/out/heap.pb.gz" >"$TMP/htop.txt"
expect_match "$TMP/htop.txt" ' end_site$' "heap: end_site is live at the end"
finish
