// Type conversions shared by the binding files of `ddppo_hpc._core`.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace ddppo_bindings {

namespace nb = nanobind;

template <typename T>
using Column = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <typename T, int64_t... Shape>
using Out = nb::ndarray<T, nb::shape<Shape...>, nb::c_contig, nb::device::cpu>;

// Hands a vector to NumPy without a copy.
template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> to_numpy(std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(owned->data(), {owned->size()}, owner);
}

// The GPU-cluster part of the module (bindings_gpu.cpp).
void bind_gpu(nb::module_& m);

}  // namespace ddppo_bindings
