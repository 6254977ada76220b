// Sets XnnpackBackend options through ExecuTorch's backend option API.
//
// The executorch pip wheel's Python bindings expose no way to call
// executorch::runtime::set_option, so this tiny shim is compiled against the
// wheel's headers and libexecutorch.so and loaded with ctypes in the same
// process as the bindings (both resolve the same libexecutorch.so, hence the
// same backend registry).
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>

#include <cstring>

using executorch::runtime::BackendOption;
using executorch::runtime::Error;
using executorch::runtime::Span;

namespace {

int set_bool(const char* key, bool value) {
  BackendOption option;
  std::strncpy(option.key, key, sizeof(option.key) - 1);
  option.value = value;
  Error err = executorch::runtime::set_option(
      "XnnpackBackend", Span<BackendOption>(&option, 1));
  return static_cast<int>(err);
}

int get_bool(const char* key, int* out) {
  BackendOption option;
  std::strncpy(option.key, key, sizeof(option.key) - 1);
  option.value = false;
  Error err = executorch::runtime::get_option(
      "XnnpackBackend", Span<BackendOption>(&option, 1));
  if (err == Error::Ok) {
    const bool* value = std::get_if<bool>(&option.value);
    *out = (value != nullptr && *value) ? 1 : 0;
  }
  return static_cast<int>(err);
}

}  // namespace

extern "C" {

// Returns the executorch::runtime::Error code (0 = Ok).
int pteforge_xnnpack_set_weight_cache(int enabled) {
  return set_bool("weight_cache_enabled", enabled != 0);
}

// Writes 1 or 0 to *enabled; returns the Error code (0 = Ok).
int pteforge_xnnpack_get_weight_cache(int* enabled) {
  return get_bool("weight_cache_enabled", enabled);
}

}
