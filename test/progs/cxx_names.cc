// A C++ program for the demangling test (test/e2e/symbolize_cxx.sh): it
// symbolizes call sites inside a namespaced class method, a function
// template instance and a namespaced free function with cprof's internal
// symbolizer and prints one "name|system_name" line per frame. It calls
// std::get_new_handler so that libstdc++ (and with it __cxa_demangle) is
// loaded: operator new alone no longer needs it, cprof's static library
// defining one.
#include <cstdint>
#include <cstdio>
#include <new>

extern "C" {
#include "encode/symbolize.h"
}

namespace {
volatile uintptr_t sink;

__attribute__((noinline)) uintptr_t call_site() {
  uintptr_t ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  __asm__ volatile("");
  return ra - 1;
}
}  // namespace

namespace ns {

class Widget {
 public:
  __attribute__((noinline)) uintptr_t method();
  int value = 7;
};

uintptr_t Widget::method() {
  uintptr_t pc = call_site();
  sink += pc + static_cast<uintptr_t>(value);
  return pc;
}

template <typename T>
__attribute__((noinline)) uintptr_t twice(T x) {
  uintptr_t pc = call_site();
  sink += pc + static_cast<uintptr_t>(x + x);
  return pc;
}

__attribute__((noinline)) uintptr_t helper(int x) {
  uintptr_t pc = call_site();
  sink += pc + static_cast<uintptr_t>(x);
  return pc;
}

}  // namespace ns

int main() {
  if (std::get_new_handler()) return 1;
  ns::Widget *w = new ns::Widget();
  uintptr_t pcs[] = {w->method(), ns::twice<int>(3), ns::helper(5)};
  delete w;

  cprof__sym_lock();
  int err = cprof__sym_refresh();
  if (err) {
    std::fprintf(stderr, "cprof__sym_refresh: %d\n", err);
    cprof__sym_unlock();
    return 1;
  }
  for (uintptr_t pc : pcs) {
    const cprof__sym_result *r = cprof__sym_lookup(pc);
    if (!r || r->nframes == 0) {
      std::printf("?|?\n");
      continue;
    }
    for (int i = 0; i < r->nframes; i++)
      std::printf("%s|%s\n", r->frames[i].name, r->frames[i].system_name);
  }
  cprof__sym_unlock();
  return 0;
}
