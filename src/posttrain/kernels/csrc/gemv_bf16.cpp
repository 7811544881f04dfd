// bf16 GEMV for decode's few rows: AVX-512-BF16 `vdpbf16ps` (a pair of products per fp32 lane),
// 32 weights per sub-chunk (gemv.h's driver); fp32 sums, one rounding to bf16 at the end.
#include <ATen/Parallel.h>  // library headers first: compiled for the module's base ISA
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#pragma GCC target("avx512bf16")  // the code below only; the module calls it where the CPU has the flag
#include "gemv.h"

namespace gemv {
namespace {

struct Bf16Dot {
  using X = uint16_t;
  using W = uint16_t;
  using Mask = __mmask32;
  static constexpr int SUB = 32;

  template <int G>
  static inline void step(__m512 (&acc)[G][SUMS], const uint16_t* x, int64_t xs, const uint16_t* w, int64_t k,
                          const StepMasks<Mask, SUB>& masks) {
#pragma GCC unroll 4
    for (int u = 0; u < SUMS; ++u) {
      const int64_t at = k + u * SUB;
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(masks.sub[u], w + at);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
        acc[g][u] = _mm512_dpbf16_ps(acc[g][u], (__m512bh)_mm512_maskz_loadu_epi16(masks.sub[u], x + g * xs + at), wv);
    }
  }
};

}  // namespace

void bf16_gemv(int M, const c10::BFloat16* x, const c10::BFloat16* w, const c10::BFloat16* bias, c10::BFloat16* y,
               int64_t N, int64_t K) {
  gemv<Bf16Dot>(M, reinterpret_cast<const uint16_t*>(x), K, reinterpret_cast<const uint16_t*>(w), N, K,
                [&](int m, int64_t n0, int rows, __m512 sums) {
                  alignas(64) float s[BLOCK];
                  _mm512_store_ps(s, sums);
                  for (int r = 0; r < rows; ++r)  // c10's rounding to bf16, as torch's ops round
                    y[m * N + n0 + r] = c10::BFloat16(s[r] + (bias ? float(bias[n0 + r]) : 0.0f));
                });
}

}  // namespace gemv
