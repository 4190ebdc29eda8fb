// A C++ program as distributions build them: -O2, no frame-pointer flags.
// Its CPU time goes to a std::sort comparator and std::map lookups, and its
// allocations to std::string growth, std::vector growth, std::map nodes and
// exceptions, all through libstdc++'s operator new. Runs for about the CPU
// seconds given (default 1.5).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

static volatile uint64_t rounds = 16;

static double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

__attribute__((noinline)) static uint64_t weigh(uint64_t k) {
  uint64_t h = k;
  for (uint64_t r = 0; r < rounds; r++) h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull + r;
  return h;
}

__attribute__((noinline)) static void sort_phase(std::vector<uint64_t> &v) {
  std::sort(v.begin(), v.end(),
            [](uint64_t a, uint64_t b) { return weigh(a) < weigh(b); });
}

__attribute__((noinline)) static uint64_t map_phase(
    std::map<std::string, uint64_t> &m, const std::vector<uint64_t> &v) {
  uint64_t sum = 0;
  for (size_t i = 0; i < v.size(); i += 4) {
    std::string key = "key-" + std::to_string(v[i] % 5000);
    sum += m[key]++;
  }
  return sum;
}

__attribute__((noinline)) static size_t grow_strings(unsigned round) {
  std::string s;
  for (int i = 0; i < 2000; i++) s += std::to_string(round + unsigned(i));
  return s.size();
}

__attribute__((noinline)) static size_t grow_vector(unsigned round) {
  std::vector<uint64_t> v;
  for (unsigned i = 0; i < 20000; i++) v.push_back(i ^ round);
  return v.size();
}

__attribute__((noinline)) static int throw_some(unsigned round) {
  int caught = 0;
  for (int i = 0; i < 50; i++) {
    try {
      if ((round + unsigned(i)) % 2 == 0) throw std::runtime_error("even");
    } catch (const std::exception &) {
      caught++;
    }
  }
  return caught;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 1.5;
  std::map<std::string, uint64_t> m;
  uint64_t x = 88172645463325252ull, sum = 0;
  unsigned round = 0;
  double t0 = cpu_seconds();
  while (cpu_seconds() - t0 < seconds) {
    std::vector<uint64_t> v(20000);
    for (auto &e : v) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      e = x;
    }
    sort_phase(v);
    sum += map_phase(m, v);
    sum += grow_strings(round) + grow_vector(round);
    sum += unsigned(throw_some(round));
    round++;
  }
  std::printf("%llu %u %zu\n", static_cast<unsigned long long>(sum), round,
              m.size());
  return 0;
}
