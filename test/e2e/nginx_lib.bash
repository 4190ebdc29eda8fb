# Shared by the end-to-end tests that run Debian's nginx (nginx-light), a
# master and two workers, under `cprof run` (nginx.sh, nginx_tree.sh).
# Source after lib.bash.

# nginx_prepare: fails without nginx or wrk, skips the test in the TSan
# build (which cannot preload), and turns the leak checker off: nginx's
# processes end by exit() without freeing what they hold.
nginx_prepare() {
  command -v nginx >/dev/null || fail "nginx is not installed (scripts/deps.sh installs nginx-light)"
  command -v wrk >/dev/null || fail "wrk is not installed (scripts/deps.sh installs it)"
  if tsan_build "$CPROFTEST_BUILD/test/progs/plain_forks"; then
    skip_rest "preloaded runs (the TSan build cannot preload, see lib.bash)"
  fi
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}

# nginx_start PORT CPROF_RUN_ARGS...: writes $TMP/nginx.conf (the workers
# listening on 127.0.0.1:PORT, its pid, logs and temporary files in $TMP,
# the error log at notice level), starts nginx under `cprof run ARGS --`
# in the background (tracked; nginx by its full path, as its binary upgrade
# execs argv[0]) and waits for the master and both workers:
# sets runner, master and workers (an array).
nginx_start() {
  local port=$1 rt
  shift
  rt=$(preload_env "$CPROFTEST_BUILD/test/progs/plain_forks" | sed 's#[^ ]*libcprof\.so##')
  mkdir -p "$TMP/www"
  # nginx's workers run as another user (nobody) when the master is
  # root: they may pass through the test's directory to the page.
  chmod 711 "$TMP"
  head -c 3000 /dev/urandom | base64 >"$TMP/www/index.html"
  cat >"$TMP/nginx.conf" <<CONF
worker_processes 2;
master_process on;
daemon ${NGINX_DAEMON:-off};
pid $TMP/nginx.pid;
error_log $TMP/error.log notice;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $TMP/body;
  proxy_temp_path $TMP/proxy;
  fastcgi_temp_path $TMP/fastcgi;
  uwsgi_temp_path $TMP/uwsgi;
  scgi_temp_path $TMP/scgi;
  server {
    listen 127.0.0.1:$port;
    root $TMP/www;
  }
}
CONF
  # NGINX_DAEMON=on: nginx daemonizes (its default): the process cprof run
  # starts forks the master and exits.
  local wrap=()
  # NGINX_ORPHAN=1: nginx's parent exits a second after starting it, as a
  # daemon's does (nginx takes a binary upgrade only once its parent is
  # no longer the one it started under); runner is then that parent.
  [ -n "${NGINX_ORPHAN:-}" ] && wrap=(sh -c '"$@" & sleep 1' sh)
  LD_PRELOAD="$rt" "${wrap[@]}" "$CPROFTEST_BUILD/cprof" run "$@" -- \
    "$(command -v nginx)" -e "$TMP/error.log" -p "$TMP" -c "$TMP/nginx.conf" >"$TMP/nginx.out" 2>&1 &
  runner=$!
  track "$runner"
  workers=()
  for _ in $(seq 100); do
    if [ -s "$TMP/nginx.pid" ]; then
      master=$(cat "$TMP/nginx.pid")
      mapfile -t workers < <(pgrep -P "$master" || true)
      [ "${#workers[@]}" -eq 2 ] && break
    fi
    sleep 0.1
  done
  [ "${#workers[@]}" -eq 2 ] || { cat "$TMP/nginx.out" "$TMP/error.log" 2>/dev/null; fail "nginx did not start a master and two workers"; }
}
