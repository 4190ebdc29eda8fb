#!/usr/bin/env bash
# Gzip bombs against the cprof tool: an 8 GiB bomb (8 MB of gzip) given to
# `cprof top`, `cprof view` and, inside a log, `cprof extract` must be
# refused with one line naming the limit, after inflating at most the limit
# (256 MiB by default) and without holding it in memory; --max-size and
# CPROF_MAX_PROFILE_SIZE move the limit, a profile of exactly the limit is
# accepted and one byte less refuses it; a small file that decodes into
# many tiny elements is refused by the bound on its decoded size (8 times
# the limit) instead of taking 16 times its size or more. Each run's peak
# RSS and CPU time are printed.
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/cli_lib.bash"
cprof=$CPROFTEST_BUILD/cprof

# The bomb: one gzip member of 8 GiB of zeros, 512 copies of 16 MiB
# compressed once (a full flush after each makes the copies identical). It
# is never inflated to its end, so its CRC is left zero.
python3 - "$TMP" <<'PY' || fail "writing the bombs"
import base64, struct, sys, zlib
tmp = sys.argv[1]
chunk = bytes(16 << 20)
c = zlib.compressobj(9, zlib.DEFLATED, -15)
first = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
piece = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
end = c.flush()
bomb = (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + first + piece * 511 +
        end + struct.pack("<II", 0, 0))
open(tmp + "/bomb.pb.gz", "wb").write(bomb)
# The same bomb as a heap dump in a log, after a good block (a complete
# gzip member of a few zero bytes: extract checks the gzip layer only).
def block(data, pid):
    b64 = base64.b64encode(data).decode()
    lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
    return ("-----BEGIN PPROF HEAP-----\nProfile: heap\nPid: %d\nDebug: 0\nSeq: 1\n\n"
            % pid + "\n".join(lines) + "\n-----END PPROF HEAP-----\n")
small = zlib.compressobj(9, zlib.DEFLATED, 31)
good = small.compress(bytes(100)) + small.flush()
open(tmp + "/bomb.log", "w").write("app: starting\n" + block(good, 1) +
                                   "app: working\n" + block(bomb, 2))
# 4 MiB of empty samples (2 bytes each, 32 in memory once decoded).
g = zlib.compressobj(9, zlib.DEFLATED, 31)
open(tmp + "/tiny_elements.pb.gz", "wb").write(g.compress(b"\x12\x00" * (2 << 20)) + g.flush())
PY
echo "bomb: $(stat -c %s "$TMP/bomb.pb.gz") bytes of gzip for 8 GiB"
size=$(small_profile "$TMP/small.pb") || fail "writing the small profile"
gzip -9 <"$TMP/small.pb" >"$TMP/small.pb.gz"

# check_refusal NAME OUT ERR PATTERN MAX_RSS_KB: the run failed (status 1)
# with one line on stderr matching PATTERN, within MAX_RSS_KB.
check_refusal() {
  local name=$1 out=$2 err=$3 pattern=$4 max_rss=$5 rss cpu status
  read -r rss cpu status <"$out"
  echo "$name: status $status, peak RSS $((rss / 1024)) MB, CPU ${cpu}s: $(head -1 "$err")"
  [ "$status" -eq 1 ] || fail "$name: exit status $status, not 1"
  expect_match "$err" "$pattern" "$name: refused with the limit named"
  [ "$(grep -c . "$err")" -eq 1 ] || { cat "$err" >&2; fail "$name: more than one line on stderr"; }
  [ "$rss" -lt "$max_rss" ] || fail "$name: peak RSS ${rss} kB, over ${max_rss} kB"
  checks=$((checks + 1))
}
limit_msg='decompressed profile larger than the 256 MiB limit; raise it with --max-size or CPROF_MAX_PROFILE_SIZE$'
# Inflating 256 MiB takes well under a second; 8 GiB took 20 s. The bound
# is generous for a loaded machine and a sanitizer build.
max_cpu=8

# 1. top and view on the bomb: refused, in a few MB (it took 1 GB).
measure "$TMP/top.m" "$cprof" top "$TMP/bomb.pb.gz" >"$TMP/top.out" 2>"$TMP/top.err"
check_refusal "cprof top" "$TMP/top.m" "$TMP/top.err" "^cprof top: .*bomb.pb.gz: $limit_msg" 131072
measure "$TMP/view.m" "$cprof" view -o "$TMP/bomb.html" "$TMP/bomb.pb.gz" 2>"$TMP/view.err"
check_refusal "cprof view" "$TMP/view.m" "$TMP/view.err" "^cprof view: .*bomb.pb.gz: $limit_msg" 131072
[ ! -e "$TMP/bomb.html" ] || fail "cprof view wrote a page for the bomb"
for m in top view; do
  read -r _ cpu _ <"$TMP/$m.m"
  awk -v c="$cpu" -v m="$max_cpu" 'BEGIN { exit !(c < m) }' || fail "cprof $m: ${cpu}s of CPU on the bomb"
done
echo "ok: top and view stop inflating at the limit"

# 2. extract: the good block is written, the bomb reported at its line.
mkdir -p "$TMP/x"
measure "$TMP/extract.m" "$cprof" extract -o "$TMP/x" "$TMP/bomb.log" >"$TMP/extract.out" 2>"$TMP/extract.err"
bomb_line=$(grep -n 'BEGIN PPROF' "$TMP/bomb.log" | sed -n '2s/:.*//p')
check_refusal "cprof extract" "$TMP/extract.m" "$TMP/extract.err" \
  "^cprof extract: .*bomb.log: line $bomb_line: PPROF HEAP block: $limit_msg" 131072
read -r _ cpu _ <"$TMP/extract.m"
awk -v c="$cpu" -v m="$max_cpu" 'BEGIN { exit !(c < m) }' || fail "cprof extract: ${cpu}s of CPU on the bomb"
expect_match "$TMP/extract.out" '^cprof extract: 1 profile written' "extract wrote the good block only"
[ "$(ls "$TMP/x")" = heap-1-1.pb.gz ] || fail "extract wrote $(ls "$TMP/x" | tr '\n' ' ')"

# 3. The limit moves with --max-size (any place on the line) and with
# CPROF_MAX_PROFILE_SIZE; the flag wins. Exactly the limit is accepted.
for f in small.pb small.pb.gz; do
  "$cprof" top "$TMP/$f" --max-size "$size" >"$TMP/ok.txt" 2>&1 || { cat "$TMP/ok.txt"; fail "top --max-size $size refused $f of $size bytes"; }
  expect_match "$TMP/ok.txt" ' leaf_fn$' "--max-size $size accepts $f ($size bytes decompressed)"
  if "$cprof" top --max-size "$((size - 1))" "$TMP/$f" >"$TMP/no.txt" 2>&1; then fail "top --max-size $((size - 1)) accepted $f"; fi
  expect_match "$TMP/no.txt" "larger than the $((size - 1))-byte limit" "--max-size $((size - 1)) refuses $f"
done
CPROF_MAX_PROFILE_SIZE=$((size - 1)) "$cprof" view -o - "$TMP/small.pb.gz" >/dev/null 2>"$TMP/env.err" && fail "CPROF_MAX_PROFILE_SIZE was ignored"
expect_match "$TMP/env.err" "larger than the $((size - 1))-byte limit" "CPROF_MAX_PROFILE_SIZE sets the limit"
CPROF_MAX_PROFILE_SIZE=1 "$cprof" view --max-size 1K -o - "$TMP/small.pb.gz" >/dev/null 2>"$TMP/env.err" || { cat "$TMP/env.err"; fail "--max-size did not win over the environment"; }
echo "ok: --max-size wins over CPROF_MAX_PROFILE_SIZE"
CPROF_MAX_PROFILE_SIZE=16M measure "$TMP/x16.m" "$cprof" extract -o "$TMP/x16" "$TMP/bomb.log" >/dev/null 2>"$TMP/x16.err"
expect_match "$TMP/x16.err" 'decompressed profile larger than the 16 MiB limit' "extract takes the limit from the environment"
for bad in 0 12x -5 1.5G ''; do
  "$cprof" top --max-size "$bad" "$TMP/small.pb" >/dev/null 2>"$TMP/bad.err" && fail "--max-size '$bad' accepted"
  status=0
  "$cprof" top --max-size "$bad" "$TMP/small.pb" >/dev/null 2>&1 || status=$?
  [ "$status" -eq 2 ] || fail "--max-size '$bad': status $status, not 2"
  expect_match "$TMP/bad.err" "^cprof top: --max-size $bad: not a size" "--max-size '$bad' is a usage error"
done
CPROF_MAX_PROFILE_SIZE=lots "$cprof" extract -o "$TMP/x" "$TMP/bomb.log" >/dev/null 2>"$TMP/bad.err" && fail "CPROF_MAX_PROFILE_SIZE=lots accepted"
expect_match "$TMP/bad.err" '^cprof extract: CPROF_MAX_PROFILE_SIZE=lots: not a size' "a bad CPROF_MAX_PROFILE_SIZE is refused"

# 4. Tiny elements: 4 KB of gzip, 4 MiB of empty samples that would take
# 64 MiB once decoded. Under a 4 MiB limit decoding stops at 8 times it
# (ASan's allocator keeps more of what it frees than glibc's does).
measure "$TMP/tiny.m" "$cprof" top --max-size 4M "$TMP/tiny_elements.pb.gz" >/dev/null 2>"$TMP/tiny.err"
check_refusal "cprof top (tiny elements)" "$TMP/tiny.m" "$TMP/tiny.err" \
  'decoding the profile would take more than 8 times the 4 MiB limit in memory' 163840
finish
