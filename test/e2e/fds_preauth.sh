#!/usr/bin/env bash
# Idle connections to cprof's endpoint cost the program no thread: with
# 40 TCP connections open that send nothing (no request, no token), a
# program under a limit on threads (ulimit -u) just above what it needs
# still starts all its worker threads. The program runs in a user
# namespace of its own, where the limit counts only its own threads
# (not every process of this user on the machine). cprof's threads are
# counted (/proc/PID/task) while the connections are open. (Root has no
# such limit: run as root, the limited run is made as nobody.)
source "$(dirname "$0")/lib.bash"

prog=$CPROFTEST_BUILD/test/progs/fds_workers
WORKERS=20
IDLE=40
# Root is exempt from the limit on threads: the limited run is then made
# as nobody, who must be able to run the program.
as=()
[ "$(id -u)" = 0 ] && as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
"${as[@]}" unshare -Ur true 2>/dev/null || skip_rest "no unprivileged user namespaces here (${as[*]} unshare -Ur fails)"
"${as[@]}" test -x "$prog" || skip_rest "$prog cannot be run as ${as[*]:-this user}"

cat >"$TMP/drive.py" <<'PY'
import os, re, socket, subprocess, sys, time
prog, workers, idle, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
env = dict(os.environ, CPROF_HTTP="127.0.0.1:0")
cmd = [prog, str(workers)]
if limit:
    # unshare and bash exec, so the program keeps this pid.
    cmd = ["unshare", "-Ur", "bash", "-c", 'ulimit -u %d && exec "$0" "$@"' % limit] + cmd
    if os.getuid() == 0:  # root has no limit on threads: run as nobody
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
assert p.stdout.readline().strip() == "ready", "the program did not start"
err = ""
port = None
while port is None:
    line = p.stderr.readline()
    if not line:
        sys.exit("no endpoint line: " + err)
    err += line
    m = re.search(r"serving /debug/pprof/ on .* \(port (\d+)\)", line)
    if m:
        port = int(m.group(1))
pid = p.pid
def tasks():
    names = []
    for t in os.listdir("/proc/%d/task" % pid):
        names.append(open("/proc/%d/task/%s/comm" % (pid, t)).read().strip())
    return names
time.sleep(0.3)
before = tasks()
print("threads before: %d (%s)" % (len(before), " ".join(sorted(before))))
conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(idle)]
time.sleep(1.5)
during = tasks()
cprof_threads = [n for n in during if n not in ("app-worker",)][1:]
print("with %d idle connections: %d threads, %d of them cprof's" % (idle, len(during), len(cprof_threads)))
p.stdin.write("go\n"); p.stdin.flush()
print(p.stdout.readline().strip())
p.stdin.write("end\n"); p.stdin.flush()
for c in conns:
    c.close()
p.wait(timeout=20)
print("exit %d" % p.returncode)
PY

# The program's needs, read without a limit: its threads with the endpoint
# idle, plus the workers.
python3 "$TMP/drive.py" "$prog" "$WORKERS" 0 0 >"$TMP/free.txt" 2>&1 || { cat "$TMP/free.txt"; fail "the unlimited run failed"; }
cat "$TMP/free.txt"
base=$(sed -n 's/^threads before: \([0-9]*\).*/\1/p' "$TMP/free.txt")
[ -n "$base" ] || fail "no thread count"
# bash is gone by then (exec); 2 tasks of margin.
limit=$((base + WORKERS + 2))
echo "limit: ulimit -u $limit ($base threads at start + $WORKERS workers + 2)"
python3 "$TMP/drive.py" "$prog" "$WORKERS" "$IDLE" "$limit" >"$TMP/limited.txt" 2>&1 || true
cat "$TMP/limited.txt"
expect_match "$TMP/limited.txt" "^started $WORKERS of $WORKERS$" "all $WORKERS workers started with $IDLE idle connections open under ulimit -u $limit"
expect_match "$TMP/limited.txt" "^exit 0$" "the program exited 0"
finish
