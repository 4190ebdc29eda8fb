#!/usr/bin/env bash
# The goroutine profile interrupts nothing: a program with threads parked
# in pause, sleep, nanosleep, clock_nanosleep, usleep, poll, select,
# epoll_wait, recv with SO_RCVTIMEO, sem_timedwait, sigsuspend,
# sigwaitinfo, msgrcv, read, accept and pthread_cond_wait (and its main
# thread in read) counts every early return: none after 20 rounds of
# goroutine debug=0, 1 and 2, a goroutine delta (go tool pprof -seconds),
# a CPU profile and a 2-second wall profile at 50 Hz (100 collections). Each parked thread is read from /proc, never sent a
# signal, and its own function appears in debug=2 under its system call;
# cprof's HTTP threads do not appear at all.
source "$(dirname "$0")/lib.bash"
prog=$CPROFTEST_BUILD/test/progs/parked
mkfifo "$TMP/in"
exec 3<>"$TMP/in"
"$prog" <"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
pid=$!
track "$pid"
for _ in $(seq 200); do
  [ -s "$TMP/out" ] && break
  sleep 0.05
done
PORT=$(head -1 "$TMP/out")
[ -n "$PORT" ] || { cat "$TMP/err"; fail "parked did not start"; }
url=http://127.0.0.1:$PORT/debug/pprof
for i in $(seq 20); do
  for d in 0 1 2; do
    curl -sf -o "$TMP/g$d.out" "$url/goroutine?debug=$d" || fail "goroutine?debug=$d failed (round $i)"
  done
done
checks=$((checks + 1))
echo "ok: 60 goroutine requests served"
curl -sf -o "$TMP/cpu.pb.gz" "$url/profile?seconds=1" || fail "CPU profile failed"
pprof -raw "$TMP/cpu.pb.gz" >"$TMP/cpu.txt"
expect_match "$TMP/cpu.txt" '^samples/count cpu/nanoseconds$' "a CPU profile was taken"
pprof -seconds 1 -raw "$url/goroutine" >"$TMP/delta.txt"
expect_match "$TMP/delta.txt" '^goroutine/count$' "go tool pprof -seconds 1 on /goroutine: a delta profile"
curl -s -o /dev/null -w '%{http_code}\n' "$url/goroutine?seconds=1" >"$TMP/code.txt"
expect_match "$TMP/code.txt" '^200$' "goroutine?seconds=1 is served (200), as Go serves it"
curl -sf -o "$TMP/wall.pb.gz" "$url/wall?seconds=2&hz=50" || fail "wall profile failed"
pprof -traces "$TMP/wall.pb.gz" >"$TMP/wall.txt"
expect_match "$TMP/wall.txt" '^ +state: +(ppoll|poll)$' "the wall profile has the poll thread in its system call"
expect_match "$TMP/wall.txt" 'park_sigwaitinfo$' "the wall profile has the parked threads' own functions"
curl -sf -o "$TMP/g2.txt" "$url/goroutine?debug=2"
curl -sf -o "$TMP/index.html" "$url/"
echo q >&3
wait "$pid" || { cat "$TMP/err"; fail "parked exited with an error"; }
tracked=()
cat "$TMP/out"
for k in pause sleep nanosleep clock_nanosleep usleep poll select epoll_wait \
  recv_timeout sem_timedwait sigsuspend sigwaitinfo msgrcv read accept \
  cond_wait main_read; do
  expect_match "$TMP/out" "^$k eintr=0\$" "$k never returned early"
done
expect_match "$TMP/out" '^stats .* signalled=0 interrupted=0$' "no thread was signalled; no system call was cut short"
# The counter works: cprof's signal sent on purpose to the thread in
# pause() makes pause return EINTR, and the handler counts it.
expect_match "$TMP/out" '^kicked pause eintr=1 interrupted=1$' "a signal sent on purpose: pause returns EINTR, and the handler counts one cut-short call"
for k in pause sleep nanosleep clock_nanosleep usleep poll select epoll_wait \
  recv_timeout sem_timedwait sigsuspend sigwaitinfo msgrcv read accept \
  cond_wait; do
  expect_match "$TMP/g2.txt" "^park_$k\\(\\.\\.\\.\\)\$" "park_$k appears in debug=2"
done
expect_match "$TMP/g2.txt" '^goroutine [0-9]+ \[sleeping, syscall (epoll_wait|epoll_pwait), name=p-epoll_wait\]:$' "the epoll thread's state and system call"
expect_match "$TMP/g2.txt" '^goroutine [0-9]+ \[sleeping, syscall (accept|accept4), name=p-accept\]:$' "the accept thread's state and system call"
expect_match "$TMP/g2.txt" '^created by main$' "created by main"
expect_no_match "$TMP/g2.txt" 'MHD_|libmicrohttpd|cprof__http|http\.c:' "cprof's HTTP server threads are left out"
# 16 parked threads and main; ThreadSanitizer may add one of its own.
n=$(grep -c '^goroutine [0-9]* \[' "$TMP/g2.txt")
[ "$n" -eq 17 ] || [ "$n" -eq 18 ] || { cat "$TMP/g2.txt"; fail "$n thread blocks, expected 17"; }
checks=$((checks + 1))
echo "ok: $n thread blocks (the 17 of the program)"
expect_match "$TMP/g1.out" '^goroutine profile: total 1[78]$' "debug=1 counts the program's threads only"
expect_match "$TMP/index.html" "^<tr><td>1[78]</td><td><a href='goroutine\?debug=1'>goroutine</a></td></tr>\$" "the index counts the program's threads only"
finish
