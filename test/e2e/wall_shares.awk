# Reads `go tool pprof -traces` of a wall profile and prints, over the
# threads named w0..w3, each phase function's share and each state's
# share of their wall time, in percent: "func phase_cpu 41.2",
# "state running 40.1".
function ns(v) {
  if (v ~ /ms$/) { sub(/ms$/, "", v); return v * 1e6 }
  if (v ~ /us$/) { sub(/us$/, "", v); return v * 1e3 }
  if (v ~ /ns$/) { sub(/ns$/, "", v); return v }
  if (v ~ /s$/) { sub(/s$/, "", v); return v * 1e9 }
  return v
}
function flush() {
  if (thread ~ /^w[0-9]$/ && val > 0) {
    total += val
    st[state] += val
    if (fn != "") fv[fn] += val
  }
  thread = ""; state = ""; fn = ""; val = 0; instack = 0
}
/^-----------\+/ { flush(); next }
$1 == "state:" { state = $2; next }
$1 == "thread:" { thread = $2; next }
$1 == "thread_id:" || $1 == "worker:" { next }
/^ *[0-9.]+[mun]?s +/ && !instack { val = ns($1); instack = 1; if ($2 ~ /^phase_/) fn = $2; next }
instack && $1 ~ /^phase_/ && fn == "" { fn = $1 }
END {
  flush()
  if (total == 0) exit 1
  for (f in fv) printf "func %s %.1f\n", f, 100 * fv[f] / total
  for (s in st) printf "state %s %.1f\n", s, 100 * st[s] / total
}
