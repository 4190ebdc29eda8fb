#!/usr/bin/env bash
# A pre-fork server is one service: test/progs/plain_forks in server mode
# (a master that idles while two forked workers burn CPU and allocate),
# under `cprof run --http`. The master's endpoint must answer for the
# whole tree:
#   - /debug/pprof/processes lists the master and both workers;
#   - profile?seconds=2: at least 90% of the samples in the workers' pids
#     (label pid), each worker's own function present, the CPU total within
#     10% of what /proc/PID/stat counts for the workers over the window:
#     between that count over the request scaled to the window's 2 s and
#     the whole count over the request (its wall time exceeds the window
#     by the time the workers take to answer);
#   - ?pid=WORKER: that worker alone;
#   - allocs names all three processes; goroutine?debug=2 has a section
#     per worker;
#   - a worker killed (SIGKILL) during a 3 s window: the answer comes
#     within 3 + 2 s and its comment names the lost worker;
#   - a worker that exits normally during a window, and one started
#     during a window, are in it for the time they lived;
#   - processes?dump=1 without dumps configured: 409;
#   - the tree's channels are socketpairs: the master listens on no unix
#     socket (nothing another user could connect to);
#   - with CPROF_PUSH_URL set too, a loopback Pyroscope receiver gets a
#     series for each worker, labelled with its pid, its CPU windows
#     aligned with the master's and holding its function, and heap
#     snapshots; the worker killed mid-window is named once on stderr.
#     The pusher's windows run in the workers beside the endpoint's.
source "$(dirname "$0")/lib.bash"
# A request that hangs fails its own step, which the message names, and
# not the whole test at ctest's timeout.
curl() { command curl --max-time 60 "$@"; }
cprof=$CPROFTEST_BUILD/cprof
plain=$CPROFTEST_BUILD/test/progs/plain_forks
if [[ $(ldd "$plain") == *libasan* ]]; then
  # gcc's ASan runtime takes no lock of its allocator around fork: a
  # worker forked while another thread of the master frees inherits the
  # allocator's locks held, and hangs at its first free or at its exit's
  # leak check (seen under gdb: a worker's thread spinning on ASan's
  # quarantine lock, its main thread waiting in LSan's allocator lock,
  # until ctest's timeout). The plain build runs this test.
  skip_rest "gcc's ASan allocator does not survive a fork beside a freeing thread"
fi
tree_prepare "$plain"
rt=$(preload_env "$plain" | sed 's#[^ ]*libcprof\.so##')

start_receiver "$TMP/push" ok
port=$(free_port)
url=http://127.0.0.1:$port/debug/pprof
CPROF_PUSH_URL="http://127.0.0.1:$rport" CPROF_PUSH_INTERVAL=1 CPROF_PUSH_APP=treetest \
LD_PRELOAD="$rt" "$cprof" run --http "127.0.0.1:$port" -- "$plain" server 30 >"$TMP/server.out" 2>"$TMP/server.err" &
runner=$!
track "$runner"
for _ in $(seq 100); do
  [ "$(grep -c '^worker' "$TMP/server.out" 2>/dev/null)" = 2 ] && break
  sleep 0.1
done
master=$(awk '$1 == "master" { print $2 }' "$TMP/server.out")
w0=$(awk '$1 == "worker0" { print $2 }' "$TMP/server.out")
w1=$(awk '$1 == "worker1" { print $2 }' "$TMP/server.out")
[ -n "$master" ] && [ -n "$w0" ] && [ -n "$w1" ] || { cat "$TMP/server.out" "$TMP/server.err"; fail "the server did not start a master and two workers"; }
track "$w0"
track "$w1"
echo "master $master, workers $w0 $w1"

tree_wait "$url" "$w0" "$w1"
expect_match "$TMP/processes" "^$master	.*	root	" "processes: the master is the root"
expect_match "$TMP/processes" "^$w0	$master	.*	member	" "processes: worker $w0 is a member, its parent the master"
expect_match "$TMP/processes" "^$w1	$master	.*	member	" "processes: worker $w1 is a member"

curl -sf "$url/" >"$TMP/index.html" || fail "the index failed"
expect_match "$TMP/index.html" '^<a href="processes">3 processes</a>: this one and the 2 it forked' "the index names the tree's processes"


before=$(($(stat_cpu_ms "$w0") + $(stat_cpu_ms "$w1")))
t0=$(date +%s%N)
curl -sf -o "$TMP/cpu.pb.gz" "$url/profile?seconds=2" || fail "profile?seconds=2 failed"
t1=$(date +%s%N)
after=$(($(stat_cpu_ms "$w0") + $(stat_cpu_ms "$w1")))
pprof -top "$TMP/cpu.pb.gz" >"$TMP/cpu.top"
total_ms=$(sed -nE 's/^Duration: .*Total samples = ([0-9.]+)(m?s) .*/\1 \2/p' "$TMP/cpu.top" | awk '{ print ($2 == "s" ? $1 * 1000 : $1) }')
s0=$(pid_share "$TMP/cpu.pb.gz" "$w0")
s1=$(pid_share "$TMP/cpu.pb.gz" "$w1")
wall_ms=$(((t1 - t0) / 1000000))
proc_ms=$((after - before))
want_ms=$(awk -v p="$proc_ms" -v w="$wall_ms" 'BEGIN { printf "%d", p * 2000 / w }')
echo "window: cprof total ${total_ms} ms; workers' shares ${s0:-0}% + ${s1:-0}%; /proc: $proc_ms ms over $wall_ms ms of wall time, $want_ms ms for the 2 s window"
awk -v a="${s0:-0}" -v b="${s1:-0}" 'BEGIN { exit !(a + b >= 90) }' ||
  { cat "$TMP/cpu.top"; fail "the workers hold ${s0:-0}% + ${s1:-0}% of the samples, not 90% or more"; }
checks=$((checks + 1))
echo "ok: the master's endpoint profiles its workers"
expect_match "$TMP/cpu.top" ' alpha_worker_burn$' "worker 0's function is in the tree's profile"
expect_match "$TMP/cpu.top" ' beta_worker_burn$' "worker 1's function is in the tree's profile"
# 10% as the issue asks; under a sanitizer 15%: cprof's threads in the
# workers take long enough there writing their answers, inside the
# request's time, to slow the main threads the comparison scales (13%
# seen), as in nginx_tree.
# The window's CPU lies between the request's count scaled to 2 s (CPU
# spread evenly over the request) and the request's whole count (all of
# it in the window): under AddressSanitizer the request took 2,961 ms,
# the workers' main threads slower in its last second, and the window held
# 1,570 ms of the 2,010 ms counted, 16% above the scaled 1,357 ms.
tol=10
sanitized_build "$plain" && tol=15
awk -v c="$total_ms" -v w="$want_ms" -v p="$proc_ms" -v t="$tol" 'BEGIN { exit !(w > 0 && c >= (1 - t / 100) * w && c <= (1 + t / 100) * (p > w ? p : w)) }' ||
  fail "the tree's CPU total ${total_ms} ms is not within $tol% of the workers' ${want_ms}-${proc_ms} ms"
checks=$((checks + 1))
echo "ok: the tree's CPU total is within $tol% of /proc's"

curl -sf -o "$TMP/w0.pb.gz" "$url/profile?seconds=1&pid=$w0" || fail "profile?pid=$w0 failed"
pprof -raw "$TMP/w0.pb.gz" >"$TMP/w0.raw"
pids=$(sed -nE 's/.*pid:\[([0-9]+)\].*/\1/p' "$TMP/w0.raw" | sort -u | tr '\n' ' ')
echo "?pid=$w0: the pids in its samples: ${pids:-none}"
[ "$pids" = "$w0 " ] || [ -z "$pids" ] || fail "?pid=$w0 has samples of other processes: $pids"
pprof -top "$TMP/w0.pb.gz" >"$TMP/w0.top"
expect_match "$TMP/w0.top" ' alpha_worker_burn$' "?pid=$w0: that worker's function"
expect_no_match "$TMP/w0.top" ' beta_worker_burn$' "?pid=$w0: not the other worker's"
curl -s -o "$TMP/nobody.txt" -w '%{http_code}' "$url/heap?pid=1" >"$TMP/nobody.code" || true
[ "$(cat "$TMP/nobody.code")" = 404 ] || fail "?pid=1: status $(cat "$TMP/nobody.code"), want 404"
expect_match "$TMP/nobody.txt" '^no process 1 in this process tree$' "?pid=1: 404, no such process in the tree"

curl -sf -o "$TMP/allocs.pb.gz" "$url/allocs" || fail "allocs failed"
if sanitized_build "$plain"; then
  # The sanitizer's runtime, preloaded first, answers malloc itself.
  skip_check "allocs of preloaded workers: a sanitizer runtime preloaded before cprof takes malloc"
else
  pprof -raw "$TMP/allocs.pb.gz" >"$TMP/allocs.raw"
  for p in "$w0" "$w1"; do
    grep -q "pid:\[$p\]" "$TMP/allocs.raw" || { head -50 "$TMP/allocs.raw"; fail "allocs has no sample of pid $p"; }
  done
  checks=$((checks + 1))
  echo "ok: allocs has both workers' allocations (the idle master makes none)"
fi
curl -sf -o "$TMP/goroutine.pb.gz" "$url/goroutine" || fail "goroutine failed"
pprof -raw "$TMP/goroutine.pb.gz" >"$TMP/goroutine.raw"
for p in "$master" "$w0" "$w1"; do
  grep -q "pid:\[$p\]" "$TMP/goroutine.raw" || { head -50 "$TMP/goroutine.raw"; fail "goroutine has no thread of pid $p"; }
done
checks=$((checks + 1))
echo "ok: goroutine (pprof) names the master and both workers"
curl -sf -o "$TMP/goroutine.txt" "$url/goroutine?debug=2" || fail "goroutine?debug=2 failed"
for p in "$w0" "$w1"; do
  expect_match "$TMP/goroutine.txt" "^# cprof tree: pid $p \(plain_forks\), parent $master\$" "goroutine?debug=2: a section for worker $p"
done

# A worker killed during a window: the answer still comes, and says so.
t0=$(date +%s%N)
(sleep 1; kill -KILL "$w1") &
curl -sf -o "$TMP/lost.pb.gz" "$url/profile?seconds=3" || fail "profile?seconds=3 with a worker killed failed"
t1=$(date +%s%N)
took=$(((t1 - t0) / 1000000))
echo "a worker killed during a 3 s window: the answer took $took ms"
[ "$took" -le 5000 ] || fail "the answer took $took ms, more than the window plus 2 s"
pprof -raw "$TMP/lost.pb.gz" >"$TMP/lost.raw"
expect_match "$TMP/lost.raw" "cprof tree: pid $w1 \(plain_forks\) gave no answer" "the comment names the lost worker"

# lived_check WHAT PROFILE PID USED: PID's ms in PROFILE must be most
# (60% or more) of the USED ms of CPU it had in the window.
lived_check() {
  local what=$1 ms
  ms=$(pprof -top -unit=ms -tagfocus="pid=$3" "$2" 2>/dev/null |
    sed -nE 's/^Showing nodes accounting for ([0-9.]+)ms, .*/\1/p')
  echo "$what: ${ms:-0} ms of its CPU in the tree's profile, $4 ms used"
  awk -v m="${ms:-0}" -v l="$4" 'BEGIN { exit !(m > 0 && m >= 0.6 * l) }' ||
    fail "$what: ${ms:-0} ms in the profile, not most of the $4 ms it used"
  checks=$((checks + 1))
  echo "ok: $what is in the window for the time it lived"
}

# A worker started during a window: it is sent the window's time left, and
# is in the profile for the time it lived (about 2 s of its CPU).
(sleep 1; kill -USR2 "$master") &
curl -sf -o "$TMP/started.pb.gz" "$url/profile?seconds=3" || fail "profile?seconds=3 with a worker started failed"
w2=$(awk '$1 == "worker2" { print $2 }' "$TMP/server.out")
[ -n "$w2" ] || fail "the master started no third worker"
track "$w2"
# What it used since it started, the window's last ~2 s and the moment
# since the answer: cprof's share of it must be most of it.
lived_check "a worker started 1 s into a 3 s window" "$TMP/started.pb.gz" "$w2" "$(stat_cpu_ms "$w2")"

# A worker that exits normally during a window: its part comes, for the
# time it lived (about 1 s of its CPU).
w0_before=$(stat_cpu_ms "$w0")
(sleep 1; kill -TERM "$w0") &
curl -sf -o "$TMP/ended.pb.gz" "$url/profile?seconds=3" || fail "profile?seconds=3 with a worker exiting failed"
pprof -raw "$TMP/ended.pb.gz" >"$TMP/ended.raw"
expect_no_match "$TMP/ended.raw" "cprof tree: pid $w0 " "a worker that exited during the window is not named as lost"
# What it used from the window's start to its exit (it prints its main
# thread's CPU time as it exits).
w0_exit=$(awk -v p="$w0" '$1 == "exit" && $2 == p { print $4 }' "$TMP/server.out")
lived_check "a worker that exited 1 s into a 3 s window" "$TMP/ended.pb.gz" "$w0" "$(( ${w0_exit:-0} - w0_before ))"

code=$(curl -s -o "$TMP/nodump.txt" -w '%{http_code}' "$url/processes?dump=1" || true)
[ "$code" = 409 ] || fail "processes?dump=1 without CPROF_DUMP: status $code, want 409"
expect_match "$TMP/nodump.txt" "^dumps are not configured in process $master \(CPROF_DUMP\)\$" "processes?dump=1 without dumps: 409, and why"

# The master and the worker still alive (the others were stopped above).
command -v ss >/dev/null || fail "ss is not installed (scripts/deps.sh installs iproute2)"
ss -xlp >"$TMP/ss.txt" || fail "ss -xlp failed"
grep -E "pid=($master|$w2)," "$TMP/ss.txt" >"$TMP/listening" || true
[ -s "$TMP/listening" ] && { cat "$TMP/listening"; fail "a process of the tree listens on a unix socket"; }
checks=$((checks + 1))
echo "ok: no process of the tree ($master, $w2) listens on a unix socket ($(grep -c . "$TMP/ss.txt") lines from ss -xlp)"

# Another user cannot take the tree's channels: the only way into a
# socketpair is to hold one of its descriptors, and pidfd_getfd (what a
# debugger or an attacker with the user's rights would use) refuses a
# user who may not trace the process. Root may: the check can fail.
socks=
for f in /proc/"$master"/fd/*; do
  n=${f##*/}
  if [ "$n" -ge 100 ] && [[ $(readlink "$f") == socket:* ]]; then socks="$socks$n "; fi
done
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
  skip_check "another user's reach into the tree's channels: needs root and setpriv to act as nobody"
else
  getfd='import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pidfd = libc.syscall(434, int(sys.argv[1]), 0)
got = 0
for fd in sys.argv[2:]:
    r = libc.syscall(438, pidfd, int(fd), 0) if pidfd >= 0 else -1
    if r >= 0:
        got += 1
        os.close(r)
print(got)'
  # shellcheck disable=SC2086
  as_root=$(/usr/bin/python3 -c "$getfd" "$master" $socks)
  # shellcheck disable=SC2086
  as_nobody=$(setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "$getfd" "$master" $socks)
  echo "the master's cprof sockets (fd $socks): root took $as_root, nobody took $as_nobody"
  [ -n "$socks" ] && [ "$as_root" -gt 0 ] || fail "the master has no socket of cprof's that root can take (fds: ${socks:-none})"
  [ "$as_nobody" = 0 ] || fail "user nobody took $as_nobody of the master's cprof sockets"
  checks=$((checks + 1))
  echo "ok: user nobody cannot take any of the tree's channels"
fi

kill -TERM "$master"
wait "$runner" || true
kill "$rpid"
wait "$rpid" 2>/dev/null || true
push_tree_check "$TMP/push" "$master" "$w0" alpha_worker_burn
push_tree_check "$TMP/push" "$master" "$w1" beta_worker_burn
expect_match "$TMP/server.err" "push: pid $w1 \(plain_forks\) gave no cpu profile for [0-9]+\.\.[0-9]+ \(no answer\)" "the pusher names the worker killed mid-window"
finish
