#!/usr/bin/env bash
# A loaded object whose unwind data lies past the end of its file (a
# hostile ELF, or a plugin truncated in place and then dlopened) must cost
# its own frames only: cprof copies an object's .eh_frame_hdr and
# .eh_frame out of memory with process_vm_readv before parsing them, so
# the pages the loader mapped past the file's end (which raise SIGBUS when
# read) are refused, not read. A copy of libimgtail.so, whose unwind data
# is the last segment of its file (test/progs/imgtail.ld), is truncated
# where that segment starts, as readelf -l gives it; plain_images_dlopen
# dlopens it, starts a thread (cprof builds its unwind tables then) that
# burns CPU in the library, and burns CPU in main. It must exit 0 with
# cprof preloaded (before: 135, SIGBUS) as without, and its exit dump's
# CPU profile must read in go tool pprof and name main's function.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
prog=$CPROFTEST_BUILD/test/progs/plain_images_dlopen
lib=$CPROFTEST_BUILD/test/progs/libimgtail.so
if tsan_build "$prog"; then
  skip_rest "preloaded runs are covered by the plain and ASan builds"
fi

# Where the file is cut: the start of the PT_LOAD segment holding
# PT_GNU_EH_FRAME, which must be page-aligned in the file and come after
# every other segment's file bytes (so the loader reads nothing cut off).
readelf -lW "$lib" >"$TMP/phdrs"
eh=$(awk '$1 == "GNU_EH_FRAME" {print $2}' "$TMP/phdrs")
cut="" seg_end="" others_end=0
if [ -n "$eh" ]; then
  while read -r off fsz; do
    if ((eh >= off && eh < off + fsz)); then
      cut=$((off)) seg_end=$((off + fsz))
    fi
  done < <(awk '$1 == "LOAD" {print $2, $5}' "$TMP/phdrs")
  while read -r off fsz; do
    ((off != cut && off + fsz > others_end)) && others_end=$((off + fsz))
  done < <(awk '$1 == "LOAD" {print $2, $5}' "$TMP/phdrs")
fi
echo "libimgtail.so: unwind segment at file offset ${cut:-?}..${seg_end:-?}, other segments end at ${others_end:-?}"
if [ -z "$cut" ] || [ $((cut % 4096)) -ne 0 ] || [ "$others_end" -gt "$cut" ]; then
  cat "$TMP/phdrs"
  skip_rest "the linker did not put the unwind data in a last segment of its own (test/progs/imgtail.ld)"
fi
mkdir -p "$TMP/lib"
cp "$lib" "$TMP/lib/libimgtail.so"
truncate -s "$cut" "$TMP/lib/libimgtail.so"
size=$(stat -c %s "$TMP/lib/libimgtail.so")
[ "$size" -eq "$cut" ] || fail "truncate left $size bytes, not $cut"
readelf -SW "$lib" | awk '$2 ~ /^\.eh_frame/ {print $2, $5}' | while read -r name off; do
  if ((0x$off >= cut)); then echo "$name at file offset 0x$off (cut off)"; else echo "$name at file offset 0x$off (kept)"; fi
done >"$TMP/cutoff"
cat "$TMP/cutoff"
expect_match "$TMP/cutoff" '^\.eh_frame_hdr .*\(cut off\)' "the copy is cut at $cut bytes: .eh_frame_hdr lies past its end"

status=0
"$prog" "$TMP/lib/libimgtail.so" >"$TMP/bare.out" 2>&1 || status=$?
[ "$status" -eq 0 ] || { cat "$TMP/bare.out"; fail "without cprof: exit status $status (the cut is not where the loader leaves it alone)"; }
checks=$((checks + 1))
echo "ok: without cprof: dlopen of the truncated copy works, exit status 0"

status=0
timeout -s KILL 60 env LD_PRELOAD="$(preload_env "$prog")" CPROF_DUMP=cpu CPROF_DUMP_OUT="$TMP/dump.log" \
  "$prog" "$TMP/lib/libimgtail.so" >"$TMP/cprof.out" 2>&1 || status=$?
[ "$status" -eq 0 ] || { cat "$TMP/cprof.out"; fail "with cprof: exit status $status (135: SIGBUS)"; }
checks=$((checks + 1))
echo "ok: with cprof: exit status 0"

"$cprof" extract -o "$TMP/x" "$TMP/dump.log" >"$TMP/extract" 2>&1 || { cat "$TMP/extract"; fail "extract failed"; }
pb=$(ls "$TMP/x"/cpu-*.pb.gz 2>/dev/null | head -1)
[ -n "$pb" ] || fail "no CPU profile in the exit dump"
pprof -top -symbolize=none "$pb" >"$TMP/top" || { cat "$TMP/top"; fail "go tool pprof cannot read the profile"; }
expect_match "$TMP/top" ' images_main_burn$' "the CPU profile reads in go tool pprof and names images_main_burn"
pprof -raw -symbolize=none "$pb" >"$TMP/raw"
grep -c 'libimgtail' "$TMP/raw" >"$TMP/libframes" || true
echo "the truncated library's frames in the profile: $(cat "$TMP/libframes") lines naming it"
finish
