/*
 * plain_images_dlopen LIB: dlopens LIB (e2e/images_truncated.sh gives it a
 * copy of libimgtail.so truncated where its unwind data starts), starts a
 * thread that burns about 0.3 s of CPU in the library's imgtail_burn,
 * joins it, burns 0.2 s in images_main_burn and exits 0; 1 when LIB
 * cannot be loaded or the thread not started. Knows nothing of cprof.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static _Atomic uint64_t sink;
static void (*burn)(double);

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void images_main_burn(double seconds) {
  double end = cpu_now() + seconds;
  while (cpu_now() < end) {
    uint64_t x = atomic_load_explicit(&sink, memory_order_relaxed);
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ull + (uint64_t)i;
    atomic_store_explicit(&sink, x, memory_order_relaxed);
  }
}

static void *worker(void *arg) {
  (void)arg;
  burn(0.3);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: plain_images_dlopen LIB\n");
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "plain_images_dlopen: %s\n", dlerror());
    return 1;
  }
  *(void **)&burn = dlsym(h, "imgtail_burn");
  if (!burn) {
    fprintf(stderr, "plain_images_dlopen: no imgtail_burn\n");
    return 1;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0) {
    fprintf(stderr, "plain_images_dlopen: pthread_create failed\n");
    return 1;
  }
  pthread_join(t, NULL);
  images_main_burn(0.2);
  return 0;
}
