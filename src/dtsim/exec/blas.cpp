#include "dtsim/exec/blas.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace dtsim::exec {
namespace {

// Debian's libopenblas0 (through its alternatives), then an unversioned name.
constexpr const char* kLibraries[] = {"libopenblas.so.0", "libopenblas.so"};

template <class Function>
Function symbol(void* library, const char* name) {
  void* address = dlsym(library, name);
  if (address == nullptr) throw std::runtime_error(std::string("OpenBLAS has no ") + name + ": " + dlerror());
  return reinterpret_cast<Function>(address);
}

Blas load() {
  void* library = nullptr;
  for (const char* name : kLibraries) {
    if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  }
  if (library == nullptr) {
    throw std::runtime_error(std::string("cannot load OpenBLAS (libopenblas.so.0): ") + dlerror() +
                             " (install libopenblas0, or run scripts/bootstrap.sh)");
  }
  // Never closed: its threads live as long as the process.
  return {symbol<decltype(&cblas_sgemm)>(library, "cblas_sgemm"),
          symbol<decltype(&openblas_set_num_threads)>(library, "openblas_set_num_threads"),
          symbol<decltype(&openblas_get_config)>(library, "openblas_get_config")};
}

}  // namespace

const Blas& blas() {
  static const Blas loaded = load();
  return loaded;
}

}  // namespace dtsim::exec
