// A C++ file whose compile is STL-heavy, for bench/short_life.sh and
// bench/own_share.sh: cc1plus -O2 on it runs for a few seconds.
#include <algorithm>
#include <iostream>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
template <int N> struct W {
  std::map<std::string, std::vector<int>> m;
  int f() {
    int s = 0;
    for (auto &[k, v] : m) s += std::accumulate(v.begin(), v.end(), 0) + k.size();
    return s + W<N - 1>().f();
  }
};
template <> struct W<0> { int f() { return 0; } };
int main() {
  std::regex r("a+b*");
  std::unordered_map<std::string, std::set<int>> u;
  std::stringstream ss;
  ss << W<40>().f();
  std::cout << std::regex_match(ss.str(), r) << u.size();
}
