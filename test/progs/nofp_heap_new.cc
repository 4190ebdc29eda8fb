// C++ allocations through every kind of operator new, for
// test/e2e/heap_allocators.sh: built as distributions build programs (-O2,
// no frame-pointer flags) and without cprof, to be run with cprof preloaded
// over glibc, jemalloc or tcmalloc. Each function below allocates with one
// kind of new and frees some of it with the matching delete; what stays
// live is summed exactly as requested and printed as
//   live NAME BYTES
// per function and `live total BYTES`, then the program exits with all of
// it still live (the exit dump's heap profile is compared with these).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

namespace {

struct Node {
  char payload[200];
  Node *next;
};

struct alignas(128) Wide {
  char payload[384];
};

std::vector<void *> keep;  // the live objects, so nothing is reclaimed

__attribute__((noinline)) size_t alloc_nodes(int n) {
  size_t live = 0;
  for (int i = 0; i < n; i++) {
    Node *node = new Node();
    if (i % 4 == 3) {
      delete node;  // sized delete at -O2 (-fsized-deallocation)
      continue;
    }
    keep.push_back(node);
    live += sizeof(Node);
  }
  return live;
}

__attribute__((noinline)) size_t alloc_arrays(int n) {
  size_t live = 0;
  for (int i = 0; i < n; i++) {
    size_t len = 1000 + size_t(i % 4000);
    char *a = new char[len];
    a[0] = char(i);
    if (i % 5 == 4) {
      delete[] a;
      continue;
    }
    keep.push_back(a);
    live += len;
  }
  return live;
}

__attribute__((noinline)) size_t alloc_aligned(int n) {
  size_t live = 0;
  for (int i = 0; i < n; i++) {
    Wide *w = new Wide();  // operator new(size_t, align_val_t)
    if (i % 3 == 2) {
      delete w;  // operator delete(void *, size_t, align_val_t)
      continue;
    }
    keep.push_back(w);
    live += sizeof(Wide);
  }
  return live;
}

__attribute__((noinline)) size_t alloc_nothrow(int n) {
  size_t live = 0;
  for (int i = 0; i < n; i++) {
    size_t len = 2048 + size_t(i % 2048);
    char *a = new (std::nothrow) char[len];
    if (!a) continue;
    if (i % 2 == 1) {
      ::operator delete[](a, std::nothrow);
      continue;
    }
    keep.push_back(a);
    live += len;
  }
  return live;
}

__attribute__((noinline)) size_t alloc_aligned_nothrow(int n) {
  size_t live = 0;
  for (int i = 0; i < n; i++) {
    void *p = ::operator new(1536, std::align_val_t(256), std::nothrow);
    if (!p) continue;
    if (i % 2 == 1) {
      ::operator delete(p, std::align_val_t(256));
      continue;
    }
    keep.push_back(p);
    live += 1536;
  }
  return live;
}

}  // namespace

int main() {
  keep.reserve(600000);
  struct {
    const char *name;
    size_t bytes;
  } parts[] = {
      {"alloc_nodes", alloc_nodes(160000)},
      {"alloc_arrays", alloc_arrays(5000)},
      {"alloc_aligned", alloc_aligned(30000)},
      {"alloc_nothrow", alloc_nothrow(4000)},
      {"alloc_aligned_nothrow", alloc_aligned_nothrow(8000)},
      {"keep", keep.capacity() * sizeof(void *)},
  };
  size_t total = 0;
  for (const auto &p : parts) {
    std::printf("live %s %zu\n", p.name, p.bytes);
    total += p.bytes;
  }
  std::printf("live total %zu\n", total);
  std::fflush(stdout);
  return 0;
}
