#!/usr/bin/env bash
# The endpoint side by side with Go itself: the same requests to a real
# net/http/pprof server on Go's ServeMux (test/progs/gopprof -serve) and to
# cprof's (test/progs/http_server), compared on status, Location,
# Content-Type, Content-Disposition and body. Where the profiles differ
# (Go's threadcreate is not cprof's) the body is compared by its kind: the
# first words of a text profile, or "pprof" for a gzipped one. Covered:
# debug beyond int64 (Go's Atoi error ignored, its clamped value kept),
# bad escapes, %00 and ';' in the query (Go drops the pair), uncleaned
# paths (Go's 301 to the cleaned path, query kept, in Location and body),
# urlencoded POST bodies (read like the query, ahead of it), and the index
# page's texts. Every difference is listed before the test fails.
source "$(dirname "$0")/lib.bash"
command -v go >/dev/null || skip_rest "go is not installed"
export GOCACHE=$TMP/gocache GOPATH=$TMP/gopath GO111MODULE=off GOFLAGS= GOPROXY=off
go build -o "$TMP/gopprof" "$CPROFTEST_SRC/test/progs/gopprof/main.go" || fail "go build gopprof"
unlimited "$TMP/gopprof" -serve >"$TMP/go.port" 2>"$TMP/go.log" &
track $!
for _ in $(seq 100); do
  [ -s "$TMP/go.port" ] && break
  sleep 0.05
done
GOPORT=$(head -1 "$TMP/go.port")
[ -n "$GOPORT" ] || { cat "$TMP/go.log"; fail "the Go server did not start"; }
start_server main --test-profiles --log
MAIN=$PID
GO=http://127.0.0.1:$GOPORT
CP=http://127.0.0.1:$PORT

differences=()
differ() {
  echo "DIFFERENT: $*" >&2
  differences+=("$*")
}
same() {
  checks=$((checks + 1))
  echo "ok: $*"
}

# fetch BASE TARGET [CURL ARGS...]: one request, the target sent exactly as
# written; prints the response's shape, one field a line.
fetch() {
  local base=$1 target=$2
  shift 2
  rm -f "$TMP/h" "$TMP/b"
  curl -sS -m 10 --path-as-is -o "$TMP/b" -D "$TMP/h" "$@" "$base$target" >/dev/null 2>"$TMP/curl.err" ||
    { echo "curl failed: $(cat "$TMP/curl.err")"; return; }
  # curl -I writes the headers where the body would go.
  [[ " $* " != *" -I "* ]] || : >"$TMP/b"
  # The last header block (after any 100 Continue): the status and the
  # headers compared, in a fixed order.
  local line status= type= disposition= location=
  while IFS= read -r line; do
    line=${line%$'\r'}
    case ${line,,} in
      http/*) read -r _ status _ <<<"$line" && type= disposition= location= ;;
      content-type:*) type=${line#*: } ;;
      content-disposition:*) disposition=${line#*: } ;;
      location:*) location=${line#*: } ;;
    esac
  done <"$TMP/h"
  echo "status $status"
  [ -z "$type" ] || echo "content-type: $type"
  [ -z "$disposition" ] || echo "content-disposition: $disposition"
  [ -z "$location" ] || echo "location: $location"
  local magic= first=
  LC_ALL=C read -r -N 2 magic <"$TMP/b" || true
  if [ ! -s "$TMP/b" ]; then
    echo "body: (empty)"
  elif [ "$magic" = $'\x1f\x8b' ]; then
    echo "body: pprof"
  elif [ "$status" = 200 ] && [[ $type != text/html* ]]; then
    # A text profile: its first words, before any number.
    read -r first <"$TMP/b" || true
    echo "body: ${first%%[0-9]*}"
  else
    echo "body: $(cat -v "$TMP/b" | sed -z 's/\n/\\n/g')"
  fi
}

# compare WHAT TARGET [CURL ARGS...]: Go's answer and cprof's must have the
# same shape.
compare() {
  local what=$1 target=$2
  shift 2
  fetch "$GO" "$target" "$@" >"$TMP/go.shape"
  fetch "$CP" "$target" "$@" >"$TMP/cp.shape"
  if cmp -s "$TMP/go.shape" "$TMP/cp.shape"; then
    same "$what: $(tr '\n' ' ' <"$TMP/go.shape" | cut -c1-110)"
  else
    differ "$what ($target): Go and cprof answer differently"
    diff "$TMP/go.shape" "$TMP/cp.shape" | sed 's/^</  Go:   /; s/^>/  cprof:/' | grep -v '^---\|^[0-9]' >&2 || true
  fi
}

# expect WHAT WANT_FILE TARGET [CURL ARGS...]: cprof's answer has this
# shape (for what Go does differently on purpose, see docs/http.md).
expect_shape() {
  local what=$1 want=$2 target=$3
  shift 3
  fetch "$CP" "$target" "$@" >"$TMP/cp.shape"
  if printf '%s\n' "$want" | cmp -s - "$TMP/cp.shape"; then
    same "$what"
  else
    differ "$what ($target)"
    printf '%s\n' "$want" | diff - "$TMP/cp.shape" | sed 's/^</  want: /; s/^>/  got:  /' | grep -v '^---\|^[0-9]' >&2 || true
  fi
}

# --- 1. debug beyond int64: Go's Atoi returns the clamped value with its
# error, and the handler keeps the value: text (and, negative, Go's text
# type over a pprof body for every profile but heap and allocs).
# An absolute-form request target (RFC 9112 3.2.2: a server must accept
# it), as a proxy sends it.
compare "absolute-form target: served as its path" "/" --request-target "http://127.0.0.1/debug/pprof/heap"
compare "absolute-form target with a query" "/" --request-target "http://127.0.0.1/debug/pprof/threadcreate?debug=1"
compare "absolute-form target of an unknown profile" "/" --request-target "http://127.0.0.1/debug/pprof/nothere"
compare "debug past int64 is int64's max: text" "/debug/pprof/threadcreate?debug=99999999999999999999"
compare "debug past int64 on goroutine: debug >= 2, the full dump" "/debug/pprof/goroutine?debug=99999999999999999999"
compare "debug below int64: text type, pprof body" "/debug/pprof/threadcreate?debug=-99999999999999999999"
compare "debug=-1: text type, pprof body" "/debug/pprof/threadcreate?debug=-1"
compare "debug=-1 on heap: text" "/debug/pprof/heap?debug=-1"
compare "debug=abc is 0" "/debug/pprof/threadcreate?debug=abc"
compare "seconds past int64 on a delta: 400" "/debug/pprof/threadcreate?seconds=99999999999999999999"

# --- 2. a pair that does not decode is dropped, as url.ParseQuery drops it
compare "debug=%zz is dropped" "/debug/pprof/threadcreate?debug=%zz"
compare "seconds=1% is dropped: no delta" "/debug/pprof/threadcreate?seconds=1%"
compare "a bad key drops its pair" "/debug/pprof/threadcreate?%zz=1&debug=1"
compare "only the bad pair is dropped" "/debug/pprof/threadcreate?debug=%zz&debug=1"
compare "debug=1%00 is not a number" "/debug/pprof/threadcreate?debug=1%00"
compare "debug%00 is another key" "/debug/pprof/threadcreate?debug%00=1"
compare "a pair with ';' is dropped" "/debug/pprof/threadcreate?seconds=1;&debug=1"
compare "a NUL in a profile name: Unknown profile" "/debug/pprof/heap%00"
compare "a NUL elsewhere in the path: not found" "/debug%00/pprof/heap"

# --- 3. paths to clean: ServeMux's 301 to the cleaned path
compare "// redirects" "//debug/pprof/heap"
compare "/./ redirects" "/debug/pprof/./heap"
compare "/../ redirects" "/debug/pprof/../pprof/heap"
compare "an escaped dot is a dot" "/debug/pprof/%2e/heap?debug=1"
compare "an escaped slash is a slash" "/debug/pprof/heap%2F"
compare "cleaned to the index" "/x/../debug/pprof/"
compare "cleaned to /debug/pprof: straight to /debug/pprof/" "/debug/pprof/."
compare "cleaned out of /debug/pprof/" "/debug/pprof/.."
compare "Location escapes the path" "/debug/pprof/a%20b!*()%3f/./x"
compare "Location keeps the query; the body escapes it" "/debug/pprof/../pprof/heap?debug=1&a=<b>\"'"
compare "non-ASCII bytes" "/debug/pprof/caf%C3%A9/.?q=caf%C3%A9"
compare "raw bytes past ASCII: %xx in Location, as sent in the body" $'/debug/pprof/./heap?q=\xe9&x=%zz'
compare "a NUL cleaned away" "/debug/pprof/%00/../heap"
compare "a trailing slash stays" "/debug/pprof//heap/"
compare "HEAD: no body" "//debug/pprof/heap" -I
compare "POST: no body, no type" "//debug/pprof/heap" -d debug=1
# An expectation other than 100-continue: Go's server answers 417 before
# any handler (an empty body); 100-continue is met.
compare "Expect: foo is 417" "/debug/pprof/heap?debug=1" -H "Expect: foo"
compare "Expect: foo on a POST is 417" "/debug/pprof/heap" -H "Expect: foo" -d debug=1
compare "Expect: 100-continue is met" "/debug/pprof/heap" -H "Expect: 100-continue" -d debug=1
compare "an uncleaned /symbol is redirected, not read" "/debug/pprof/./symbol" --data-binary 0x1 -H 'Content-Type: application/octet-stream'
compare "not a profile: 404" "/debug/pprof/heap/"

# --- 4. the subtree's slash: the query goes along
compare "/debug/pprof?debug=1" "/debug/pprof?debug=1"
compare "//debug/pprof?debug=1, one redirect" "//debug/pprof?debug=1"
compare "/debug/pprof? (empty query)" "/debug/pprof?"

# --- 5. urlencoded POST bodies are the form, ahead of the query
form=(-H 'Content-Type: application/x-www-form-urlencoded')
compare "POST debug=1" "/debug/pprof/threadcreate" -d debug=1
compare "the body wins over the query" "/debug/pprof/threadcreate?debug=0" -d debug=1
compare "a bad pair in the body is dropped" "/debug/pprof/threadcreate?debug=0" -d 'debug=1%zz&debug=2'
compare "a media type with parameters, any case" "/debug/pprof/threadcreate" -H 'Content-Type: Application/X-WWW-Form-URLencoded ; charset=utf-8' -d debug=1
compare "not a form: the body is not read" "/debug/pprof/threadcreate" -H 'Content-Type: text/plain' -d debug=1
compare "no Content-Type: not a form" "/debug/pprof/threadcreate" -H 'Content-Type:' -d debug=1
compare "a form delta" "/debug/pprof/threadcreate" "${form[@]}" -d 'seconds=1&debug=1'
compare "a form delta, seconds=abc" "/debug/pprof/threadcreate" -d 'seconds=abc'
t0=$(date +%s%N)
compare "POST seconds=1 to /profile" "/debug/pprof/profile" -d seconds=1
ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$ms" -lt 8000 ]; then
  same "POST seconds=1: both CPU profiles done in $ms ms"
else
  differ "POST seconds=1: the two CPU profiles took $ms ms"
fi
big=$(head -c 5000 /dev/zero | tr '\0' a)
expect_shape "a form over 4096 bytes: 413 from its length, before any is read (Go reads 10 MB)" \
  "$(printf '%s\n' 'status 413' 'content-type: text/plain; charset=utf-8' \
    'body: request body too large (limit 4096 bytes)\n')" \
  "/debug/pprof/threadcreate" -H 'Expect:' -d "debug=1&x=$big"
expect_shape "a 64 KiB /symbol body is still read" \
  "$(printf '%s\n' 'status 200' 'content-type: text/plain; charset=utf-8' \
    "body: num_symbols: ")" \
  "/debug/pprof/symbol" -H 'Expect:' --data-binary "$(head -c 60000 /dev/zero | tr '\0' 0)"

# --- 6. the index: Go's texts where the profile is the same
curl -sS "$GO/debug/pprof/" >"$TMP/go.html"
curl -sS "$CP/debug/pprof/" >"$TMP/cp.html"
for line in '<title>/debug/pprof/</title>' '.profile-name{' 'Types of profiles available:' \
  '<thead><td>Count</td><td>Profile</td></thead>' '<a href="goroutine?debug=2">full goroutine stack dump</a>' \
  'Profile Descriptions:'; do
  grep -qxF "$line" "$TMP/go.html" || fail "Go's index has no line $line"
  if grep -qxF "$line" "$TMP/cp.html"; then same "index line $line"; else differ "index: no line $line"; fi
done
for name in allocs block cmdline heap mutex profile threadcreate; do
  want=$(grep -F "<li><div class=profile-name>$name: </div>" "$TMP/go.html")
  [ -n "$want" ] || fail "Go's index does not describe $name"
  if grep -qxF "$want" "$TMP/cp.html"; then
    same "index: $name described as Go does"
  else
    differ "index: $name described as $(grep -F "profile-name>$name: " "$TMP/cp.html" || echo nothing), Go: $want"
  fi
done
# Go after 1.19 (the oracle's): the debug=1 hint and goroutine's description.
expect_match "$TMP/cp.html" '^<p>Set debug=1 as a query parameter to export in legacy text format</p>$' "index: Go's debug=1 hint"
expect_match "$TMP/cp.html" '^<li><div class=profile-name>goroutine: </div> Stack traces of all current goroutines. Use debug=2 as a query parameter to export in the same format as an unrecovered panic.</li>$' "index: goroutine as Go after 1.19 describes it"

# --- debug=1 text goes through Go's tabwriter: cprof's frame lines, with
# their padding squeezed out and put through Go's own text/tabwriter as
# runtime/pprof sets it up, come back byte for byte.
for p in heap allocs mutex block goroutine threadcreate; do
  curl -sS -m 10 -o "$TMP/$p.txt" "$CP/debug/pprof/$p?debug=1" || fail "GET $p?debug=1"
  grep -q $'^#\t0x' "$TMP/$p.txt" || [ "$p" = block ] || [ "$p" = mutex ] ||
    fail "$p?debug=1 has no frame lines"
  tr -s '\t' <"$TMP/$p.txt" | "$TMP/gopprof" -tabwrite >"$TMP/$p.go.txt"
  if cmp -s "$TMP/$p.go.txt" "$TMP/$p.txt"; then
    same "$p?debug=1: frame lines padded as Go's tabwriter pads them ($(grep -c $'^#\t' "$TMP/$p.txt") lines)"
  else
    differ "$p?debug=1: padding differs from Go's tabwriter"
    diff <(cat -A "$TMP/$p.go.txt") <(cat -A "$TMP/$p.txt") | head -6 >&2 || true
  fi
done

# --- the differences docs/http.md lists, as it lists them.
# allocs?seconds=N: cprof keeps alloc_space as the default, Go's merge loses it.
curl -sS -m 20 -o "$TMP/cp.allocs" "$CP/debug/pprof/allocs?seconds=1"
curl -sS -m 20 -o "$TMP/go.allocs" "$GO/debug/pprof/allocs?seconds=1"
pprof -top "$TMP/cp.allocs" >"$TMP/cp.allocs.top"
pprof -top "$TMP/go.allocs" >"$TMP/go.allocs.top"
expect_match "$TMP/cp.allocs.top" '^Type: alloc_space$' "allocs?seconds=1: cprof's default sample type is alloc_space"
expect_match "$TMP/go.allocs.top" '^Type: inuse_space$' "allocs?seconds=1: Go's has none (pprof shows inuse_space)"
# HEAD on a redirect: cprof sends the Content-Length of the GET's body.
get_len=$(curl -sS -m 10 --path-as-is -o /dev/null -w '%{size_download}' "$CP//debug/pprof/heap")
curl -sS -m 10 --path-as-is -I "$CP//debug/pprof/heap" | tr -d '\r' >"$TMP/head.h"
expect_match "$TMP/head.h" "^Content-Length: $get_len\$" "HEAD on a redirect: Content-Length $get_len, the GET's body"
curl -sS -m 10 --path-as-is -I "$GO//debug/pprof/heap" | tr -d '\r' >"$TMP/gohead.h"
expect_no_match "$TMP/gohead.h" '^Content-Length:' "Go's HEAD on a redirect has no Content-Length"

# nosniff: cprof's on every answer; Go's on its 404 and profiles, not on
# its redirects.
for who in GO CP; do
  base=${!who}
  curl -sS -m 10 -D "$TMP/$who.404.h" -o /dev/null "$base/nothing"
  curl -sS -m 10 --path-as-is -D "$TMP/$who.301.h" -o /dev/null "$base//debug/pprof/heap"
  curl -sS -m 10 -D "$TMP/$who.200.h" -o /dev/null "$base/debug/pprof/heap?debug=1"
done
for kind in 404 301 200; do
  expect_match "$TMP/CP.$kind.h" '^X-Content-Type-Options: nosniff' "cprof's $kind carries nosniff"
done
expect_match "$TMP/GO.404.h" '^X-Content-Type-Options: nosniff' "Go's 404 carries nosniff"
expect_match "$TMP/GO.200.h" '^X-Content-Type-Options: nosniff' "Go's profile carries nosniff"
expect_no_match "$TMP/GO.301.h" '^X-Content-Type-Options' "Go's redirect carries no nosniff"

# --- a form is read only after authentication
start_server token --token s3cret --log
st=$(curl -sS -m 10 -o "$TMP/b" -w '%{http_code}' -H 'Expect:' -d "debug=1" "http://127.0.0.1:$PORT/debug/pprof/threadcreate")
[ "$st" = 401 ] || fail "a form without the token: $st, want 401"
st=$(curl -sS -m 10 -o "$TMP/b" -w '%{http_code}' -H 'Authorization: Bearer s3cret' -d "debug=1" "http://127.0.0.1:$PORT/debug/pprof/threadcreate")
if [ "$st" = 200 ] && head -1 "$TMP/b" | grep -q '^threadcreate profile: total'; then
  same "a form is refused without the token and read with it"
else
  differ "a form with the token: $st, not a text profile"
fi
# An unmet expectation is 417 before the token is asked for, as in Go.
st=$(curl -sS -m 10 -o "$TMP/b" -w '%{http_code}' -H 'Expect: foo' "http://127.0.0.1:$PORT/debug/pprof/heap")
[ "$st" = 417 ] || fail "Expect: foo without the token: $st, want 417"
same "Expect: foo is 417 before the token"
stop_server "$PID" token

stop_server "$MAIN" main
if [ ${#differences[@]} -gt 0 ]; then
  printf 'DIFFERENT: %s\n' "${differences[@]}" >&2
  fail "${#differences[@]} difference(s) from Go"
fi
finish
