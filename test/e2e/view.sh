#!/usr/bin/env bash
# `cprof view` and `cprof top` on profiles written by cprof (CPU and heap
# from test/progs/http_server) and by Go itself (test/progs/gopprof, built
# here offline): `cprof top` must print what `go tool pprof -top` prints,
# byte for byte, for every sample type; the pages `cprof view` writes must
# render in headless Chromium without an error, with the hottest function
# widest. Bad input must be refused with a message. The "(inline)" labels
# depend on which functions -n keeps, so every -n up to 8 is compared too,
# also on a small synthetic profile built to have such labels every run.
source "$(dirname "$0")/lib.bash"
: "${CPROFTEST_SRC:?}"
cprof=$CPROFTEST_BUILD/cprof
cdp=(node --experimental-websocket "$CPROFTEST_SRC/test/ui/cdp.js")
check=(python3 "$CPROFTEST_SRC/test/ui/check.py")
ok() {
  checks=$((checks + 1))
  echo "ok: $*"
}

# --- profiles written by Go: a tiny program, built offline
export GOCACHE=$TMP/gocache GOPATH=$TMP/gopath GO111MODULE=off GOFLAGS= GOPROXY=off
mkdir -p "$TMP/go"
go build -o "$TMP/gopprof" "$CPROFTEST_SRC/test/progs/gopprof/main.go" || fail "go build gopprof"
# Without async preemption: on a loaded machine its signal handler frame,
# runtime.asyncPreempt, would take the leaf of many burnAlpha samples.
GODEBUG=asyncpreemptoff=1 unlimited "$TMP/gopprof" "$TMP/go" || fail "gopprof did not run"
ok "Go wrote $(ls "$TMP/go" | tr '\n' ' ')"

# --- profiles written by cprof
# A sample every 16 KiB on average: the worker threads allocate about
# 400 KiB per 200 ms, which at the default 512 KiB could leave the heap
# profile taken a second after start-up empty (it did under TSan).
CPROF_HEAP_RATE=16384 "$CPROFTEST_BUILD/test/progs/http_server" >"$TMP/port" 2>"$TMP/server.log" &
track $!
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
PORT=$(head -1 "$TMP/port")
[ -n "$PORT" ] || fail "http_server did not start"
mkdir -p "$TMP/c"
curl -sS -m 30 -o "$TMP/c/cpu.pb.gz" "http://127.0.0.1:$PORT/debug/pprof/profile?seconds=1" || fail "CPU profile"
curl -sS -m 30 -o "$TMP/c/heap.pb.gz" "http://127.0.0.1:$PORT/debug/pprof/heap" || fail "heap profile"
curl -sS -m 30 -o "$TMP/c/goroutine.pb.gz" "http://127.0.0.1:$PORT/debug/pprof/goroutine" || fail "goroutine profile"
ok "cprof wrote cpu, heap and goroutine profiles"
"$cprof" top -sample_index=alloc_space "$TMP/c/heap.pb.gz" >"$TMP/cheap.top" 2>&1
expect_match "$TMP/cheap.top" ' short_worker$' "cprof's heap profile has short_worker's allocations"

# --- cprof top == go tool pprof -top, for every sample type. pprof is told
# not to symbolize: cprof top shows the profile's own names, while pprof
# would look up the binaries of any mapping the profile left unsymbolized
# (a sanitizer runtime's, say) on this machine.
compare() {
  local file=$1
  shift
  # cprof top's -n=N is pprof's -nodecount=N.
  local theirs=("${@/#-n=/-nodecount=}")
  "$cprof" top "$@" "$file" >"$TMP/ours.txt" 2>&1 || { cat "$TMP/ours.txt" >&2; fail "cprof top $* $file"; }
  pprof -symbolize=none -top "${theirs[@]}" "$file" >"$TMP/theirs.txt"
  diff "$TMP/theirs.txt" "$TMP/ours.txt" >"$TMP/diff.txt" || { cat "$TMP/diff.txt" >&2; fail "cprof top $* differs from go tool pprof -top ${theirs[*]} on $file"; }
  ok "cprof top $* = go tool pprof -top on ${file#"$TMP"/} ($(grep -cE '^ +[-0-9.]' "$TMP/ours.txt") rows)"
}
# compare_n FILE ARGS...: compare with each -n from 1 to 8. pprof labels a
# function "(inline)" from the graph of the functions it shows, rebuilt
# without the others, so the labels change with -n.
compare_n() {
  local file=$1 n
  shift
  for n in 1 2 3 4 5 6 7 8; do compare "$file" -n=$n "$@" >/dev/null; done
  ok "cprof top -n=1..8${*:+ $*} = go tool pprof -top -nodecount=1..8 on ${file#"$TMP"/}"
}
for f in "$TMP/go/cpu.pb.gz" "$TMP/c/cpu.pb.gz" "$TMP/c/goroutine.pb.gz"; do
  compare "$f"
  compare "$f" -nodefraction=0
done
for f in "$TMP/go/heap.pb.gz" "$TMP/c/heap.pb.gz"; do
  for s in alloc_objects alloc_space inuse_objects inuse_space; do compare "$f" -sample_index=$s; done
done
for f in "$TMP/go/cpu.pb.gz" "$TMP/c/cpu.pb.gz" "$TMP/c/goroutine.pb.gz"; do
  compare_n "$f"
  compare_n "$f" -nodefraction=0
done
for f in "$TMP/go/heap.pb.gz" "$TMP/c/heap.pb.gz"; do
  for s in alloc_objects alloc_space inuse_objects inuse_space; do compare_n "$f" -sample_index=$s; done
done

# --- a synthetic profile whose labels hang on the cuts: functions inlined
# into others (several lines in one location) whose callers -n or the node
# cutoff leave out, an edge both inlined and called (not inline: pprof
# wants every call inlined), the same edge twice in one sample (counted
# once, as its first, inlined, call), and an inlined call below pprof's
# edge cutoff (0.001 of the total), which does not count.
python3 - "$TMP/inl.pb" <<'PY' || fail "writing the synthetic profile"
import sys
def varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))
def field(num, payload):  # length-delimited
    return varint(num << 3 | 2) + varint(len(payload)) + payload
def num(num, n):
    return varint(num << 3) + varint(n)
strings = [""]
def s(x):
    if x not in strings:
        strings.append(x)
    return strings.index(x)
funcs = ["main", "work", "spin", "helper", "leaf", "rec", "odd", "tiny"]
# Locations by id, lines innermost first.
locs = {1: ["main"], 2: ["work"], 3: ["spin", "work"], 4: ["helper", "work"],
        5: ["helper"], 6: ["leaf", "helper"], 7: ["leaf"], 8: ["rec", "work"],
        9: ["rec"], 10: ["odd"], 11: ["odd", "work"], 12: ["tiny"]}
# Stacks by location id, root first, and their values (97350 in all).
samples = [
    ([1, 3], 40000),       # spin only ever inlined into work
    ([1, 2, 5], 9000),     # helper called by work, and...
    ([1, 4], 12000),       # ...inlined into it
    ([1, 2, 6], 15000),    # leaf inlined into helper
    ([1, 4, 7], 8000),     # leaf called by helper, itself inlined into work
    ([1, 8, 2, 9], 7000),  # work -> rec inlined, then work -> rec called
    ([1, 10], 6000),       # odd called by main, and...
    ([1, 11], 50),         # ...inlined into work, below the edge cutoff
    ([1, 12, 7], 300),     # tiny, below the node cutoff, between main and leaf
]
out = field(1, num(1, s("samples")) + num(2, s("count")))
# One mapping, symbolized, so that pprof has a main binary to name.
out += field(3, num(1, 1) + num(2, 0x1000) + num(3, 0x2000) +
             num(5, s("/bin/inl")) + num(7, 1) + num(10, 1))
for stack, v in samples:
    ids = b"".join(varint(i) for i in reversed(stack))
    out += field(2, field(1, ids) + field(2, varint(v)))
for i, lines in locs.items():
    out += field(4, num(1, i) + num(2, 1) + num(3, 0x1000 + i) + b"".join(
        field(4, num(1, funcs.index(f) + 1)) for f in lines))
for i, f in enumerate(funcs):
    out += field(5, num(1, i + 1) + num(2, s(f)))
out += b"".join(field(6, x.encode()) for x in strings)
open(sys.argv[1], "wb").write(out)
PY
compare "$TMP/inl.pb" -nodefraction=0
expect_match "$TMP/ours.txt" ' spin \(inline\)$' "the synthetic profile has an inlined function"
compare "$TMP/inl.pb"
compare_n "$TMP/inl.pb"
compare_n "$TMP/inl.pb" -nodefraction=0
# For a count in a CPU profile go tool pprof 1.19 sometimes prints the
# total as a share of the duration, as if the count were nanoseconds, and
# sometimes not; the rows are what matter.
"$cprof" top -sample_index=samples -nodefraction=0 "$TMP/go/cpu.pb.gz" | sed -n '/^      flat/,$p' >"$TMP/ours.txt"
pprof -top -sample_index=samples -nodefraction=0 "$TMP/go/cpu.pb.gz" | sed -n '/^      flat/,$p' >"$TMP/theirs.txt"
diff "$TMP/theirs.txt" "$TMP/ours.txt" || fail "cprof top -sample_index=samples rows differ from go tool pprof's"
ok "cprof top -sample_index=samples rows = go tool pprof -top's"
compare "$TMP/go/cpu.pb.gz" -unit=ms
compare "$TMP/go/heap.pb.gz" -unit=B -sample_index=alloc_space
expect_match "$TMP/ours.txt" 'main.allocate$' "Go's heap profile names main.allocate"
"$cprof" top -n 3 "$TMP/go/cpu.pb.gz" >"$TMP/n3.txt"
pprof -top -nodecount=3 "$TMP/go/cpu.pb.gz" >"$TMP/n3g.txt"
diff "$TMP/n3g.txt" "$TMP/n3.txt" || fail "cprof top -n 3 differs from pprof -nodecount=3"
ok "cprof top -n 3 = go tool pprof -top -nodecount=3"
head -8 "$TMP/n3.txt"

# --- refusals
head -c 300 "$TMP/go/cpu.pb.gz" >"$TMP/truncated.pb.gz"
printf 'not a profile at all' >"$TMP/garbage"
for f in truncated.pb.gz garbage; do
  if "$cprof" top "$TMP/$f" >"$TMP/out.txt" 2>&1; then fail "cprof top accepted $f"; fi
  expect_match "$TMP/out.txt" "^cprof top: .*$f: " "cprof top refuses $f with a message: $(head -1 "$TMP/out.txt")"
  if "$cprof" view -o "$TMP/x.html" "$TMP/$f" >"$TMP/out.txt" 2>&1; then fail "cprof view accepted $f"; fi
  [ ! -e "$TMP/x.html" ] || fail "cprof view wrote a page for $f"
  ok "cprof view refuses $f"
done
"$cprof" top -sample_index=nosuch "$TMP/go/heap.pb.gz" >"$TMP/out.txt" 2>&1 && fail "an unknown sample type was accepted"
expect_match "$TMP/out.txt" "no sample type 'nosuch' \\(it has: alloc_objects alloc_space inuse_objects inuse_space\\)" "an unknown sample type is refused, naming the ones there are"
"$cprof" view --help | grep '^SYNOPSIS' >/dev/null || fail "cprof view --help"
"$cprof" top --help | grep '^SYNOPSIS' >/dev/null || fail "cprof top --help"
ok "view and top have man-page style --help"

# --- cprof view: standalone pages
(cd "$TMP/go" && "$cprof" view cpu.pb.gz 2>/dev/null) && [ -s "$TMP/go/cpu.html" ] || fail "cprof view with the default output name"
ok "cprof view cpu.pb.gz wrote cpu.html"
"$cprof" view -o "$TMP/goheap.html" "$TMP/go/heap.pb.gz" 2>/dev/null || fail "cprof view Go heap"
"$cprof" view -o "$TMP/ccpu.html" "$TMP/c/cpu.pb.gz" 2>/dev/null || fail "cprof view cprof CPU"
"$cprof" view -o - "$TMP/c/heap.pb.gz" >"$TMP/cheap.html" 2>/dev/null || fail "cprof view to stdout"
expect_no_match "$TMP/ccpu.html" '(src|href)="(https?:)?//|@import|url\((https?:)?//' "the standalone page loads nothing from elsewhere"
# The page is the same file whatever build wrote it; its rendering is
# checked in the normal build, and the sanitizer builds check the
# command that writes it (above).
sanitized_build "$cprof" && skip_rest "the browser checks in Chromium (the page does not depend on the build: checked in the normal build)"
why=$(browser_missing)
[ -z "$why" ] || skip_rest "the browser checks ($why)"
"${cdp[@]}" "file://$TMP/go/cpu.html" "file://$TMP/goheap.html?sample=alloc_space" "file://$TMP/ccpu.html" \
  "file://$TMP/cheap.html?sample=alloc_space" --interact --screenshot "$TMP/view.png" >"$TMP/view.json" || fail "cdp.js on the views"
"${check[@]}" "$TMP/view.json" --index 0 --hot main.burnAlpha --sample cpu --interact || fail "Go CPU profile in cprof view"
"${check[@]}" "$TMP/view.json" --index 1 --hot main.allocate --sample alloc_space || fail "Go heap profile in cprof view"
"${check[@]}" "$TMP/view.json" --index 2 --hot burn_http --sample cpu || fail "cprof CPU profile in cprof view"
"${check[@]}" "$TMP/view.json" --index 3 --hot short_worker --sample alloc_space || fail "cprof heap profile in cprof view"
checks=$((checks + 4))
cp "$TMP/view.png" "$CPROFTEST_TMP/view_go_cpu.png"
ok "screenshot of Go's CPU profile in cprof view kept as $CPROFTEST_TMP/view_go_cpu.png"
finish
