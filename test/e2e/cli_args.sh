#!/usr/bin/env bash
# Options anywhere before "--", as GNU getopt takes them, for every
# subcommand but run: `cprof view heap.pb.gz -o heap.html` (the README's
# form, which exited 2), `cprof top FILE -n 1`, `cprof extract LOG -o DIR
# -v` do what the options-first forms do, also with POSIXLY_CORRECT set;
# "--" ends the options, so a file may be named "-n". `cprof run` stops at
# "--" and at the first argument that is not an option, so PROG's own
# options are never read as cprof's. `cprof view` without -o says where it
# wrote the page. Usage errors still exit 2.
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/cli_lib.bash"
cprof=$CPROFTEST_BUILD/cprof
small_profile "$TMP/p.pb" >/dev/null || fail "writing the profile"
gzip -9 <"$TMP/p.pb" >"$TMP/heap.pb.gz"

# expect_status N CMD...: CMD exits with status N (output in $TMP/out,
# $TMP/err).
expect_status() {
  local want=$1 status=0
  shift
  "$@" >"$TMP/out" 2>"$TMP/err" || status=$?
  [ "$status" -eq "$want" ] || { cat "$TMP/err" >&2; fail "$* exited $status, not $want"; }
  checks=$((checks + 1))
  echo "ok: status $want from ${*/#$cprof/cprof}"
}

# view: -o after the file, the README's form; and the page is the same.
cd "$TMP" || fail "cd $TMP"
expect_status 0 "$cprof" view heap.pb.gz -o after.html
expect_match "$TMP/err" '^cprof view: wrote after\.html$' "view says where it wrote"
expect_status 0 "$cprof" view -o before.html heap.pb.gz
cmp -s before.html after.html || fail "view -o before and after the file differ"
POSIXLY_CORRECT=1 expect_status 0 "$cprof" view heap.pb.gz -o posix.html
cmp -s before.html posix.html || fail "view with POSIXLY_CORRECT differs"
# Without -o: FILE's name with .html, in the current directory, said.
mkdir -p "$TMP/here" && cd "$TMP/here" || fail "cd $TMP/here"
expect_status 0 "$cprof" view "$TMP/heap.pb.gz"
expect_match "$TMP/err" '^cprof view: wrote heap\.html$' "view without -o says where it wrote"
cmp -s "$TMP/before.html" "$TMP/here/heap.html" || fail "the default output differs"
expect_status 0 "$cprof" view "$TMP/heap.pb.gz" -o -
[ ! -s "$TMP/err" ] || fail "view -o - wrote on stderr: $(cat "$TMP/err")"
cmp -s "$TMP/before.html" "$TMP/out" || fail "view -o - differs"
cd "$TMP" || fail "cd $TMP"

# top: options after the file, Go's one-dash forms and GNU's two.
expect_status 0 "$cprof" top -n 1 -sample_index=samples heap.pb.gz
cp "$TMP/out" "$TMP/top_first.txt"
expect_match "$TMP/top_first.txt" ' leaf_fn$' "top names leaf_fn"
expect_status 0 "$cprof" top heap.pb.gz -n 1 -sample_index=samples
cmp -s "$TMP/top_first.txt" "$TMP/out" || fail "top with options after the file differs"
expect_status 0 "$cprof" top -n 1 heap.pb.gz --sample_index samples
cmp -s "$TMP/top_first.txt" "$TMP/out" || fail "top with options around the file differs"
POSIXLY_CORRECT=1 expect_status 0 "$cprof" top heap.pb.gz -n=1
cmp -s "$TMP/top_first.txt" "$TMP/out" || fail "top with POSIXLY_CORRECT differs"
# "--" ends the options: a file named -n.
cp heap.pb.gz ./-n
expect_status 0 "$cprof" top -- -n
cmp -s "$TMP/top_first.txt" "$TMP/out" || fail "top -- -n did not read the file -n"
expect_status 0 "$cprof" view -o dashdash.html -- -n

# extract: -o and -v after the log.
printf 'x' | gzip >"$TMP/tiny.gz"
{
  echo 'app: starting'
  echo '-----BEGIN PPROF HEAP-----'
  printf 'Pid: 5\nSeq: 2\n\n'
  base64 -w 64 "$TMP/tiny.gz"
  echo '-----END PPROF HEAP-----'
} >"$TMP/app.log"
expect_status 0 "$cprof" extract "$TMP/app.log" -o "$TMP/xa" -v
[ -s "$TMP/xa/heap-5-2.pb.gz" ] || fail "extract LOG -o DIR did not write into DIR"
expect_match "$TMP/out" 'app\.log: line 2: PPROF HEAP -> .*/xa/heap-5-2\.pb\.gz' "extract LOG -o DIR -v prints each file"
POSIXLY_CORRECT=1 expect_status 0 "$cprof" extract "$TMP/app.log" -o "$TMP/xb"
[ -s "$TMP/xb/heap-5-2.pb.gz" ] || fail "extract with POSIXLY_CORRECT did not write into DIR"
expect_status 0 "$cprof" extract --max-size 1M -o "$TMP/xc" -- "$TMP/app.log"
# help anywhere.
expect_status 0 "$cprof" view heap.pb.gz --help
expect_match "$TMP/out" '^SYNOPSIS' "view FILE --help prints the help"
expect_status 0 "$cprof" extract app.log -h
expect_match "$TMP/out" '^SYNOPSIS' "extract LOG -h prints the help"

# Usage errors: still 2.
expect_status 2 "$cprof" view
expect_status 2 "$cprof" view heap.pb.gz other.pb.gz
expect_status 2 "$cprof" view heap.pb.gz -o
expect_status 2 "$cprof" top heap.pb.gz -bogus
expect_match "$TMP/err" '^cprof top: unknown option -bogus$' "top names an unknown option"
# pprof's spellings: -nodecount is -n; -cum sorts as pprof -cum does (the
# same rows, in the same order, as go tool pprof prints); -lines and -http
# are pprof's alone, and the error names the pprof command (never help,
# as -http once did by prefix).
expect_status 0 "$cprof" top -nodecount=1 -sample_index=samples heap.pb.gz
cmp -s "$TMP/top_first.txt" "$TMP/out" || fail "top -nodecount=1 differs from -n 1"
expect_status 0 "$cprof" top -cum -nodefraction=0 -sample_index=samples heap.pb.gz
grep -E '^ +[-0-9.]' "$TMP/out" >"$TMP/cum_cprof.txt"
pprof -top -cum -nodefraction=0 -sample_index=samples heap.pb.gz | grep -E '^ +[-0-9.]' >"$TMP/cum_pprof.txt"
[ -s "$TMP/cum_pprof.txt" ] && cmp -s "$TMP/cum_cprof.txt" "$TMP/cum_pprof.txt" ||
  { diff "$TMP/cum_cprof.txt" "$TMP/cum_pprof.txt" >&2; fail "cprof top -cum rows differ from go tool pprof -top -cum"; }
checks=$((checks + 1))
echo "ok: cprof top -cum prints go tool pprof -top -cum's rows"
expect_status 2 "$cprof" top -lines heap.pb.gz
expect_match "$TMP/err" '^cprof top: -lines is go tool pprof.s and not cprof top.s: run go tool pprof -top -lines FILE$' "top -lines names the pprof command"
expect_status 2 "$cprof" top -http=:8080 heap.pb.gz
expect_no_match "$TMP/out" 'SYNOPSIS' "top -http=:8080 is not taken for -help"
expect_status 2 "$cprof" top heap.pb.gz -n
expect_match "$TMP/err" '^cprof top: -n needs a value$' "top -n without a value says so"
expect_status 2 "$cprof" top heap.pb.gz heap.pb.gz
expect_status 2 "$cprof" top -- heap.pb.gz -n
expect_status 2 "$cprof" extract -q app.log

# run: options end at "--" and at PROG; PROG gets its own options as they
# are, and none of them configures cprof. The TSan build cannot preload
# (lib.bash); under ASan its runtime goes first.
if tsan_build "$cprof"; then
  skip_rest "cprof run (the TSan build cannot preload)"
fi
rt=$(preload_env "$cprof" | sed 's#[^ ]*libcprof\.so##')
show='echo "dump=${CPROF_DUMP-unset} http=${CPROF_HTTP-unset}"; printf "arg %s\n" "$@"'
# --follow-exec: the program keeps its CPROF_* variables for its children
# (here its own shell code reads them); without it they would be gone.
LD_PRELOAD="$rt" expect_status 0 "$cprof" run --follow-exec --dump threadcreate=debug=1 --dump-out /dev/null -- \
  sh -c "$show" sh --http 127.0.0.1:1 -o x --help
expect_match "$TMP/out" '^dump=threadcreate=debug=1 http=unset$' "cprof run's own options before -- are taken"
printf 'arg --http\narg 127.0.0.1:1\narg -o\narg x\narg --help\n' >"$TMP/want"
grep '^arg ' "$TMP/out" | cmp -s - "$TMP/want" || { cat "$TMP/out" >&2; fail "PROG's options after -- were not passed as they are"; }
echo "ok: PROG's options after -- are passed untouched"
LD_PRELOAD="$rt" expect_status 0 "$cprof" run sh -c "$show" sh --dump cpu --help
expect_match "$TMP/out" '^dump=unset http=unset$' "options after PROG are not cprof run's"
expect_match "$TMP/out" '^arg --dump$' "options after PROG go to PROG"
LD_PRELOAD="$rt" expect_status 3 "$cprof" run -- sh -c 'exit 3'
expect_status 2 "$cprof" run --bogus -- true
# cprof profiles lists every profile, the windowed ones with their route.
"$cprof" profiles >"$TMP/profiles"
for p in allocs block cpu goroutine heap heap_peak mutex threadcreate wall; do
  expect_match "$TMP/profiles" "^$p " "cprof profiles lists $p"
done
expect_match "$TMP/profiles" '^cpu .*\(taken over a window: /debug/pprof/profile\?seconds=N, or --dump cpu\)$' "cprof profiles gives cpu's route"
# Every error starts with the command's name, getopt's own included.
expect_match "$TMP/err" "^cprof run: unrecognized option '--bogus'$" "getopt's message carries cprof run's prefix"
for c in extract view; do
  expect_status 2 "$cprof" $c --bogus
  expect_match "$TMP/err" "^cprof $c: unrecognized option '--bogus'$" "getopt's message carries cprof $c's prefix"
done
expect_status 2 "$cprof" top --bogus
expect_match "$TMP/err" "^cprof top: unknown option --bogus$" "cprof top's unknown option carries its prefix"
expect_status 2 "$cprof" run --http -- true
expect_match "$TMP/err" '^cprof run: --http needs a value$' "cprof run --http -- PROG: the address is missing, not --"
expect_status 2 "$cprof" run

# No output named: PROG dumps cpu and heap into ./cprof-PID.log, and one
# line on stderr names the log and the command that opens it; running that
# command (with cprof on PATH, as installed) shows PROG's CPU profile.
rm -f cprof-*.log
worker=$CPROFTEST_BUILD/test/progs/plain_worker
LD_PRELOAD="$rt" expect_status 0 "$cprof" run -- "$worker" 1
line=$(tail -1 "$TMP/err")
[[ $line =~ ^cprof\ run:\ profiles\ of\ pid\ ([0-9]+)\ are\ in\ (cprof-[0-9]+\.log)\;\ open\ them\ with:\ (.*)$ ]] ||
  { cat "$TMP/err"; fail "cprof run with no output named: no line saying where the profiles are"; }
pid=${BASH_REMATCH[1]} log=${BASH_REMATCH[2]} next=${BASH_REMATCH[3]}
[ "$log" = "cprof-$pid.log" ] && [ -s "$log" ] || fail "the log $log (pid $pid) is missing or empty"
echo "ok: cprof run with no output named left $log and said: $next"
PATH="$CPROFTEST_BUILD:$PATH" bash -c "$next" >"$TMP/next.out" 2>&1 || { cat "$TMP/next.out"; fail "the command cprof run printed failed: $next"; }
expect_match "$TMP/next.out" '^Type: cpu$' "the printed command shows the CPU profile"
expect_match "$TMP/next.out" ' worker_spin$' "the printed command shows PROG's hot function"
[ "$(ls "cprof-$pid" | grep -Ec "^(cpu|heap)-$pid-[0-9]+\.pb\.gz$")" -eq 2 ] || { ls "cprof-$pid"; fail "cprof-$pid holds no cpu and heap profile"; }
checks=$((checks + 1))
echo "ok: the log holds PROG's cpu and heap profiles"
# SIGTERM to cprof run goes on to PROG, which dumps and dies of it; cprof
# run dies of it too, after its line.
LD_PRELOAD="$rt" "$cprof" run -- sleep 60 >"$TMP/out" 2>"$TMP/err" &
rp=$!
track "$rp"
child=
for _ in $(seq 200); do
  child=$(pgrep -P "$rp" -x sleep || true)
  [ -n "$child" ] && grep -q libcprof "/proc/$child/maps" 2>/dev/null && break
  sleep 0.05
done
[ -n "$child" ] || fail "cprof run -- sleep: no child running sleep"
sleep 0.2 # its constructor, which installs the dump handlers, has run
kill -TERM "$rp"
status=0
wait "$rp" || status=$?
[ "$status" -eq 143 ] || { cat "$TMP/err"; fail "cprof run, sent SIGTERM: status $status, not 143"; }
expect_match "$TMP/err" "^cprof run: profiles of pid $child are in cprof-$child\\.log" "SIGTERM passed on to PROG, which dumped; cprof run then died of it (143)"
# A PROG that is no executable: 126, as shells say; a missing one: 127.
printf 'echo\n' >"$TMP/noexec"
chmod 644 "$TMP/noexec"
LD_PRELOAD="$rt" expect_status 126 "$cprof" run -- "$TMP/noexec"
LD_PRELOAD="$rt" expect_status 127 "$cprof" run -- "$TMP/missing"
LD_PRELOAD="$rt" expect_status 126 "$cprof" run --dump cpu -- "$TMP/noexec"
expect_no_match "$TMP/err" 'profiles of pid' "no line about profiles for a PROG that never ran"
# --dump-out without --dump dumps nothing, and says so.
LD_PRELOAD="$rt" expect_status 0 "$cprof" run --dump-out "$TMP/x.log" -- true
expect_match "$TMP/err" '^cprof run: --dump-out names a file but no profile is dumped into it' "--dump-out without --dump is reported"
finish
