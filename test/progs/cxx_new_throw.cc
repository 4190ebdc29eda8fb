// cprof's operator new when the operator new underneath throws, for
// test/e2e/heap_allocators.sh. While the next operator new runs, the
// thread's heap countdown is held so that the malloc it calls is not
// counted again; a std::bad_alloc thrown through cprof's operator new must
// still give the countdown back, or the thread would never be sampled
// again. Checks it on the unsampled path (a huge rate: the request is
// charged and not sampled) and on the sampled one (rate 1), with the
// address space limited to 1 GiB so that a 2 GiB request fails, then that
// sampling goes on: at rate 1, 1000 new Node of 256 bytes are 256000
// bytes in the heap profile written to OUT.pb.gz, counted once although
// libstdc++'s operator new calls malloc. Prints "ok" lines; exits 1 on
// a failed check.
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <new>

#include "cprof.h"

extern "C" uint64_t cprof__heap_thread_countdown(void);

namespace {

struct Node {
  char payload[248];
  Node *next;
};

int failures = 0;
char *volatile escaped;  // so that the compiler keeps the new and delete

void check(bool ok, const char *what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) failures++;
}

__attribute__((noinline)) bool huge_new_throws() {
  try {
    escaped = new char[(size_t)2 << 30];
    delete[] escaped;
    return false;
  } catch (const std::bad_alloc &) {
    return true;
  }
}

__attribute__((noinline)) Node *keep_nodes(int n) {
  Node *head = nullptr;
  for (int i = 0; i < n; i++) {
    Node *node = new Node();
    node->next = head;
    head = node;
  }
  return head;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.pb.gz\n", argv[0]);
    return 2;
  }
  struct rlimit lim = {(rlim_t)1 << 30, (rlim_t)1 << 30};  // 1 GiB
  if (setrlimit(RLIMIT_AS, &lim) != 0) return 2;

  // Unsampled: at a rate of 2^40 bytes the countdown outlasts 2 GiB.
  cprof_heap_set_rate((long)1 << 40);
  uint64_t before = cprof__heap_thread_countdown();
  bool thrown = huge_new_throws();
  uint64_t after = cprof__heap_thread_countdown();
  check(thrown, "unsampled: new char[2 GiB] threw std::bad_alloc");
  // Once with the request; an operator new underneath that does not come
  // back to cprof (jemalloc's) charges the exception object's allocation,
  // a few hundred bytes, on top.
  uint64_t charged = before - after;
  std::printf("unsampled: charged %llu bytes\n", (unsigned long long)charged);
  check(after < before && charged >= ((uint64_t)2 << 30) &&
            charged < ((uint64_t)2 << 30) + 4096,
        "unsampled: the countdown is back, charged with the request once");

  // Sampled: at rate 1 every request is, and the countdown stays 0.
  cprof_heap_set_rate(1);
  thrown = huge_new_throws();
  check(thrown, "sampled: new char[2 GiB] threw std::bad_alloc");
  check(cprof__heap_thread_countdown() == 0,
        "sampled: the countdown is back (0 at rate 1)");

  Node *live = keep_nodes(1000);
  int err = cprof_profile_write_file("heap", 0, argv[1]);
  check(err == 0, "heap profile written");
  while (live) {
    Node *next = live->next;
    delete live;
    live = next;
  }
  return failures ? 1 : 0;
}
