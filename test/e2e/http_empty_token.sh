#!/usr/bin/env bash
# An empty CPROF_HTTP_TOKEN is an error (one line on stderr naming it, no
# server), never a server without authentication. (The API's empty token,
# CPROF_EINVAL, is checked in unit/test_http.)
source "$(dirname "$0")/lib.bash"
plain=$CPROFTEST_BUILD/test/progs/plain_signalfd
tsan_build "$plain" && skip_rest "preloaded runs under TSan (see lib.bash)"
CPROF_HTTP=127.0.0.1:0 CPROF_HTTP_TOKEN= LD_PRELOAD=$(preload_env "$plain") "$plain" >"$TMP/empty.out" 2>"$TMP/empty.err" &
EMPTY=$!
track $EMPTY
for _ in $(seq 100); do grep -q ready "$TMP/empty.out" 2>/dev/null && break; sleep 0.05; done
kill -TERM $EMPTY
wait $EMPTY || true
echo "stderr with CPROF_HTTP_TOKEN set but empty:"
cat "$TMP/empty.err"
[ "$(wc -l <"$TMP/empty.err")" = 1 ] || fail "want exactly one line on stderr"
expect_match "$TMP/empty.err" '^cprof: CPROF_HTTP_TOKEN is set but empty .*; HTTP endpoint disabled$' "an empty CPROF_HTTP_TOKEN is one line naming it"
expect_no_match "$TMP/empty.err" 'serving' "no server without authentication"
finish
