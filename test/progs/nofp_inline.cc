// A C++ program built as distributions build it (-O2 -g, no frame-pointer
// flags) whose hot code is mostly inlined library code: std::map lookups
// (operator[] -> lower_bound -> std::less -> std::string::compare),
// std::string building, and std::sort with an inlined comparator. The
// symbolization test (test/e2e/symbolize_inline.sh) compares every
// location of its CPU and heap profiles with addr2line -i. Runs for about
// the CPU seconds given (default 1.5); prints a checksum.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

static double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

struct Item {
  uint64_t key;
  std::string name;
};

// Counts words in a map keyed by std::string: operator[] inlines
// lower_bound, which inlines std::less and std::string::compare.
__attribute__((noinline)) static uint64_t count_words(
    std::map<std::string, uint64_t> &counts, const std::vector<Item> &items) {
  uint64_t sum = 0;
  for (const Item &it : items) sum += ++counts[it.name];  // LINE:count_words
  return sum;
}

// Looks integers up in a map: std::map<int, int>::operator[] inlined.
__attribute__((noinline)) static uint64_t count_keys(std::map<int, int> &m,
                                                     const std::vector<Item> &items) {
  uint64_t sum = 0;
  for (const Item &it : items) sum += unsigned(m[int(it.key % 4099)]++);
  return sum;
}

// Builds names by appending: std::string's append and its growth.
__attribute__((noinline)) static void make_names(std::vector<Item> &items,
                                                 unsigned round) {
  for (size_t i = 0; i < items.size(); i++) {
    std::string s = "item-";
    s += std::to_string((items[i].key >> 7) % 1000);
    s += '-';
    s += std::to_string(round % 7);
    items[i].name = s;
  }
}

// Sorts by name, then key: the comparator is inlined into std::sort.
__attribute__((noinline)) static void sort_items(std::vector<Item> &items) {
  std::sort(items.begin(), items.end(), [](const Item &a, const Item &b) {
    int c = a.name.compare(b.name);
    return c < 0 || (c == 0 && a.key < b.key);
  });
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 1.5;
  std::map<std::string, uint64_t> counts;
  std::map<int, int> keys;
  std::vector<Item> items(6000);
  uint64_t x = 88172645463325252ull, sum = 0;
  unsigned round = 0;
  double t0 = cpu_seconds();
  while (cpu_seconds() - t0 < seconds) {
    for (Item &it : items) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      it.key = x;
    }
    make_names(items, round);
    sort_items(items);
    sum += count_words(counts, items);
    sum += count_keys(keys, items);
    round++;
  }
  std::printf("%llu %u %zu\n", static_cast<unsigned long long>(sum), round,
              counts.size());
  return 0;
}
