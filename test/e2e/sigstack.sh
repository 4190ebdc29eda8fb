#!/usr/bin/env bash
# cprof's signals on stacks they did not expect. An alternate signal
# stack in use by the program's own SA_ONSTACK handler: cprof adds its
# signals to that handler's mask, so SIGPROF waits until the handler
# returns and never nests there; the kernel's signal frame alone is
# AT_MINSIGSTKSZ (3,376 bytes with AVX-512), and nesting killed the program
# (SIGSEGV at 4 KiB and 5.4 KiB, 2.8 KB written below a 6 KiB stack). The
# sizes come from this machine's AT_MINSIGSTKSZ: the smallest is that
# size exactly, the next leaves the program's own handler 2 KiB beyond the
# frame. And a thread stack
# exhausted by an overflow the program recovers from, 6,000 times.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/sigstack
if sanitized_build "$prog"; then
  # The sanitizers' own signal handling and larger frames change what fits
  # on a small alternate stack; the plain build measures cprof's own use.
  skip_rest "stack use is measured in the plain build"
fi
frame=$("$prog" frame)
[ "$frame" -gt 0 ] 2>/dev/null || frame=2048
echo "AT_MINSIGSTKSZ: $frame bytes"
# The kernel may refuse a stack below its older constant MINSIGSTKSZ
# (2,048 bytes) where AT_MINSIGSTKSZ is smaller (1,776 on an AMD EPYC
# without AVX-512): the first stack is the smallest it takes.
first=$("$prog" minimum) || fail "no alternate stack from $frame bytes up is taken here"
[ "$first" = "$frame" ] ||
  echo "sigaltstack takes $first bytes at least, more than AT_MINSIGSTKSZ"
smallest=$(((frame + 2048 + 255) / 256 * 256))
# SIZE:LOCALS: the handler's own locals beside its frame. The first is a
# stack of AT_MINSIGSTKSZ bytes exactly (or the smallest the kernel takes),
# which the kernel's frame and a handler with no locals may just fit (the
# program checks its own use without cprof first, and exits 2 if it does
# not fit).
cases="$first:0 $smallest:0"
[ "$smallest" -lt 6144 ] && cases="$cases 6144:0"
[ $((frame + 4096)) -le 8192 ] && cases="$cases 8192:2048"
cases="$cases 16384:4096"
for c in $cases; do
  size=${c%:*} locals=${c#*:}
  rc=0
  "$prog" altstack "$size" "$locals" >"$TMP/alt$size.txt" 2>&1 || rc=$?
  if [ "$rc" = 2 ] && [ "$size" = "$first" ]; then
    cat "$TMP/alt$size.txt"
    skip_check "a stack of $first bytes (AT_MINSIGSTKSZ $frame): the program's own handler needs more here, without cprof"
    continue
  fi
  [ "$rc" = 0 ] ||
    { cat "$TMP/alt$size.txt"; fail "altstack $size (handler locals $locals): the program was hurt (status $rc)"; }
  expect_match "$TMP/alt$size.txt" '^altstack use: [0-9]+ bytes without the profile, [0-9]+ with it$' \
    "a $size-byte alternate stack, a handler with $locals bytes of locals, SIGPROF at 1000 Hz: nothing below it written"
  expect_match "$TMP/alt$size.txt" "^mask read back lacks SIGPROF; the kernel's holds it$" \
    "cprof's signal is in the handler's mask in the kernel, not in what the program reads back"
  read -r plain with < <(sed -nE 's/^altstack use: ([0-9]+) bytes without the profile, ([0-9]+) with it$/\1 \2/p' "$TMP/alt$size.txt")
  # Nothing of cprof's on that stack: the deepest use with the profile is
  # the program's own (the kernel's frame varies with the register state
  # it saves, hence the margin of one frame's extended state).
  [ "$with" -le $((plain + 1024)) ] ||
    fail "the alternate stack was used $with bytes deep with cprof, $plain without"
  checks=$((checks + 1))
  expect_match "$TMP/alt$size.txt" '^deferred: [1-9][0-9]* of 50 handler runs ended with cprof.s signal held back$' \
    "cprof's signal was held back while the handler ran ($(sed -nE 's/^deferred: ([0-9]+) of.*/\1/p' "$TMP/alt$size.txt") of 50 runs), then delivered"
done
for round in 1 2 3; do
  "$prog" overflow 6000 >"$TMP/over.txt" 2>&1 ||
    { cat "$TMP/over.txt"; fail "overflow recovery round $round died"; }
  expect_match "$TMP/over.txt" '^recovered 6000 overflows' \
    "6,000 stack-overflow recoveries under SIGPROF at 1000 Hz (round $round)"
done
finish
