// C++ allocations for test/e2e/heap.sh: make_nodes() allocates with
// new, drop_nodes() frees with delete, and the heap profile must name
// make_nodes (the caller of operator new) with file:line. Usage:
//   heap_cxx OUT.pb.gz
#include <cstdio>
#include <vector>

#include "cprof.h"

namespace {

struct Node {
  char payload[256];
  Node *next;
};

__attribute__((noinline)) Node *make_nodes(int n) {
  Node *head = nullptr;
  for (int i = 0; i < n; i++) {
    Node *node = new Node();
    node->next = head;
    head = node;
  }
  return head;
}

__attribute__((noinline)) void drop_nodes(Node *head) {
  while (head) {
    Node *next = head->next;
    delete head;
    head = next;
  }
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.pb.gz\n", argv[0]);
    return 2;
  }
  Node *garbage = make_nodes(1000);
  drop_nodes(garbage);
  Node *live = make_nodes(4000);
  std::vector<int> v(1000, 1);
  int err = cprof_profile_write_file("heap", 0, argv[1]);
  if (err) {
    std::fprintf(stderr, "heap_cxx: error %d\n", err);
    return 1;
  }
  drop_nodes(live);
  return v[0] == 1 ? 0 : 1;
}
