#!/usr/bin/env bash
# What a short life costs: the CPU time each profiler adds to programs that
# run for milliseconds (and, with SHORT_LIFE_CC1=1, a 4-5 s compile),
# alternating every configuration in each round, as the median over ROUNDS
# of (CPU with the profiler - CPU bare) in the same round. CPU is the
# child's user + system time from wait4, the profiler's own work included.
#   bench/short_life.sh BUILD_DIR [ROUNDS]   SHORT_LIFE_CC1=1 adds cc1plus
# Columns:
#   preload     libcprof.so preloaded, nothing asked (the heap sampler on)
#   dump cpu    cprof run --dump cpu (the exit dump written)
#   cpu,heap    cprof run --dump cpu,heap
#   (cold)      the same with CPROF_DEBUG_CACHE=off: what a machine pays
#               before the first dump has filled the debug cache
#   gperftools  libprofiler.so with CPUPROFILE (its profile written at exit)
#   jemalloc    jemalloc with prof:true against jemalloc without it
#   floor       an interposer that only calls through to glibc's malloc
set -euo pipefail
build=${1:-build}
rounds=${2:-9}
lib=$(readlink -f "$build/libcprof.so")
cprof=$(readlink -f "$build/cprof")
floor=$(readlink -f "$build/bench/libpassthrough_malloc.so")
multiarch=$(gcc -print-multiarch)
profiler=/usr/lib/$multiarch/libprofiler.so.0
jemalloc=/usr/lib/$multiarch/libjemalloc.so.2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cache=$tmp/debug-cache

printf '#include <iostream>\nint main() { std::cout << "hello\\n"; }\n' >"$tmp/hello.cc"
g++ -O2 -o "$tmp/hello" "$tmp/hello.cc"
programs=("true:/bin/true" "hello C++:$tmp/hello" "ls -R /usr/include:ls -R /usr/include")
if [ "${SHORT_LIFE_CC1:-0}" = 1 ]; then
  cc1=$(g++ -print-prog-name=cc1plus)
  g++ -std=c++17 -E "$(dirname "$0")/stl_heavy.cc" -o "$tmp/stl.ii"
  programs+=("cc1plus -O2, STL:$cc1 -quiet -std=c++17 -O2 $tmp/stl.ii -o $tmp/stl.s")
fi

python3 - "$rounds" "$lib" "$cprof" "$floor" "$profiler" "$jemalloc" "$tmp" "$cache" "${programs[@]}" <<'PY'
import os, shlex, statistics, sys

rounds = int(sys.argv[1])
lib, cprof, floor, profiler, jemalloc, tmp, cache = sys.argv[2:9]
programs = [p.split(":", 1) for p in sys.argv[9:]]
base_env = dict(os.environ)
for k in list(base_env):
    if k.startswith("CPROF_") or k in ("LD_PRELOAD", "MALLOC_CONF", "CPUPROFILE"):
        del base_env[k]
base_env["CPROF_DEBUG_CACHE"] = cache

def run(argv, env):
    # posix_spawn (vfork underneath): the child's CPU is the program's,
    # not a copy of this interpreter's address space.
    fa = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
          (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
    pid = os.posix_spawnp(argv[0], argv, env, file_actions=fa)
    _, status, ru = os.wait4(pid, 0)
    if status != 0:
        raise SystemExit("short_life: %s failed (status %d)" % (" ".join(argv), status))
    return ru.ru_utime + ru.ru_stime

def configs(cmd):
    dump = os.path.join(tmp, "dump.log")
    have = lambda p: os.path.exists(p)
    c = {"bare": (cmd, {})}
    c["preload"] = (cmd, {"LD_PRELOAD": lib})
    c["dump cpu"] = ([cprof, "run", "--dump", "cpu", "--dump-out", dump, "--"] + cmd, {})
    c["cpu,heap"] = ([cprof, "run", "--dump", "cpu,heap", "--dump-out", dump, "--"] + cmd, {})
    c["(cold)"] = ([cprof, "run", "--dump", "cpu,heap", "--dump-out", dump, "--"] + cmd,
                   {"CPROF_DEBUG_CACHE": "off"})
    if have(profiler):
        c["gperftools"] = (cmd, {"LD_PRELOAD": profiler, "CPUPROFILE": os.path.join(tmp, "gp.prof")})
    if have(jemalloc):
        c["je"] = (cmd, {"LD_PRELOAD": jemalloc})
        c["jemalloc"] = (cmd, {"LD_PRELOAD": jemalloc, "MALLOC_CONF": "prof:true,prof_prefix:" + os.path.join(tmp, "je")})
    if have(floor):
        c["floor"] = (cmd, {"LD_PRELOAD": floor})
    return c

cols = ["preload", "dump cpu", "cpu,heap", "(cold)", "gperftools", "jemalloc", "floor"]
print("machine: %d CPUs, load %s; %d rounds, configurations alternating; "
      "added CPU in ms (median of per-round differences)" %
      (os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3]), rounds))
print("%-22s %9s " % ("program", "bare ms") + " ".join("%10s" % c for c in cols))
for name, cmdline in programs:
    cmd = shlex.split(cmdline)
    cf = configs(cmd)
    for k, (argv, extra) in cf.items():  # warm-up: fills the debug cache
        run(argv, dict(base_env, **extra))
    samples = {k: [] for k in cf}
    for r in range(rounds):
        keys = list(cf)
        if r % 2:
            keys.reverse()
        for k in keys:
            argv, extra = cf[k]
            samples[k].append(run(argv, dict(base_env, **extra)))
    bare = samples["bare"]
    def added(k, ref="bare"):
        if k not in samples:
            return "n/a"
        d = [a - b for a, b in zip(samples[k], samples[ref])]
        return "%+.1f" % (1000 * statistics.median(d))
    row = []
    for c in cols:
        row.append(added(c, "je") if c == "jemalloc" else added(c))
    print("%-22s %9.1f " % (name, 1000 * statistics.median(bare)) + " ".join("%10s" % v for v in row))
PY
echo "(jemalloc: prof:true against jemalloc without it; (cold): --dump cpu,heap with the debug cache off)"
