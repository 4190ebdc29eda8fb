#!/usr/bin/env bash
# Installs the Debian packages cprof needs to build, test and demo, but only
# those that are missing (checked with dpkg -s), so a machine that has them
# is not touched and a fresh one gets everything.
set -euo pipefail

packages=(
  build-essential cmake pkg-config   # the build
  zlib1g-dev libdw-dev libelf-dev    # gzip, symbolization, build IDs
  libmicrohttpd-dev                  # the /debug/pprof/ HTTP endpoint
  libcurl4-openssl-dev               # pushing to a profiling backend
  python3                            # the test suite's Pyroscope-style receiver
  python3-dev                        # building a Python extension module (e2e/runtimes)
  clang libclang-rt-14-dev           # libFuzzer targets
  golang-go                          # go tool pprof, the reference reader
  curl                               # fetching from the endpoint in tests
  procps iproute2                    # pgrep (e2e/nginx*), ss (e2e/tree)
  chromium                           # loading the endpoint's pages in tests
  nodejs                             # driving Chromium over its DevTools protocol; e2e/runtimes
  wrk                                # the endpoint's load figure (bench/http_load.sh)
  sqlite3                            # a distribution's program, profiled whole (e2e/unwind)
  strace                             # exact system-call checks (e2e/symbolize_debuglink, extract_names)
  libjemalloc2 libgoogle-perftools4  # C++ heap under other allocators (e2e/heap_allocators)
  nginx-light                        # a pre-fork server, profiled whole (e2e/nginx)
  php-cli linux-perf                 # a program that owns SIGPROF, against perf (e2e/signals_php)
  openssl                            # a distribution's program whose profile holds no cprof names (e2e/own_frames)
)

# `deps.sh bench` adds the profilers the benchmarks compare cprof with.
if [ "${1:-}" = bench ]; then
  packages+=(heaptrack redis-server redis-tools)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
