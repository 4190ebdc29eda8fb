#!/usr/bin/env bash
# `cprof extract` streams its input: a 100 MB log piped in, with a dump at
# each end, must be extracted in a few MB (the whole log was read into
# memory: +104 MB); lines longer than 64 KiB are cut, so a 4 MB line costs
# nothing and a block holding one is refused at its line; a block larger
# than the limit is refused without being held, and the blocks around it
# are extracted. Peak RSS and CPU time are printed.
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/cli_lib.bash"
cprof=$CPROFTEST_BUILD/cprof

# Blocks: a small gzip member (extract checks only the gzip layer), and a
# text dump of a given size, in cprof's format (64 characters a line).
python3 - "$TMP" <<'PY' || fail "writing the blocks"
import base64, sys, zlib
tmp = sys.argv[1]
def block(name, pid, data, debug=0, width=64):
    b64 = base64.b64encode(data).decode()
    lines = [b64[i:i + width] for i in range(0, len(b64), width)]
    return ("-----BEGIN PPROF %s-----\nProfile: %s\nPid: %d\nDebug: %d\nSeq: 1\n\n"
            % (name.upper(), name, pid, debug) + "\n".join(lines) +
            "\n-----END PPROF %s-----\n" % name.upper())
g = zlib.compressobj(9, zlib.DEFLATED, 31)
gz = g.compress(b"profile bytes " * 100) + g.flush()
open(tmp + "/first.blk", "w").write(block("heap", 1, gz))
open(tmp + "/last.blk", "w").write(block("cpu", 2, gz))
# Its base64 on one line of 100,000 characters.
open(tmp + "/longline.blk", "w").write(block("heap", 3, bytes(75000), 1, 100000))
# 3 MB of text: over a 1 MiB limit.
open(tmp + "/big.blk", "w").write(block("goroutine", 4, b"goroutine 1 [running]:\n" * 130000, 1))
PY

# 1. 100 MB of log lines between two dumps, through a pipe.
log_lines() { yes 'app: 2026-11-30T10:00:00Z worker 7 handled request /api/v1/items in 3 ms' | head -c 100000000 || true; }
{ cat "$TMP/first.blk"; log_lines; echo; cat "$TMP/last.blk"; } |
  measure "$TMP/pipe.m" "$cprof" extract -o "$TMP/x1" >"$TMP/x1.out" 2>"$TMP/x1.err"
read -r rss cpu status <"$TMP/pipe.m"
echo "100 MB log on stdin: status $status, peak RSS $((rss / 1024)) MB, CPU ${cpu}s"
[ "$status" -eq 0 ] || { cat "$TMP/x1.err"; fail "extract failed on the 100 MB log"; }
expect_match "$TMP/x1.out" '^cprof extract: 2 profiles written' "both dumps extracted from the 100 MB log"
cmp -s <(sed -n '/^$/,/^-----END/p' "$TMP/first.blk" | sed '1d;$d' | base64 -d) "$TMP/x1/heap-1-1.pb.gz" ||
  fail "the first dump's file differs from its data"
[ -s "$TMP/x1/cpu-2-1.pb.gz" ] || fail "no file for the last dump"
# The log alone would need 100 MB; the tool itself needs a few.
[ "$rss" -lt 49152 ] || fail "peak RSS ${rss} kB for a 100 MB log: it was not streamed"
checks=$((checks + 1))
echo "ok: the 100 MB log was streamed (under 48 MB)"

# 2. A 4 MB line with no newline before the dumps, a block with a 100,000
# character line, then a good block: the long line is cut and skipped, the
# block with one refused at its BEGIN line, the others extracted.
{
  head -c 4000000 /dev/zero | tr '\0' 'x'
  echo
  cat "$TMP/first.blk" "$TMP/longline.blk" "$TMP/last.blk"
} >"$TMP/long.log"
long_begin=$(grep -n 'BEGIN PPROF' "$TMP/long.log" | sed -n '2s/:.*//p')
measure "$TMP/long.m" "$cprof" extract -o "$TMP/x2" "$TMP/long.log" >"$TMP/x2.out" 2>"$TMP/x2.err"
read -r rss cpu status <"$TMP/long.m"
echo "long lines: status $status, peak RSS $((rss / 1024)) MB: $(cat "$TMP/x2.err")"
[ "$status" -eq 1 ] || fail "extract status $status with a bad block, not 1"
expect_match "$TMP/x2.err" "line $long_begin: PPROF HEAP block: a line longer than 65536 bytes$" "the block with a long line is refused at its line"
expect_match "$TMP/x2.out" '^cprof extract: 2 profiles written' "the blocks around it are extracted"
[ "$rss" -lt 49152 ] || fail "peak RSS ${rss} kB: a long line was held"
checks=$((checks + 1))

# 3. A block larger than the limit: refused as it is read (not after),
# the blocks around it kept, and a limit that fits lets it through.
cat "$TMP/first.blk" "$TMP/big.blk" "$TMP/last.blk" >"$TMP/big.log"
big_begin=$(grep -n 'BEGIN PPROF' "$TMP/big.log" | sed -n '2s/:.*//p')
measure "$TMP/big.m" "$cprof" extract -o "$TMP/x3" --max-size 1M "$TMP/big.log" >"$TMP/x3.out" 2>"$TMP/x3.err"
read -r rss cpu status <"$TMP/big.m"
echo "3 MB block, 1 MiB limit: status $status: $(cat "$TMP/x3.err")"
[ "$status" -eq 1 ] || fail "extract status $status with a block over the limit, not 1"
expect_match "$TMP/x3.err" "line $big_begin: PPROF GOROUTINE block: block larger than the 1 MiB limit; raise it with --max-size or CPROF_MAX_PROFILE_SIZE$" "a block over the limit is refused at its line"
expect_match "$TMP/x3.out" '^cprof extract: 2 profiles written' "the blocks around the big one are extracted"
"$cprof" extract -o "$TMP/x4" --max-size 4M "$TMP/big.log" >"$TMP/x4.out" || fail "extract --max-size 4M refused the 3 MB block"
[ "$(wc -c <"$TMP/x4/goroutine-4-1.txt")" -eq $((23 * 130000)) ] || fail "the 3 MB block was not extracted whole"
echo "ok: with a 4 MiB limit the 3 MB block is extracted whole"
checks=$((checks + 1))

# 4. CRLF line ends and a log without a final newline still work.
{ sed 's/$/\r/' "$TMP/first.blk"; printf 'app: last line, no newline'; } >"$TMP/crlf.log"
"$cprof" extract -o "$TMP/x5" "$TMP/crlf.log" >"$TMP/x5.out" || fail "extract on a CRLF log"
cmp -s "$TMP/x1/heap-1-1.pb.gz" "$TMP/x5/heap-1-1.pb.gz" || fail "the CRLF log's block differs"
echo "ok: a CRLF log without a final newline"
checks=$((checks + 1))
finish
