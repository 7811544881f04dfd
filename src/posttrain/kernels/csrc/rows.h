// x's rows padded for a packed layout, shared by gemv.h and outer.h (internal linkage: each
// kernel's file compiles it for its own ISA).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace {

// x [M, K] as rows Kp long (zeros past K) in X's type: x itself where nothing changes, else a copy in keep.
template <typename X, typename T>
const X* padded_rows(int64_t M, const T* x, int64_t K, int64_t Kp, std::vector<X>& keep) {
  if (K == Kp && std::is_same<X, T>::value) return reinterpret_cast<const X*>(x);
  keep.assign(size_t(M) * Kp, X(0));
  for (int64_t m = 0; m < M; ++m) std::copy(x + m * K, x + (m + 1) * K, keep.begin() + m * Kp);
  return keep.data();
}

}  // namespace
