#!/usr/bin/env bash
# Functions left by a tail call are put back: test/progs/nofp_tailcall.c,
# built -O2, ends section() in `jmp pthread_mutex_unlock`, outer() in
# `jmp heavy` and xalloc() in `jmp malloc`. The mutex profile must charge
# section as the unlocker (not its caller), the CPU profile must show heavy
# called by outer, and the heap profile xalloc, each as one more line of the
# caller's location (with the function's declaration line); a location
# reached without the tail call stays a location of its own, and ordinary
# calls get nothing added. Every tail line must be the target of the call
# instruction at its address (addr2line_check.py). Preloaded (calls through
# PLT stubs) and linked (direct calls).
source "$(dirname "$0")/lib.bash"
cprof=$CPROFTEST_BUILD/cprof
src=$CPROFTEST_SRC/test/progs/nofp_tailcall.c
checker=$CPROFTEST_SRC/test/e2e/addr2line_check.py
decl=$(grep -n '^NOIPA void section(void) {' "$src" | cut -d: -f1)
counted_unlock=$(awk '/^NOIPA void section_counted/ {on = 1} on && /pthread_mutex_unlock/ {print NR; exit}' "$src")
lock_line=$(awk '/^NOIPA void section\(void\)/ {on = 1} on && /pthread_mutex_lock/ {print NR; exit}' "$src")
outer_decl=$(grep -n '^NOIPA uint64_t outer' "$src" | cut -d: -f1)
xalloc_decl=$(grep -n '^NOIPA void \*xalloc' "$src" | cut -d: -f1)
export CPROF_MUTEX_FRACTION=1 CPROF_BLOCK_RATE=1 CPROF_HEAP_RATE=4096

# tail_jumps PROG: the program was built as the test needs.
tail_jumps() {
  objdump -d --no-show-raw-insn "$1" >"$TMP/dis.txt"
  local f t
  for f in "section:pthread_mutex_unlock" "outer:heavy" "xalloc:malloc"; do
    t=${f#*:}
    awk -v fn="<${f%%:*}>:" -v to="<$t(@plt)?>" '$2 == fn {on = 1; next} /^$/ {on = 0}
      on && $2 == "jmp" && $4 ~ "^" to "$" {found = 1} END {exit !found}' "$TMP/dis.txt" ||
      fail "$(basename "$1"): ${f%%:*} does not end in jmp $t"
  done
  checks=$((checks + 1))
  echo "ok: $(basename "$1"): section, outer and xalloc end in tail calls"
}

# check LABEL DIR: the profiles in DIR (cpu, heap, mutex, block .pb.gz and
# mutex.txt, Go's text).
check() {
  local label=$1 dir=$2 heap=${3:-1}
  for k in cpu heap mutex block; do
    [ "$k" = heap ] && [ "$heap" = 0 ] && continue
    pprof -raw -symbolize=none "$dir/$k.pb.gz" >"$TMP/$label.$k.raw"
  done

  # mutex: section is the unlocker, at its declaration line, under worker.
  pprof -top -lines -nodefraction=0 -sample_index=delay "$dir/mutex.pb.gz" >"$TMP/$label.mtop"
  expect_match "$TMP/$label.mtop" "^ *[0-9.]+(n|u|µ|m)?s +[0-9.]+% .* section [^ ]*nofp_tailcall\\.c:$decl( \\(inline\\))?\$" \
    "$label: mutex: section is the unlocker (nofp_tailcall.c:$decl, its declaration)"
  expect_match "$TMP/$label.mtop" "^ *[0-9.]+(n|u|µ|m)?s +[0-9.]+% .* section_counted [^ ]*nofp_tailcall\\.c:$counted_unlock\$" \
    "$label: mutex: section_counted's own unlock (line $counted_unlock)"
  pprof -traces -sample_index=delay "$dir/mutex.pb.gz" >"$TMP/$label.mtraces"
  grep -A1 -E '^ *[0-9.]+(n|u|µ|m)?s +section( \(inline\))?$' "$TMP/$label.mtraces" >"$TMP/$label.msection" || true
  grep -qE '^ +worker$' "$TMP/$label.msection" ||
    { cat "$TMP/$label.mtraces" >&2; fail "$label: mutex: section is not directly under worker"; }
  checks=$((checks + 1))
  echo "ok: $label: mutex: worker -> section"
  # Nothing is put above section_counted, whose unlock is no tail call,
  # nor above the lock calls of the block profile.
  python3 - "$TMP/$label.mutex.raw" "$TMP/$label.block.raw" <<'PY' ||
import re, sys
bad = []
for path in sys.argv[1:]:
    on, locs = False, []
    for line in open(path):
        if line.startswith("Locations"):
            on = True
        elif line.startswith("Mappings"):
            on = False
        elif on and re.match(r"^ +\d+: 0x", line):
            locs.append([line.strip()])
        elif on and line.strip() and locs:
            locs[-1].append(line.strip())
    for loc in locs:
        names = [re.sub(r"^\d+: 0x[0-9a-f]+ (M=\d+ )?", "", l).split(" ")[0] for l in loc]
        if "section_counted" in names and names[0] != "section_counted":
            bad.append(loc)
        if path.endswith("block.raw") and names and names[-1].startswith("section") and len(names) > 1:
            bad.append(loc)
for loc in bad:
    print("\n".join(loc))
sys.exit(1 if bad else 0)
PY
    fail "$label: a tail line on an ordinary call"
  checks=$((checks + 1))
  echo "ok: $label: no tail line on section_counted's unlock or the lock calls"
  pprof -top -lines -nodefraction=0 -sample_index=delay "$dir/block.pb.gz" >"$TMP/$label.btop"
  expect_match "$TMP/$label.btop" " section [^ ]*nofp_tailcall\\.c:$lock_line\$" "$label: block: section's own lock call (line $lock_line)"

  # cpu: heavy is called by outer, outer by main.
  pprof -peek '^heavy$' "$dir/cpu.pb.gz" >"$TMP/$label.peek" || true
  expect_match "$TMP/$label.peek" '^ *[0-9.]+(n|u|µ|m)?s +100% \| +outer( \(inline\))?$' "$label: cpu: all of heavy's samples under outer"
  pprof -peek '^outer$' "$dir/cpu.pb.gz" >"$TMP/$label.peek2" || true
  expect_match "$TMP/$label.peek2" '^ *[0-9.]+(n|u|µ|m)?s +100% \| +main$' "$label: cpu: outer under main"
  # main's call of outer: one location without the tail line (samples in
  # outer itself), one with it (samples in heavy), at the same address.
  python3 - "$TMP/$label.cpu.raw" "$outer_decl" <<'PY' ||
import re, sys
on, locs = False, []
for line in open(sys.argv[1]):
    if line.startswith("Locations"):
        on = True
    elif line.startswith("Mappings"):
        on = False
    elif on:
        m = re.match(r"^ +\d+: (0x[0-9a-f]+) (?:M=\d+ )?(.*)$", line)
        if m:
            locs.append((m.group(1), [m.group(2)]))
        elif line.strip() and locs:
            locs[-1][1].append(line.strip())
names = lambda ls: [l.split(" ")[0] for l in ls]
tail = [a for a, ls in locs if names(ls)[:1] == ["outer"] and names(ls)[1:] == ["main"] and
        re.search(r"nofp_tailcall\.c:%s s=" % sys.argv[2], ls[0])]
plain = [a for a, ls in locs if names(ls) == ["main"]]
both = set(tail) & set(plain)
print("with outer:", tail, "without:", plain)
sys.exit(0 if both else 1)
PY
    fail "$label: cpu: no address with locations both with and without outer"
  checks=$((checks + 1))
  echo "ok: $label: cpu: main's call of outer is two locations, with and without outer"

  # heap: xalloc, under keep.
  if [ "$heap" = 1 ]; then
    pprof -peek '^xalloc$' -sample_index=alloc_space "$dir/heap.pb.gz" >"$TMP/$label.hpeek" || true
    expect_match "$TMP/$label.hpeek" '^ *[0-9.]+[kMG]?B +100% \| +keep( \(inline\))?$' "$label: heap: xalloc under keep"
    pprof -top -lines -sample_index=alloc_space "$dir/heap.pb.gz" >"$TMP/$label.htop"
    expect_match "$TMP/$label.htop" " xalloc [^ ]*nofp_tailcall\\.c:$xalloc_decl( \\(inline\\))?\$" \
      "$label: heap: xalloc at its declaration line"
  fi

  # Go's text: the tail line first, at the unlock's pc, then worker's.
  expect_match "$dir/mutex.txt" $'^#\t0x[0-9a-f]+\t+section\\+0x[0-9a-f]+\t+[^\t]*nofp_tailcall\\.c:'"$decl"'$' \
    "$label: mutex debug=1: section's line"
  awk -F'\t+' '/^#\t/ {if (prev_pc == $2 && prev ~ /^section\+/ && $3 ~ /^worker\+/) ok = 1; prev_pc = $2; prev = $3}
    END {exit !ok}' "$dir/mutex.txt" ||
    { cat "$dir/mutex.txt" >&2; fail "$label: mutex debug=1: section is not followed by worker at the same pc"; }
  checks=$((checks + 1))
  echo "ok: $label: mutex debug=1: section then worker, same pc"

  # Every tail line is the target of the call at its address.
  local raws=("$TMP/$label.cpu.raw" "$TMP/$label.mutex.raw" "$TMP/$label.block.raw")
  [ "$heap" = 1 ] && raws+=("$TMP/$label.heap.raw")
  python3 "$checker" "${raws[@]}" >"$TMP/$label.check" ||
    { cat "$TMP/$label.check" >&2; fail "$label: locations differ from addr2line -i"; }
  grep -qE ' tail [1-9]' "$TMP/$label.check" || fail "$label: no tail line checked"
  checks=$((checks + 1))
  echo "ok: $label: as addr2line -i, every tail line a call's target ($(tail -1 "$TMP/$label.check"))"
}

# collect DIR: moves the profiles cprof extract wrote into DIR/KIND.pb.gz.
collect() {
  local dir=$1 f
  for f in "$dir"/x/*; do
    case $(basename "$f") in
      *.txt) mv "$f" "$dir/$(basename "$f" | cut -d- -f1).txt" ;;
      *) mv "$f" "$dir/$(basename "$f" | cut -d- -f1).pb.gz" ;;
    esac
  done
}

# Linked: calls into cprof's interposers are direct.
linked=$CPROFTEST_BUILD/test/progs/linked_tailcall
# ThreadSanitizer instruments every function's exit, so gcc emits no tail
# calls there: the programs have none for cprof to recover.
tsan_build "$linked" && skip_rest "no tail calls in a ThreadSanitizer build"
tail_jumps "$linked"
mkdir -p "$TMP/linked"
CPROF_DUMP=cpu,heap,mutex,block CPROF_DUMP_OUT="$TMP/linked.log" "$linked" 0.5 >/dev/null
CPROF_DUMP=mutex=debug=1 CPROF_DUMP_OUT="$TMP/linked.txt.log" "$linked" 0.5 >/dev/null
"$cprof" extract -o "$TMP/linked/x" "$TMP/linked.log" "$TMP/linked.txt.log" >/dev/null
collect "$TMP/linked"
heap=1
sanitized_build "$linked" && heap=0 && echo "skip: heap checks (a sanitizer runtime owns malloc)"
check linked "$TMP/linked" "$heap"

# Preloaded: the calls go through PLT stubs.
plain=$CPROFTEST_BUILD/test/progs/nofp_tailcall
tsan_build "$plain" && skip_rest "preloaded runs under TSan (see lib.bash)"
tail_jumps "$plain"
rt=$(preload_env "$plain" | sed 's#[^ ]*libcprof\.so##')
mkdir -p "$TMP/preloaded"
LD_PRELOAD="$rt" "$cprof" run --dump cpu,heap,mutex,block --dump-out "$TMP/pre.log" -- "$plain" 0.5 >/dev/null
LD_PRELOAD="$rt" "$cprof" run --dump mutex=debug=1 --dump-out "$TMP/pre.txt.log" -- "$plain" 0.5 >/dev/null
"$cprof" extract -o "$TMP/preloaded/x" "$TMP/pre.log" "$TMP/pre.txt.log" >/dev/null
collect "$TMP/preloaded"
check preloaded "$TMP/preloaded" "$heap"
finish
