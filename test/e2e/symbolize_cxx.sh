#!/usr/bin/env bash
# The symbolizer demangles C++ names: a C++ program symbolizes call sites in
# its own methods and must see the demangled name with the mangled symbol as
# the system name.
set -euo pipefail

bin="${CPROFTEST_BUILD:?CPROFTEST_BUILD must point at the build directory}/test/progs/cxx_names"
out="$("$bin")"
echo "$out"

fail=0
expect() {
  if ! grep -qxF -- "$1" <<<"$out"; then
    echo "missing line: $1" >&2
    fail=1
  fi
}
expect 'ns::Widget::method()|_ZN2ns6Widget6methodEv'
expect 'unsigned long ns::twice<int>(int)|_ZN2ns5twiceIiEEmT_'
expect 'ns::helper(int)|_ZN2ns6helperEi'
exit "$fail"
