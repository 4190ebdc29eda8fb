#!/usr/bin/env bash
# The profile viewer at /debug/pprof/ui/ against a live server
# (test/progs/http_server, which burns CPU in burn_http and allocates in
# short_worker): the routes, the page's self-containment, the profile
# list, and in headless Chromium (driven by test/ui/cdp.js) the CPU
# profile over 2 seconds and the heap profile by alloc_space, each with
# its hottest function as the widest frame, zoom, search, sorting and a
# screenshot; then the token rule, for the page and for its fetches.
source "$(dirname "$0")/lib.bash"
: "${CPROFTEST_SRC:?}"
prog=$CPROFTEST_BUILD/test/progs/http_server
cdp=(node --experimental-websocket "$CPROFTEST_SRC/test/ui/cdp.js")
check=(python3 "$CPROFTEST_SRC/test/ui/check.py")


get() {
  local url=$1
  shift
  curl -sS -m 60 -o "$TMP/body" -D "$TMP/headers" -w '%{http_code}' "$@" "$url"
}
header() { tr -d '\r' <"$TMP/headers" | awk -v h="$1" 'tolower($0) ~ "^" tolower(h) ":" {sub(/^[^:]*: */, ""); print}'; }
ok() {
  checks=$((checks + 1))
  echo "ok: $*"
}

start_server main
MAIN=$PID
B=http://127.0.0.1:$PORT/debug/pprof

# --- routes
st=$(get "$B/ui")
[ "$st" = 301 ] && [ "$(header Location)" = /debug/pprof/ui/ ] || fail "/ui: $st to $(header Location)"
ok "/debug/pprof/ui redirects to /debug/pprof/ui/"
st=$(get "$B/ui/")
[ "$st" = 200 ] || fail "/ui/: $st"
[ "$(header Content-Type)" = "text/html; charset=utf-8" ] || fail "/ui/ content type $(header Content-Type)"
[ "$(header X-Content-Type-Options)" = nosniff ] || fail "/ui/ without nosniff"
cp "$TMP/body" "$TMP/page.html"
expect_match "$TMP/page.html" '<title>cprof profile viewer</title>' "the page is the viewer"
expect_no_match "$TMP/page.html" '(src|href)="(https?:)?//|@import|url\((https?:)?//' "the page loads nothing from elsewhere"
[ "$(grep -c '<script' "$TMP/page.html")" = 2 ] || fail "the page should have exactly its data and code scripts"
ok "no external scripts"
st=$(get "$B/ui/profiles.json")
[ "$st" = 200 ] && [ "$(header Content-Type)" = application/json ] || fail "profiles.json: $st $(header Content-Type)"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["profiles"]; n=[x["name"] for x in p]; w=[x["name"] for x in p if x["windowed"]]; assert n[0]=="profile" and sorted(w)==["profile","wall"] and all(x["windowed"] for x in p[:len(w)]) and "heap" in n and "threadcreate" in n, n; assert all(isinstance(x["count"], int) and isinstance(x["description"], str) for x in p)' "$TMP/body" || { cat "$TMP/body"; fail "profiles.json content"; }
ok "profiles.json lists the windowed (CPU) profile first, then the others ($(python3 -c 'import json,sys; print(" ".join(x["name"] for x in json.load(open(sys.argv[1]))["profiles"]))' "$TMP/body"))"
st=$(get "$B/")
expect_match "$TMP/body" '<a href="ui/">flame graph viewer</a>' "the index links the viewer"
st=$(get "$B/ui/nosuch")
[ "$st" = 404 ] || fail "/ui/nosuch: $st"
ok "/ui/nosuch is 404"

why=$(browser_missing)
[ -z "$why" ] || skip_rest "the browser checks ($why)"

# --- CPU, 2 seconds: burn_http is the widest frame apart from its callers
"${cdp[@]}" "$B/ui/?profile=profile&seconds=2" --interact \
  --screenshot "$TMP/flamegraph.png" --width 1400 --height 900 >"$TMP/cpu.json" || fail "cdp.js on the CPU profile"
"${check[@]}" "$TMP/cpu.json" --hot burn_http --sample cpu --interact || fail "CPU flame graph"
# The facts count samples as pprof does: at 100 Hz each stands for 10 ms of
# CPU, so the count is the total over 10 ms (not the number of stacks).
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d, list) else d; assert d["samples"] * 10000000 == d["total"] and d["samples"] >= 20, (d["samples"], d["total"])' "$TMP/cpu.json" ||
  fail "the page's sample count is not the CPU total over the 10 ms period"
ok "the page counts $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d, list) else d; print(d["samples"])' "$TMP/cpu.json") samples, as pprof does"
checks=$((checks + 1))
size=$(stat -c %s "$TMP/flamegraph.png")
[ "$size" -gt 10000 ] || fail "screenshot only $size bytes"
python3 -c 'import sys; d=open(sys.argv[1],"rb").read(24); assert d[:8]==b"\x89PNG\r\n\x1a\n"; import struct; w,h=struct.unpack(">II", d[16:24]); assert (w,h)==(1400,900), (w,h)' "$TMP/flamegraph.png" || fail "screenshot is not a 1400x900 PNG"
cp "$TMP/flamegraph.png" "$CPROFTEST_TMP/flamegraph.png"
ok "screenshot of the CPU flame graph ($size bytes, kept as $CPROFTEST_TMP/flamegraph.png)"

# --- heap: alloc_space (short_worker allocates and frees), then inuse_space
sleep 1
"${cdp[@]}" "$B/ui/?profile=heap&sample=alloc_space" --interact \
  --screenshot "$TMP/heap.png" >"$TMP/heap.json" || fail "cdp.js on the heap profile"
"${check[@]}" "$TMP/heap.json" --hot short_worker --sample alloc_space --interact || fail "heap flame graph"
checks=$((checks + 1))
cp "$TMP/heap.png" "$CPROFTEST_TMP/flamegraph_heap.png"
names=(allocs goroutine threadcreate mutex block)
urls=("$B/ui/?profile=heap&sample=inuse_objects")
for name in "${names[@]}"; do urls+=("$B/ui/?profile=$name"); done
urls+=("$B/ui/")
"${cdp[@]}" "${urls[@]}" >"$TMP/others.json" || fail "cdp.js on the other profiles"
"${check[@]}" "$TMP/others.json" --index 0 --sample inuse_objects --min-frames 1 || fail "heap by inuse_objects"
checks=$((checks + 1))
for i in "${!names[@]}"; do
  "${check[@]}" "$TMP/others.json" --index $((i + 1)) --min-frames 1 || fail "${names[$i]} in the viewer"
  checks=$((checks + 1))
done
# Without a profile in the URL the page lists them and waits.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))[-1]; assert d["status"]=="idle" and d["profiles"][0]=="profile" and "heap" in d["profiles"], d' "$TMP/others.json" || fail "the bare page does not list the profiles"
ok "the bare page lists the profiles and waits for a choice"

# --- token: the page (code, no data) loads without it, as a browser opens
# it from a link; everything the page fetches needs it, and the page sends
# the one in its #token= fragment.
start_server token --token 's3cr3t-t0ken'
TB=http://127.0.0.1:$PORT/debug/pprof
st=$(get "$TB/ui/")
[ "$st" = 200 ] || fail "/ui/ without the token: $st"
st=$(get "$TB/ui")
[ "$st" = 301 ] || fail "/ui without the token: $st (the redirect to /ui/)"
st=$(get "$TB/ui/profiles.json")
[ "$st" = 401 ] && [ "$(header WWW-Authenticate)" = Bearer ] || fail "profiles.json without the token: $st"
st=$(get "$TB/ui/profiles.json" -H 'Authorization: Bearer wrong')
[ "$st" = 401 ] || fail "profiles.json with a wrong token: $st"
st=$(get "$TB/ui/profiles.json" -H 'Authorization: Bearer s3cr3t-t0ken')
[ "$st" = 200 ] || fail "profiles.json with the token: $st"
st=$(get "$TB/heap")
[ "$st" = 401 ] || fail "heap without the token: $st"
ok "/ui/ loads without the token; profiles.json and the profiles need it"
# A browser with no header at all: the page with #token= draws the heap,
# the page without it asks for the token.
"${cdp[@]}" "$TB/ui/?profile=heap&sample=alloc_space#token=s3cr3t-t0ken" "$TB/ui/?profile=heap" \
  --screenshot "$TMP/tok.png" >"$TMP/tok.json" || fail "cdp.js with the token"
"${check[@]}" "$TMP/tok.json" --index 0 --sample alloc_space --min-frames 1 || fail "the page's fetches with #token="
[ -s "$TMP/tok.png" ] || fail "no screenshot of the page with #token="
checks=$((checks + 1))
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))[1]; assert d["status"]=="error" and "bearer token" in d["error"], d' "$TMP/tok.json" || fail "without #token= the page should ask for the token"
ok "without #token= the page's fetches get 401 and it asks for the token"

kill -TERM "$MAIN"
wait "$MAIN" || fail "the server did not stop cleanly"
finish
