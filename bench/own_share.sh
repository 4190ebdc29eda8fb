#!/usr/bin/env bash
# Where a profiler's own time goes in one program, by perf samples: the
# command runs under each configuration in turn (RUNS rounds, alternating),
# recorded by `perf record -g` at 4999 Hz, and each sample that lands in a
# profiler's code is put in one part:
#   exit dump        cprof's dump at exit (from dump_at_exit's entry to its
#                    return, by two uprobes: the whole of it, libdw, zlib
#                    and the kernel's part included)
#   fast paths       cprof's malloc family taking no sample
#   heap samples     a sampled allocation (walk, stack table, live set)
#   CPU samples      cprof's SIGPROF handler
#   threads          cprof's own threads (cprof-*)
#   other            anything else in libcprof, libdw, libelf or zlib
#   gperftools       libprofiler and libunwind, anywhere
#   call-through     the interposer that only calls through to glibc
# and every other sample is the program's. Each part is printed as ms a run
# and as a share of the program's own samples. CPU time measured by wait4
# moves by several percent between runs of a seconds-long program on a
# shared machine; samples attributed in the same run do not.
#   bench/own_share.sh BUILD_DIR [RUNS [-- CMD ARGS...]]
# RUNS defaults to 3, the command to cc1plus -O2 on bench/stl_heavy.cc
# (preprocessed first).
# Needs perf with uprobes (root); the configurations are cprof run --dump
# cpu,heap, cprof run --dump cpu, gperftools' CPUPROFILE and the
# call-through interposer, each against nothing else: there is no bare row,
# a share is of the program's samples under that configuration.
set -euo pipefail
build=${1:-build}
runs=${2:-3}
shift $(($# < 2 ? $# : 2))
[ "${1:-}" = -- ] && shift
lib=$(readlink -f "$build/libcprof.so")
cprof=$(readlink -f "$build/cprof")
floor=$(readlink -f "$build/bench/libpassthrough_malloc.so")
profiler=/usr/lib/$(gcc -print-multiarch)/libprofiler.so.0
command -v perf >/dev/null || { echo "own_share: n/a (perf is missing)"; exit 0; }
tmp=$(mktemp -d)
# Event names are unique across perf's groups: these carry the pid.
din=own_share_in_$$ dout=own_share_out_$$
trap 'perf probe -q -d "probe_libcprof:$din" -d "probe_libcprof:${dout}__return" 2>/dev/null || true; rm -rf "$tmp"' EXIT
perf probe -q -x "$lib" -a "$din=dump_at_exit" \
  -a "$dout=dump_at_exit%return" >/dev/null 2>&1 ||
  { echo "own_share: n/a (perf probe on $lib failed: root and uprobes needed)"; exit 0; }
probes=(-e "probe_libcprof:$din" -e "probe_libcprof:${dout}__return")
if [ $# = 0 ]; then
  g++ -std=c++17 -E "$(dirname "$0")/stl_heavy.cc" -o "$tmp/stl.ii"
  set -- "$(g++ -print-prog-name=cc1plus)" -quiet -std=c++17 -O2 "$tmp/stl.ii" \
    -o "$tmp/stl.s"
fi
cache=$tmp/cache
mkdir -m 700 "$cache"
export CPROF_DEBUG_CACHE=$cache
configs=("cpu,heap" "cpu" "gperftools" "call-through")
[ -r "$profiler" ] || configs=("cpu,heap" "cpu" "call-through")

run() { # run CONFIG OUT CMD ARGS...
  local c=$1 out=$2
  shift 2
  case $c in
    cpu,heap|cpu)
      perf record -q -g -F 4999 -e cpu-clock "${probes[@]}" -o "$out" -- \
        "$cprof" run --dump "$c" --dump-out "$tmp/dump.log" -- "$@" ;;
    gperftools)
      LD_PRELOAD=$profiler CPUPROFILE=$tmp/gp.prof \
        perf record -q -g -F 4999 -e cpu-clock -o "$out" -- "$@" ;;
    call-through)
      LD_PRELOAD=$floor perf record -q -g -F 4999 -e cpu-clock -o "$out" -- "$@" ;;
  esac
}

# A first run of each fills the debug cache, as on any machine after its
# first profiled run.
for c in "${configs[@]}"; do
  run "$c" "$tmp/warm.data" "$@" >/dev/null 2>&1
done
for r in $(seq "$runs"); do
  order=("${configs[@]}")
  if [ $((r % 2)) = 0 ]; then
    order=()
    for ((i = ${#configs[@]} - 1; i >= 0; i--)); do order+=("${configs[$i]}"); done
  fi
  for c in "${order[@]}"; do
    run "$c" "$tmp/$c.$r.data" "$@" >/dev/null 2>&1
    perf script -i "$tmp/$c.$r.data" -F comm,tid,time,event,ip,sym,dso \
      >"$tmp/$c.$r.txt" 2>/dev/null
  done
done

python3 - "$tmp" "$runs" "${configs[@]}" <<'EOF'
import re, sys
tmp, runs, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
RATE = 4999.0
FAST = {"malloc", "free", "calloc", "realloc", "free_unaligned", "free_slow",
        "cprof__own_free", "posix_memalign", "memalign", "aligned_alloc",
        "valloc", "pvalloc", "malloc_usable_size"}
HEAP = {"cprof__heap_record", "malloc_slow", "calloc_slow", "cprof__heap_take"}
PARTS = ["exit dump", "fast paths", "heap samples", "CPU samples", "threads",
         "other", "gperftools", "call-through"]
frame = re.compile(r"\s*[0-9a-f]+ (.*) \((.*)\)$")

def parts_of(path):
    samples = []
    for blk in open(path).read().split("\n\n"):
        lines = [l for l in blk.splitlines() if l.strip()]
        if not lines: continue
        h = lines[0].split()
        try: t = float(h[2].rstrip(":"))
        except (IndexError, ValueError): continue
        fr = [(m.group(1).split("+")[0], m.group(2).rsplit("/", 1)[-1])
              for m in map(frame.match, lines[1:]) if m]
        samples.append((h[0], h[1], t, h[3], fr))
    t0 = next((s[2] for s in samples if "own_share_in" in s[3]), None)
    t1 = next((s[2] for s in samples if "own_share_out" in s[3]), None)
    tid0 = next((s[1] for s in samples if "own_share_in" in s[3]), None)
    count = dict.fromkeys(PARTS + ["program"], 0)
    for comm, tid, t, ev, fr in samples:
        if "cpu-clock" not in ev or not fr: continue
        syms = {s for s, _ in fr}
        dsos = [d for _, d in fr]
        leaf_sym, leaf_dso = fr[0]
        if comm.startswith("cprof-"): p = "threads"
        elif t0 is not None and t1 is not None and tid == tid0 and t0 <= t <= t1:
            p = "exit dump"
        elif "on_sigprof" in syms: p = "CPU samples"
        elif syms & HEAP: p = "heap samples"
        elif "libcprof" in leaf_dso and leaf_sym in FAST: p = "fast paths"
        elif any("libprofiler" in d or "libunwind" in d for d in dsos):
            p = "gperftools"
        elif "passthrough" in leaf_dso: p = "call-through"
        elif any("libcprof" in d for d in dsos) or \
                leaf_dso.startswith(("libdw", "libelf", "libz")):
            p = "other"
        else: p = "program"
        count[p] += 1
    return count

tot = {c: dict.fromkeys(PARTS + ["program"], 0) for c in configs}
for c in configs:
    for r in range(1, runs + 1):
        for k, v in parts_of("%s/%s.%d.txt" % (tmp, c, r)).items():
            tot[c][k] += v
print("ms a run (share of the program's own samples), %d runs at 4999 Hz" % runs)
print("%-14s" % "" + "".join("%20s" % c for c in configs))
for p in PARTS + ["total"]:
    cells = []
    for c in configs:
        v = sum(tot[c][k] for k in PARTS) if p == "total" else tot[c][p]
        share = 100.0 * v / max(tot[c]["program"], 1)
        cells.append("%9.1f (%5.2f%%)" % (v / runs / RATE * 1000, share) if v else "%20s" % "-")
    if any(c.strip() != "-" for c in cells) or p == "total":
        print("%-14s" % p + "".join("%20s" % c for c in cells))
print("%-14s" % "program" + "".join("%13.0f ms   " % (tot[c]["program"] / runs / RATE * 1000) for c in configs))
EOF
