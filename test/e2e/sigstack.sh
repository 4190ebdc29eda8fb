#!/usr/bin/env bash
# cprof's signal handlers on stacks they did not expect: SIGPROF landing on
# a small alternate signal stack the program's own handler runs on, and on
# a thread stack exhausted by an overflow the program recovers from. The
# handler takes a sample only with room for it (CPROF__HANDLER_STACK) and
# otherwise counts it lost; it must never write below the alternate stack
# nor crash the recovery. Without the check, the 4 KiB case wrote 1,672
# bytes below the alternate stack and 1 overflow run in 3 died of SIGSEGV.
source "$(dirname "$0")/lib.bash"
prog=$CPROF_BUILD/test/progs/sigstack
if sanitized_build "$prog"; then
  # The sanitizers' own signal handling and larger frames change what fits
  # on a small alternate stack; the plain build measures cprof's own use.
  skip_rest "stack use is measured in the plain build"
fi
for size in 4096 6144 8192; do
  "$prog" altstack "$size" >"$TMP/alt$size.txt" 2>&1 ||
    { cat "$TMP/alt$size.txt"; fail "altstack $size: the program was hurt"; }
  expect_match "$TMP/alt$size.txt" '^altstack use: [0-9]+ bytes without the profile, [0-9]+ with it$' \
    "a $size-byte alternate stack under SIGPROF at 1000 Hz: nothing below it written"
done
# What cprof's handler itself took on the largest alternate stack, beyond the
# kernel's frame: within its declared need (CPROF__HANDLER_STACK, 4 KiB).
use=$(awk '/^handler use:/ {print $3}' "$TMP/alt8192.txt")
if [ -n "$use" ]; then
  [ "$use" -le 4096 ] || fail "the handler took $use bytes of stack (over 4096)"
  checks=$((checks + 1))
  echo "ok: the handler took $use bytes of stack beyond the kernel's frame"
fi
for round in 1 2 3; do
  "$prog" overflow 6000 >"$TMP/over.txt" 2>&1 ||
    { cat "$TMP/over.txt"; fail "overflow recovery round $round died"; }
  expect_match "$TMP/over.txt" '^recovered 6000 overflows' \
    "6,000 stack-overflow recoveries under SIGPROF at 1000 Hz (round $round)"
done
finish
