/*
 * A native Node.js addon, built by e2e/runtimes.sh with cc -O2 -shared and
 * no frame-pointer flags, as addons usually are. It exports hot(n), whose
 * work is in hot_kernel, called from JavaScript in a loop: the CPU profile
 * must find hot_kernel with V8's and node's frames below it, down to main.
 *
 * Node-API is a stable C ABI, so the few declarations it needs are written
 * here: the test builds without node's headers.
 */
#include <stddef.h>
#include <stdint.h>

typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef struct napi_callback_info__ *napi_callback_info;
typedef int napi_status;
typedef napi_value (*napi_callback)(napi_env env, napi_callback_info info);

napi_status napi_create_function(napi_env env, const char *name, size_t len,
                                 napi_callback cb, void *data,
                                 napi_value *result);
napi_status napi_set_named_property(napi_env env, napi_value object,
                                    const char *name, napi_value value);
napi_status napi_get_cb_info(napi_env env, napi_callback_info info,
                             size_t *argc, napi_value *argv,
                             napi_value *this_arg, void **data);
napi_status napi_get_value_double(napi_env env, napi_value value,
                                  double *result);
napi_status napi_create_double(napi_env env, double value, napi_value *result);

/* The hot function: a hash over n rounds. */
__attribute__((noinline)) static double hot_kernel(double n) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < (uint64_t)n; i++) h = (h ^ (i & 255)) * 1099511628211ull;
  return (double)(h >> 11);
}

static napi_value hot(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out = NULL;
  double n = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != 0 || argc < 1 ||
      napi_get_value_double(env, argv[0], &n) != 0)
    return NULL;
  napi_create_double(env, hot_kernel(n), &out);
  return out;
}

__attribute__((visibility("default"))) napi_value
napi_register_module_v1(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "hot", (size_t)-1, hot, NULL, &fn) == 0)
    napi_set_named_property(env, exports, "hot", fn);
  return exports;
}
