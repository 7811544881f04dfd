// bf16 kernel for every linear call: AVX-512-BF16 `vdpbf16ps` of one broadcast pair of x elements
// with 48 pairs of weights (outer.h); fp32 sums, one rounding to bf16 at the end.
#include <ATen/Parallel.h>  // library headers first: compiled for the module's base ISA
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#pragma GCC target("avx512bf16")  // the code below only; the module calls it where the CPU has the flag
#include "outer.h"

namespace outer {
namespace {

struct Bf16Dot {
  using X = uint16_t;
  using W = uint16_t;
  static constexpr int STEP = 2;  // vdpbf16ps adds a pair of products per fp32 lane

  template <int M>
  static inline void step(__m512 (&acc)[M][VECS], const uint16_t* x, int64_t xs, const uint16_t* w, int64_t k) {
    __m512bh wv[VECS];
#pragma GCC unroll 3
    for (int v = 0; v < VECS; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(w + 32 * v);
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      const __m512bh xb = (__m512bh)pair(x + m * xs + k);
#pragma GCC unroll 3
      for (int v = 0; v < VECS; ++v) acc[m][v] = _mm512_dpbf16_ps(acc[m][v], xb, wv[v]);
    }
  }
};

}  // namespace
}  // namespace outer

namespace gemv {

void bf16_gemv(int M, const c10::BFloat16* x, const c10::BFloat16* w, const c10::BFloat16* bias, c10::BFloat16* y,
               int64_t N, int64_t K) {
  using outer::Bf16Dot;
  const int64_t Kp = outer::padded_k<Bf16Dot>(K);
  std::vector<uint16_t> keep;
  const uint16_t* xp = padded_rows<uint16_t>(M, reinterpret_cast<const uint16_t*>(x), K, Kp, keep);
  outer::gemv<Bf16Dot>(M, xp, Kp, reinterpret_cast<const uint16_t*>(w), N, Kp,
                       [&](int m, int64_t n0, int lanes, __m512 sums) {
                         outer::store_bf16(reinterpret_cast<uint16_t*>(y) + m * N + n0,
                                           bias ? reinterpret_cast<const uint16_t*>(bias) + n0 : nullptr,
                                           outer::first_lanes(lanes), sums);
                       });
}

}  // namespace gemv
