#!/usr/bin/env bash
# Native code inside runtimes (docs/runtimes.md), with cprof preloaded by
# `cprof run` and an exit dump, as a user would profile them:
#   - node on a JSON-heavy loop, against perf --call-graph dwarf on the same
#     loop: V8 runs its builtins from a second mapping of /usr/bin/node, and
#     its JavaScript from anonymous memory. That mapping is in the profile,
#     its frames are named, and stacks go on through them and through the
#     JIT code: unnamed leaves within 2 points of perf's share, stacks that
#     pass through the builtins and go on above them within 5 points of
#     perf's (cprof's reach _start as well: perf's DWARF unwinding stops at
#     the first JIT frame);
#   - node --perf-basic-prof: JavaScript functions named from
#     /tmp/perf-PID.map, and not from a map that others may write;
#   - a Node addon and a Python extension module, built here from C with
#     -O2 and no frame-pointer flags: the hot C function has the runtime's
#     frames below it, down to the C library's start of main.
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
src=$CPROFTEST_SRC/test/progs/runtimes
lib=$CPROFTEST_BUILD/libcprof.so
if tsan_build "$lib"; then
  skip_rest "preloaded runs (the TSan build cannot preload, see lib.bash)"
fi
command -v node >/dev/null || fail "node is not installed (scripts/deps.sh installs nodejs)"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 is not installed"
# A sanitized library needs its runtime loaded first.
rt=$(preload_env "$CPROFTEST_BUILD/test/progs/plain_forks" | sed 's#[^ ]*libcprof\.so##')
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# profile NAME CMD...: runs CMD under cprof run with a CPU exit dump and
# leaves the profile in $TMP/NAME.pb.gz.
profile() {
  local name=$1
  shift
  rm -rf "$TMP/$name.d"
  env ${rt:+LD_PRELOAD="$rt"} "$cprof" run --dump cpu --dump-out "$TMP/$name.log" -- "$@" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" || { cat "$TMP/$name.err"; fail "$name: the run failed"; }
  "$cprof" extract -o "$TMP/$name.d" "$TMP/$name.log" >/dev/null 2>&1 || fail "$name: nothing to extract"
  mv "$TMP/$name.d"/cpu-*.pb.gz "$TMP/$name.pb.gz" || fail "$name: no CPU profile"
  # The perf map node --perf-basic-prof wrote, now read.
  rm -f "/tmp/perf-$(sed -n 's/^Pid: //p' "$TMP/$name.log" | head -1).map"
}

# cprof_stacks PROFILE: one line per trace of go tool pprof -traces,
# "WEIGHT_MS|leaf|caller|...|outermost".
cprof_stacks() {
  pprof -traces "$1" | awk '
    function flush() { if (n) print w "|" s; n = 0; s = "" }
    /^-----/ { flush(); next }
    /^ +[a-z_]+: / { next }
    /^ +[0-9.]+(ms|s|us|ns) +/ {
      flush(); v = $1; u = v; sub(/[a-z]+$/, "", v); sub(/^[0-9.]+/, "", u)
      w = v * (u == "s" ? 1000 : u == "us" ? 0.001 : u == "ns" ? 0.000001 : 1)
      l = $0; sub(/^ +[0-9.]+[a-z]+ +/, "", l); s = l; n = 1; next }
    n && NF { l = $0; sub(/^ +/, "", l); s = s "|" l; n++ }
    END { flush() }'
}

# perf_stacks DATA: the same from perf script, one sample weighing 1
# (without inline frames: perf finds them by running addr2line, which
# takes most of a minute here).
perf_stacks() {
  perf script --no-inline -i "$1" -F ip,sym,dso 2>/dev/null | awk '
    function flush() { if (n) print "1|" s; n = 0; s = "" }
    !NF { flush(); next }
    { l = $0; sub(/^[ \t]*[0-9a-f]+ /, "", l); sub(/ \([^()]*\)$/, "", l)
      s = n ? s "|" l : l; n++ }
    END { flush() }'
}

# shares: "A B C D" of a stacks stream, in % of the weight: A unnamed
# leaves; B stacks through a Builtins_ frame; C of those, the ones that go
# on above the outermost; D of those, the ones that reach _start.
shares() {
  awk -F'|' '{
      t += $1
      if ($2 ~ /^(\[unknown\]|\[anon\]|<unknown>|0x[0-9a-f]+)$/) u += $1
      b = 0; for (i = 2; i <= NF; i++) if ($i ~ /^Builtins_/) b = i
      if (b) { bt += $1; if (b < NF) bo += $1; if ($NF ~ /^_start/) bs += $1 }
    }
    END { if (!t) t = 1; d = bt ? bt : 1
          printf "%.1f %.1f %.1f %.1f\n", 100 * u / t, 100 * bt / t, 100 * bo / d, 100 * bs / d }'
}

# reach FUNC: the share of FUNC's weight whose stacks reach the C
# library's call of main.
reach() {
  awk -F'|' -v f="$1" '$2 == f { t += $1; for (i = 3; i <= NF; i++) if ($i == "__libc_start_call_main") { r += $1; break } }
    END { printf "%.1f\n", t ? 100 * r / t : 0 }'
}

# native NAME FRAMES WHAT: in profile NAME, 80% or more of hot_kernel's
# samples have stacks down to the C library's call of main, and one of
# them has, below hot_kernel and hot, frames matching FRAMES (WHAT).
native() {
  local name=$1 frames=$2 what=$3 r
  cprof_stacks "$TMP/$name.pb.gz" >"$TMP/$name.stacks"
  r=$(reach hot_kernel <"$TMP/$name.stacks")
  echo "$name: ${r}% of hot_kernel's samples reach __libc_start_call_main"
  awk -v r="$r" 'BEGIN { exit !(r >= 80) }' || fail "$name: only ${r}% of hot_kernel's stacks reach main"
  grep -q "^[0-9.]*|hot_kernel|hot|$frames" "$TMP/$name.stacks" ||
    fail "$name: no stack of hot_kernel passes through $what"
  echo "ok: $name: the hot C function, below it $what and main"
  checks=$((checks + 1))
}

# 1. node on JSON, cprof.
export NODE_JSON_MAPS=$TMP/node.maps
profile node node "$src/node_json.js" 2
unset NODE_JSON_MAPS
# The second mapping: one whose file offset lies inside another
# executable mapping's range of the same file.
starts=() ends=() offs=()
while read -r range perms off _ _ path; do
  [[ $perms == *x* && $path == */node ]] || continue
  starts+=($((16#${range%-*}))) ends+=($((16#${range#*-}))) offs+=($((16#$off)))
done <"$TMP/node.maps"
second=
for j in "${!starts[@]}"; do
  for i in "${!starts[@]}"; do
    if [ "$i" != "$j" ] && [ "${offs[j]}" -gt "${offs[i]}" ] &&
      [ "${offs[j]}" -lt $((offs[i] + ends[i] - starts[i])) ]; then
      second=$(printf '0x%x 0x%x' "${starts[j]}" "${offs[j]}")
    fi
  done
done
pprof -raw "$TMP/node.pb.gz" >"$TMP/node.raw"
if [ -n "$second" ]; then
  start=${second% *} off=${second#* }
  expect_match "$TMP/node.raw" "^ *[0-9]+: $start/0x[0-9a-f]+/$off /.*/node" \
    "node's second mapping of its code (at $start, file offset $off) is a mapping of the profile"
else
  skip_check "this node maps its code once (no second mapping of its executable)"
fi
expect_match "$TMP/node.raw" '^ *[0-9]+: 0x[0-9a-f]+/0x[0-9a-f]+/0x0 //anon' \
  "node's JIT code is a mapping of the profile (//anon)"
cprof_stacks "$TMP/node.pb.gz" >"$TMP/node.stacks"
read -r c_unk c_bt c_on c_start < <(shares <"$TMP/node.stacks")
echo "cprof: unnamed leaves ${c_unk}%; ${c_bt}% of stacks through builtins, ${c_on}% of those go on above them, ${c_start}% reach _start"
# The builtins are named only where node keeps its symbol table (a
# stripped build names none): read from the binary and its libnode.
node_bin=$(readlink -f "$(type -P node)")
builtins_named=$(readelf -Ws "$node_bin" $(ldd "$node_bin" | awk '/libnode/ {print $3}') 2>/dev/null |
  grep -c ' Builtins_JSEntry$' || true)
if [ "$builtins_named" -gt 0 ]; then
  awk -v s="$c_bt" 'BEGIN { exit !(s >= 50) }' || fail "only ${c_bt}% of node's stacks pass through a Builtins_ frame"
  awk -v s="$c_start" 'BEGIN { exit !(s >= 90) }' || fail "only ${c_start}% of the stacks through builtins reach _start"
  checks=$((checks + 2))
else
  skip_check "this node has no symbol Builtins_JSEntry (stripped): its builtins cannot be told by name"
fi

# 2. The same under perf.
if perf record -q -e cpu-clock -F 99 -o "$TMP/probe.data" -- true >/dev/null 2>&1; then
  perf record -q -e cpu-clock -F 99 --call-graph dwarf -o "$TMP/perf.data" -- \
    node "$src/node_json.js" 2 >/dev/null 2>&1 || fail "perf record node"
  perf_stacks "$TMP/perf.data" >"$TMP/perf.stacks"
  read -r p_unk p_bt p_on p_start < <(shares <"$TMP/perf.stacks")
  echo "perf: unnamed leaves ${p_unk}%; ${p_bt}% of stacks through builtins, ${p_on}% of those go on above them, ${p_start}% reach _start"
  awk -v a="$c_unk" -v b="$p_unk" 'BEGIN { d = a - b; exit !(d <= 2 && d >= -2) }' ||
    fail "unnamed leaves: cprof ${c_unk}%, perf ${p_unk}% (more than 2 points apart)"
  echo "ok: unnamed leaves within 2 points of perf's (${c_unk}% and ${p_unk}%)"
  checks=$((checks + 1))
  if [ "$builtins_named" -gt 0 ]; then
    awk -v a="$c_on" -v b="$p_on" 'BEGIN { exit !(a >= b - 5) }' ||
      fail "stacks going on above the builtins: cprof ${c_on}%, perf ${p_on}% (more than 5 points under)"
    echo "ok: stacks through the builtins that go on above them: cprof ${c_on}%, perf ${p_on}%"
    checks=$((checks + 1))
  fi
else
  skip_check "perf record cannot run here (perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)): no comparison with perf"
fi

# 3. node --perf-basic-prof: JavaScript names from the perf map.
profile jsnames node --perf-basic-prof "$src/node_json.js" 2
pprof -top "$TMP/jsnames.pb.gz" >"$TMP/jsnames.top"
# Which functions V8 compiles on their own, and which it inlines into the
# loop's, depends on the run: any function of node_json.js will do.
expect_match "$TMP/jsnames.top" ' JS:[~^*]?[A-Za-z]* .*node_json\.js:[0-9]+:[0-9]+$' "JavaScript functions are named from /tmp/perf-PID.map, with their file and line"
# A map that others may write is not read: node writes its map, and the
# test makes it group-writable while node runs.
( env ${rt:+LD_PRELOAD="$rt"} "$cprof" run --dump cpu --dump-out "$TMP/unsafe.log" -- \
    node --perf-basic-prof "$src/node_json.js" 2 >"$TMP/unsafe.out" 2>&1 ) &
runner=$!
track "$runner"
for _ in $(seq 50); do
  npid=$(pgrep -n -f "node --perf-basic-prof $src/node_json.js" || true)
  [ -n "$npid" ] && [ -f "/tmp/perf-$npid.map" ] && break
  sleep 0.1
done
[ -n "$npid" ] && [ -f "/tmp/perf-$npid.map" ] || fail "node wrote no /tmp/perf-PID.map"
chmod g+w "/tmp/perf-$npid.map"
wait "$runner" || { cat "$TMP/unsafe.out"; fail "the run with a group-writable perf map failed"; }
rm -f "/tmp/perf-$npid.map"
"$cprof" extract -o "$TMP/unsafe.d" "$TMP/unsafe.log" >/dev/null 2>&1 || fail "unsafe: nothing to extract"
pprof -top "$TMP"/unsafe.d/cpu-*.pb.gz >"$TMP/unsafe.top"
expect_no_match "$TMP/unsafe.top" ' JS:' "a perf map that others may write is not read"
# CPROF_PERF_MAP=off: no names either.
CPROF_PERF_MAP=off profile nomap node --perf-basic-prof "$src/node_json.js" 2
pprof -top "$TMP/nomap.pb.gz" >"$TMP/nomap.top"
expect_no_match "$TMP/nomap.top" ' JS:' "CPROF_PERF_MAP=off reads no perf map"

# A bad value: one line, and no reading.
env ${rt:+LD_PRELOAD="$rt"} CPROF_PERF_MAP=maybe "$cprof" run --dump cpu --dump-out "$TMP/bad.log" -- true 2>"$TMP/bad.err" ||
  fail "a bad CPROF_PERF_MAP stopped the program"
[ "$(grep -c 'CPROF_PERF_MAP' "$TMP/bad.err")" -eq 1 ] || { cat "$TMP/bad.err"; fail "a bad CPROF_PERF_MAP did not give exactly one line"; }
expect_match "$TMP/bad.err" '^cprof: CPROF_PERF_MAP="maybe": not on or off; JIT code stays unnamed$' "a bad CPROF_PERF_MAP gives one quoted line"

# 4. A Node addon, built as addons are (-O2, no frame-pointer flags).
cc -O2 -shared -fPIC -o "$TMP/hot.node" "$src/napi_hot.c" || fail "cannot build the addon"
profile addon node "$src/node_json.js" 2 "$TMP/hot.node"
if [ "$builtins_named" -gt 0 ]; then
  native addon '.*Builtin.*|node::Start' "V8's builtins and node::Start"
else
  native addon '.*' "node's frames (unnamed: node is stripped)"
fi

# 5. A Python extension module, built as they are.
if py_inc=$(/usr/bin/python3-config --includes 2>/dev/null) && py_ext=$(/usr/bin/python3-config --extension-suffix 2>/dev/null); then
  # shellcheck disable=SC2086 # the include flags are words
  cc -O2 -shared -fPIC $py_inc -o "$TMP/pyext_hot$py_ext" "$src/pyext_hot.c" || fail "cannot build the extension module"
  cat >"$TMP/hot.py" <<'EOF'
import sys, time
sys.path.insert(0, sys.argv[1])
import pyext_hot
def work(seconds):
    s, end = 0, time.time() + seconds
    while time.time() < end:
        s += pyext_hot.hot(2000000)
    return s
print("pyext:", work(float(sys.argv[2])) > 0)
EOF
  profile python /usr/bin/python3 "$TMP/hot.py" "$TMP" 2
  native python '.*_PyEval_EvalFrameDefault.*|Py_BytesMain|' "the interpreter's loop and Py_BytesMain"
else
  fail "python3-config is missing (scripts/deps.sh installs python3-dev)"
fi
finish
