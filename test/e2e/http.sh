#!/usr/bin/env bash
# The /debug/pprof/ endpoint end to end, against a live server
# (test/progs/http_server) on 127.0.0.1, [::1] and a unix socket: go tool
# pprof (-raw, -top, -seconds deltas, symbolization through /symbol) for
# every profile the index lists, a table of bad requests with Go's status
# codes and texts, the bearer token, the CPU profile's one-at-a-time rule
# and early stop, refusals at start, and the index page in headless
# Chromium (skipped when chromium is not installed).
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/http_server

# get URL [CURL ARGS...]: prints "STATUS" and leaves the body in $TMP/body
# and the headers in $TMP/headers.
get() {
  local url=$1
  shift
  curl -sS -m 60 -o "$TMP/body" -D "$TMP/headers" -w '%{http_code}' "$@" "$url"
}

expect_status() {
  local want=$1 got=$2 what=$3
  [ "$got" = "$want" ] || { cat "$TMP/body" >&2; fail "$what: status $got, want $want"; }
}

header() { tr -d '\r' <"$TMP/headers" | awk -v h="$1" 'tolower($0) ~ "^" tolower(h) ":" {sub(/^[^:]*: */, ""); print}'; }

start_server main --test-profiles --log --max-seconds 120
MAIN=$PID
B=http://127.0.0.1:$PORT/debug/pprof

# --- the index, and which profiles exist today
st=$(get "$B/")
expect_status 200 "$st" "index"
cp "$TMP/body" "$TMP/index.html"
expect_match "$TMP/index.html" '<title>/debug/pprof/</title>' "index title"
expect_match "$TMP/index.html" 'Set debug=1 as a query parameter to export in legacy text format' "index: Go's debug=1 hint"
expect_match "$TMP/index.html" "<tr><td>[0-9]+</td><td><a href='threadcreate\\?debug=1'>threadcreate</a></td></tr>" "index row for threadcreate with its count"
expect_match "$TMP/index.html" "<a href='profile\\?debug=1'>profile</a>" "index row for the CPU profile"
expect_match "$TMP/index.html" '<div class=profile-name>threadcreate: </div> Stack traces that led to the creation of new OS threads' "index description"
[ "$(header X-Content-Type-Options)" = nosniff ] || fail "index without nosniff"
[ "$(header Content-Type)" = "text/html; charset=utf-8" ] || fail "index content type"
if grep -q "href='goroutine?debug=1'" "$TMP/index.html"; then
  expect_match "$TMP/index.html" 'href="goroutine\?debug=2">full goroutine stack dump' "goroutine?debug=2 link with a goroutine profile"
else
  expect_no_match "$TMP/index.html" 'goroutine\?debug=2' "no goroutine?debug=2 link without a goroutine profile"
fi
names=$(grep -oE "href='[a-z_]+\\?debug=1'" "$TMP/index.html" | sed -E "s/href='([a-z_]+)\\?debug=1'/\\1/")
sorted=$(sort <<<"$names")
[ "$names" = "$sorted" ] || fail "index not sorted by name: $names"
echo "profiles listed: $(echo $names)"
for want in heap allocs goroutine mutex block; do
  grep -qx "$want" <<<"$names" || echo "note: $want is not in this build's registry yet; its checks are skipped"
done

# --- CPU profile through go tool pprof
pprof -raw "$B/profile?seconds=2" >"$TMP/cpu_raw.txt"
expect_match "$TMP/cpu_raw.txt" '^PeriodType: cpu nanoseconds$' "CPU via pprof -raw: period type"
expect_match "$TMP/cpu_raw.txt" '^samples/count cpu/nanoseconds$' "CPU via pprof -raw: sample types"
expect_match "$TMP/cpu_raw.txt" '^Duration: 2' "CPU via pprof -raw: duration 2 s"
expect_match "$TMP/cpu_raw.txt" ' burn_http ' "CPU via pprof -raw: burn_http"
pprof -top "$B/profile?seconds=1&hz=250" >"$TMP/cpu_top.txt"
expect_match "$TMP/cpu_top.txt" '^ *[0-9.]+m?s +[0-9.]+% .* burn_http$' "CPU via pprof -top: burn_http"
st=$(get "$B/profile?seconds=1&hz=500")
expect_status 200 "$st" "profile with hz"
[ "$(header Content-Disposition)" = 'attachment; filename="profile"' ] || fail "profile disposition"
[ "$(header Content-Type)" = 'application/octet-stream' ] || fail "profile content type"
pprof -raw "$TMP/body" >"$TMP/hz.txt"
expect_match "$TMP/hz.txt" '^Period: 2000000$' "hz=500 gives a 2 ms period"

# --- named profiles: every one the index lists, -raw, -top and a delta
# (the windowed ones, profile above and wall in wall.sh, take seconds)
for name in $names; do
  case $name in cmdline | profile | wall) continue ;; esac
  pprof -raw "$B/$name" >"$TMP/$name.raw"
  expect_match "$TMP/$name.raw" '^Samples:' "$name via pprof -raw"
  pprof -top "$B/$name" >"$TMP/$name.top"
  expect_match "$TMP/$name.top" '^Type: ' "$name via pprof -top"
  # Go allows deltas on all six of its named profiles; a cprof profile
  # that does not must say so with Go's text.
  if pprof -raw -seconds 1 "$B/$name" >"$TMP/$name.delta"; then
    expect_match "$TMP/$name.delta" '^Duration: 1(\.[0-9]+)?s?$' "$name -seconds 1 delta: duration 1 s"
  else
    expect_match "$TMP/$name.delta" 'server response: 400 Bad Request - "seconds" parameter is not supported for this profile type' "$name has no delta support and pprof prints Go's 400 text"
    echo "note: $name does not support ?seconds= deltas in this build (Go's does)"
  fi
  st=$(get "$B/$name?debug=1")
  expect_status 200 "$st" "$name?debug=1"
  [ "$(header Content-Type)" = "text/plain; charset=utf-8" ] || fail "$name?debug=1 content type"
done
expect_match "$TMP/threadcreate.raw" '^threadcreate/count$' "threadcreate sample type"
expect_match "$TMP/threadcreate.top" ' spawn_http_worker$' "threadcreate -top: spawn_http_worker created threads"
# The program creates a thread every 200 ms: a 2 s delta holds about 10.
pprof -raw -seconds 2 "$B/threadcreate" >"$TMP/tc2.txt"
expect_match "$TMP/tc2.txt" '^Duration: 2(\.[0-9]+)?s?$' "threadcreate -seconds 2: duration"
created=$(awk '/^Samples:/ {on=1; next} /^Locations/ {on=0} on && /^ +[0-9]+:/ {sub(/:.*/, ""); n += $1} END {print n + 0}' "$TMP/tc2.txt")
[ "$created" -ge 5 ] && [ "$created" -le 40 ] || { cat "$TMP/tc2.txt"; fail "threadcreate delta counted $created threads in 2 s"; }
echo "ok: threadcreate delta over 2 s: $created threads (p1 - p0, not the total)"
checks=$((checks + 1))
# Names: goroutine also answers as threads (cprof's name); the CPU profile
# answers only at Go's route, /profile, never as cpu.
st=$(get "$B/threads?debug=1")
expect_status 200 "$st" "threads?debug=1"
expect_match "$TMP/body" '^goroutine profile: total [0-9]+$' "threads is the goroutine profile"
st=$(get "$B/cpu?seconds=1")
expect_status 404 "$st" "cpu is not a route (Go's is profile)"
expect_match "$TMP/body" '^Unknown profile$' "cpu: Go's 404 text"
st=$(get "$B/threadcreate?seconds=1")
expect_status 200 "$st" "threadcreate?seconds=1"
[ "$(header Content-Disposition)" = 'attachment; filename="threadcreate-delta"' ] || fail "delta filename"
echo "ok: delta filename threadcreate-delta"
if grep -qx heap <<<"$names"; then
  expect_match "$TMP/heap.raw" '^alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes$' "heap sample types"
  st=$(get "$B/heap?gc=1")
  expect_status 200 "$st" "heap?gc=1 (gc accepted and ignored)"
fi

# --- /symbol: pprof symbolizes a profile whose mapping has no functions
pprof -symbolize=remote -raw "$B/nofuncs" >"$TMP/nofuncs.txt"
expect_match "$TMP/nofuncs.txt" '^ +1: 0x[0-9a-f]+ M=1 burn_http ' "pprof named burn_http through /symbol"
expect_match "$TMP/nofuncs.txt" '^ +2: 0x[0-9a-f]+ M=1 spawn_http_worker ' "pprof named spawn_http_worker through /symbol"
expect_match "$TMP/main.log" '^http: POST /debug/pprof/symbol -> 200' "pprof POSTed to /debug/pprof/symbol"
base=$(awk -v exe="$(readlink -f "$prog")" '$2 ~ /x/ && $6 == exe {split($1, a, "-"); print a[1]; exit}' "/proc/$MAIN/maps")
off=$(awk '/ burn_http$/ {print $1}' < <(nm "$prog"))
ex_off=$(awk -v exe="$(readlink -f "$prog")" '$2 ~ /x/ && $6 == exe {print $3; exit}' "/proc/$MAIN/maps")
addr=$(printf '0x%x' $((0x$base - 0x$ex_off + 0x$off + 4)))
st=$(get "$B/symbol" --data-binary "$addr+0x0+bogus+1")
expect_status 200 "$st" "POST /symbol"
printf 'num_symbols: 1\n%s burn_http\n' "$addr" | diff - "$TMP/body" || fail "POST /symbol body"
st=$(get "$B/symbol?$addr+$addr")
printf 'num_symbols: 1\n%s burn_http\n%s burn_http\n' "$addr" "$addr" | diff - "$TMP/body" || fail "GET /symbol body"
st=$(get "$B/symbol")
printf 'num_symbols: 1\n' | diff - "$TMP/body" || fail "GET /symbol without addresses"
echo "ok: /symbol by curl (POST, GET, unresolved and malformed skipped)"
checks=$((checks + 1))

# --- cmdline: NUL-joined, no trailing NUL
st=$(get "$B/cmdline")
expect_status 200 "$st" "cmdline"
printf '%s\0%s\0%s\0%s\0%s' "$prog" --test-profiles --log --max-seconds 120 | cmp - "$TMP/body" || fail "cmdline bytes"
[ "$(header Content-Type)" = "text/plain; charset=utf-8" ] || fail "cmdline content type"
echo "ok: cmdline is the arguments joined with NUL"
checks=$((checks + 1))

# --- bad requests: status, exact body, Go's error headers
long=$(head -c 5000 /dev/zero | tr '\0' a)
while IFS='|' read -r path status body; do
  [ -n "$path" ] || continue
  st=$(get "$B/$path")
  [ "$st" = "$status" ] || { cat "$TMP/body"; fail "$path: status $st, want $status"; }
  printf '%s\n' "$body" | cmp -s - "$TMP/body" || { cat "$TMP/body"; fail "$path: body is not \"$body\""; }
  [ "$(header Content-Type)" = "text/plain; charset=utf-8" ] || fail "$path: content type"
  [ "$(header X-Go-Pprof)" = 1 ] || fail "$path: no X-Go-Pprof"
  [ "$(header X-Content-Type-Options)" = nosniff ] || fail "$path: no nosniff"
  [ -z "$(header Content-Disposition)" ] || fail "$path: an error with Content-Disposition"
  echo "ok: $status for ${path:0:60}"
  checks=$((checks + 1))
done <<EOF
nosuch|404|Unknown profile
threadcreate?seconds=-1|400|invalid value for "seconds" - must be a positive integer
threadcreate?seconds=abc|400|invalid value for "seconds" - must be a positive integer
threadcreate?seconds=0|400|invalid value for "seconds" - must be a positive integer
threadcreate?seconds=99999999999999999999|400|invalid value for "seconds" - must be a positive integer
threadcreate?seconds=121|400|profile duration exceeds server's limit of 120 seconds
profile?seconds=121|400|profile duration exceeds server's limit of 120 seconds
threadcreate?seconds=1&debug=1|400|seconds and debug params are incompatible
nodelta?seconds=1|400|"seconds" parameter is not supported for this profile type
nodelta?seconds=1&debug=1|400|"seconds" parameter is not supported for this profile type
profile?hz=99999|400|invalid value for "hz" - must be an integer in [1, 10000]
threadcreate?x=$long|414|request URI too long (limit 4096 bytes)
trace|501|Could not enable tracing: execution traces are not supported by cprof
EOF
st=$(get "$B/threadcreate?debug=abc")
expect_status 200 "$st" "debug=abc is debug=0, as Go's Atoi error is ignored"
[ "$(header Content-Type)" = application/octet-stream ] || fail "debug=abc content type"
[ "$(header Content-Disposition)" = 'attachment; filename="threadcreate"' ] || fail "debug=abc disposition"
echo "ok: debug=abc -> 200 octet-stream"
st=$(get "http://127.0.0.1:$PORT/etc/passwd")
expect_status 404 "$st" "a path outside /debug/pprof/"
st=$(get "$B/" -X DELETE)
expect_status 405 "$st" "DELETE"
st=$(get "$B/" -I)
expect_status 200 "$st" "HEAD"

# --- one CPU profile at a time; a client that leaves frees it at once
get "$B/profile?seconds=3" -o "$TMP/first.pb.gz" >"$TMP/first.status" &
first=$!
sleep 0.7
st=$(get "$B/profile?seconds=1")
expect_status 500 "$st" "a second CPU profile"
printf 'Could not enable CPU profiling: cpu profiling already in use\n' | cmp - "$TMP/body" || fail "second CPU profile text"
st=$(get "$B/threadcreate?debug=1")
expect_status 200 "$st" "other requests are served during a CPU profile"
wait "$first"
[ "$(cat "$TMP/first.status")" = 200 ] || fail "the first CPU profile failed"
echo "ok: the first CPU profile completed"
start=$(date +%s%N)
curl -s -m 1 -o /dev/null "$B/profile?seconds=30" || true
st=$(get "$B/profile?seconds=1")
expect_status 200 "$st" "a CPU profile right after a client left one"
ms=$((($(date +%s%N) - start) / 1000000))
[ "$ms" -lt 5000 ] || fail "the abandoned profile held the CPU profiler ($ms ms)"
expect_match "$TMP/main.log" 'GET /debug/pprof/profile: client gone, abandoned' "the abandoned profile was stopped"

# --- token
start_server token --token 's3cr3t-t0ken' --log
TOK=$PID
TB=http://127.0.0.1:$PORT/debug/pprof
st=$(get "$TB/")
expect_status 401 "$st" "missing token"
printf 'Unauthorized: send "Authorization: Bearer <token>"\n' | cmp - "$TMP/body" || fail "missing token text"
[ "$(header WWW-Authenticate)" = Bearer ] || fail "401 without WWW-Authenticate"
st=$(get "$TB/heap" -H 'Authorization: Bearer wrong')
expect_status 401 "$st" "wrong token"
printf 'Unauthorized: invalid bearer token\n' | cmp - "$TMP/body" || fail "wrong token text"
st=$(get "$TB/" -H 'Authorization: Bearer s3cr3t-t0ken')
expect_status 200 "$st" "right token"
expect_no_match "$TMP/token.log" 's3cr3t|wrong' "the token never reaches the log"
stop_server "$TOK" token

# --- refusals at start
"$prog" --refuse 0.0.0.0:6060 2>"$TMP/refuse.txt" || { cat "$TMP/refuse.txt"; fail "a non-loopback bind was not refused"; }
expect_match "$TMP/refuse.txt" '^cprof: http: refusing to listen on 0.0.0.0:6060: not a loopback address' "non-loopback bind refused with a clear line"
"$prog" --inuse 2>"$TMP/inuse.txt" || { cat "$TMP/inuse.txt"; fail "a busy port was not reported by start"; }
expect_match "$TMP/inuse.txt" 'cannot listen on 127.0.0.1:[0-9]+: Address already in use' "a busy port is reported by start"

# --- IPv6 loopback and a unix socket
if start_server v6 --addr '[::1]:0' 2>/dev/null; then
  st=$(get "http://[::1]:$PORT/debug/pprof/")
  expect_status 200 "$st" "index over [::1]"
  stop_server "$PID" v6
fi
sock=$TMP/pprof.sock
start_server unix --addr "unix:$sock"
UPID=$PID
[ "$(stat -c %a "$sock")" = 600 ] || fail "unix socket mode $(stat -c %a "$sock")"
echo "ok: unix socket created 0600"
st=$(get "http://localhost/debug/pprof/threadcreate?debug=1" --unix-socket "$sock")
expect_status 200 "$st" "threadcreate over the unix socket"
stop_server "$UPID" unix
[ ! -e "$sock" ] || fail "the socket file outlived the server"

# --- the index in headless Chromium: every link answers 200
if command -v chromium >/dev/null; then
  chrome=(unlimited timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic
    --no-first-run --disable-background-networking --disable-component-update
    --disable-sync --disable-dev-shm-usage --user-data-dir="$(mktemp -d "$TMP/chrome.XXXX")")
  "${chrome[@]}" --dump-dom "$B/" >"$TMP/dom.html" 2>"$TMP/chrome.log" || { tail "$TMP/chrome.log"; fail "chromium could not load the index"; }
  expect_match "$TMP/dom.html" '<title>/debug/pprof/</title>' "Chromium rendered the index"
  links=$(grep -oE 'href="[^"]+"' "$TMP/dom.html" | sed -E 's/href="([^"]+)"/\1/' | sed 's/&amp;/\&/g')
  [ -n "$links" ] || fail "no links in the rendered index"
  for l in $links; do
    url="$B/$l"
    # The windowed profiles would take Go's default 30 s.
    case $l in profile* | wall*) url="$url&seconds=1" ;; esac
    st=$(get "$url")
    expect_status 200 "$st" "index link $l"
    echo "ok: index link $l answers 200"
    checks=$((checks + 1))
  done
  "${chrome[@]}" --screenshot="$TMP/index.png" --window-size=1024,768 "$B/" >/dev/null 2>&1 || fail "chromium screenshot"
  [ -s "$TMP/index.png" ] || fail "empty screenshot"
  cp "$TMP/index.png" "$CPROFTEST_TMP/http_index.png" # kept for a look
  echo "ok: screenshot of the index ($(stat -c %s "$TMP/index.png") bytes, kept as $CPROFTEST_TMP/http_index.png)"
  checks=$((checks + 1))
else
  echo "note: chromium not installed; the browser check is skipped"
fi

# --- and after all of that, still serving
st=$(get "$B/")
expect_status 200 "$st" "the server still serves the index afterwards"
stop_server "$MAIN" main
finish
