#pragma once
/// OpenBLAS, opened on first use. Linked at start-up it would start its
/// thread pool in every dtsim process, `simulate` and `list` included, which
/// never multiply a matrix: about half of a short command's start-up time.
/// Only the real executor and the calibration call into it, through this.
#include <cblas.h>

namespace dtsim::exec {

struct Blas {
  decltype(&cblas_sgemm) sgemm;
  decltype(&openblas_set_num_threads) set_num_threads;
  decltype(&openblas_get_config) get_config;
};

/// The library's entry points, loaded the first time this is called (the
/// dynamic loader keeps one copy per process, so this does too). Throws
/// std::runtime_error naming the library when it cannot be loaded.
const Blas& blas();

}  // namespace dtsim::exec
