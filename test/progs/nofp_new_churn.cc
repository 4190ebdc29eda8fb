// operator new/delete churn on two threads with small random sizes and a
// small live window, as bench/plain_churn.c does with malloc and free:
// built as distributions build programs and without cprof, so that
// bench/heap_cxx.sh runs the same binary on glibc, jemalloc and tcmalloc
// with and without cprof preloaded. Half the blocks are arrays (new[] and
// delete[]), half single objects freed with sized delete.
//   nofp_new_churn [MILLIONS_OF_OPERATIONS_PER_THREAD]
#include <cstdint>
#include <cstdlib>
#include <new>
#include <thread>

namespace {

long ops;

template <size_t N>
struct Block {
  char bytes[N];
};

void churn(unsigned seed) {
  void *live[64] = {};
  size_t sizes[64] = {};
  for (long i = 0; i < ops; i++) {
    seed = seed * 1103515245u + 12345u;
    unsigned slot = (seed >> 16) % 64;
    if (live[slot]) {
      if (sizes[slot])
        ::operator delete(live[slot], sizes[slot]);
      else
        delete[] static_cast<char *>(live[slot]);
    }
    size_t n = 16 + (seed >> 4) % 496;
    if (seed & 1) {
      live[slot] = ::operator new(n);
      sizes[slot] = n;
    } else {
      live[slot] = new char[n];
      sizes[slot] = 0;
    }
    *static_cast<volatile char *>(live[slot]) = 1;
  }
  for (int i = 0; i < 64; i++) {
    if (!live[i]) continue;
    if (sizes[i])
      ::operator delete(live[i], sizes[i]);
    else
      delete[] static_cast<char *>(live[i]);
  }
}

}  // namespace

int main(int argc, char **argv) {
  ops = long((argc > 1 ? std::atof(argv[1]) : 20) * 1000000);
  std::thread a(churn, 1u), b(churn, 2u);
  a.join();
  b.join();
  return 0;
}
