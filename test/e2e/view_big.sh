#!/usr/bin/env bash
# The viewer under load: a synthetic CPU profile with 50,000 samples over
# 5,000 distinct stacks (test/progs/big_profile) rendered by `cprof view`
# in headless Chromium. Prints the page's own time to first render (from
# the decoded bytes to a laid-out flame graph and table) and the time a
# zoom and a search take, and fails if the first render takes longer than
# 10 s; `cprof top` must still agree with go tool pprof -top.
source "$(dirname "$0")/lib.bash"
: "${CPROFTEST_SRC:?}"
cprof=$CPROFTEST_BUILD/cprof
"$CPROFTEST_BUILD/test/progs/big_profile" "$TMP/big.pb.gz" || fail "big_profile"
"$cprof" top -nodefraction=0 "$TMP/big.pb.gz" >"$TMP/ours.txt" || fail "cprof top"
pprof -top -nodefraction=0 "$TMP/big.pb.gz" >"$TMP/theirs.txt"
diff "$TMP/theirs.txt" "$TMP/ours.txt" >/dev/null || fail "cprof top differs from go tool pprof -top on the big profile"
checks=$((checks + 1))
echo "ok: cprof top = go tool pprof -top on the big profile ($(grep -cE '^ +[-0-9.]' "$TMP/ours.txt") functions)"
"$cprof" view -o "$TMP/big.html" "$TMP/big.pb.gz" 2>/dev/null || fail "cprof view"
echo "page: $(stat -c %s "$TMP/big.html") bytes for a $(stat -c %s "$TMP/big.pb.gz")-byte profile"
# The page is the same file whatever build wrote it; its rendering is
# checked in the normal build, and the sanitizer builds check the
# command that writes it (above).
sanitized_build "$cprof" && skip_rest "the browser check in Chromium (the page does not depend on the build: checked in the normal build)"
why=$(browser_missing)
[ -z "$why" ] || skip_rest "the browser check ($why)"
node --experimental-websocket "$CPROFTEST_SRC/test/ui/cdp.js" "file://$TMP/big.html" --interact \
  --screenshot "$TMP/big.png" >"$TMP/big.json" || fail "cdp.js"
python3 "$CPROFTEST_SRC/test/ui/check.py" "$TMP/big.json" --sample cpu --min-frames 100 --interact || fail "the big profile in the viewer"
checks=$((checks + 1))
python3 - "$TMP/big.json" <<'PY' || fail "the big profile's numbers"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["samples"] == 50000, d["samples"]
assert d["top"][0]["name"] == "hot_leaf" and d["top"][0]["flat"] == 100 * 10**9, d["top"][0]
it = d["interact"]
print("render: first render %.0f ms (50,000 samples, 5,000 stacks, %d frames drawn); zoom %.0f ms; search %.0f ms; page ready %d ms after navigation"
      % (d["renderMs"], d["frameCount"], it["zoomMs"], it["searchMs"], d["waitedMs"]))
assert d["renderMs"] < 10000, "first render took %.0f ms" % d["renderMs"]
PY
checks=$((checks + 1))
cp "$TMP/big.png" "$CPROFTEST_TMP/view_big.png"
finish
