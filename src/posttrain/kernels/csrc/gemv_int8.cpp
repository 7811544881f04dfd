// int8-weight GEMV for decode's few rows (weight-only int8, engine/paged/int8.py): each weight is
// widened to fp32 in registers and multiplied by x in fp32; one scale per output row at the end:
// y[m, n] = scale[n] * (x[m] . W[n]) + b[n]. A step is one 64-byte line of W, 16 weights per
// sub-chunk (gemv.h's driver): a quarter of fp32's bytes for the same work.
#include <c10/util/BFloat16.h>

#include <vector>

#include "gemv.h"

namespace gemv {
namespace {

struct Int8Dot {
  using X = float;  // x widened once per call
  using W = int8_t;
  using Mask = __mmask16;
  static constexpr int SUB = 16;

  template <int G>
  static inline void step(__m512 (&acc)[G][SUMS], const float* x, int64_t xs, const int8_t* w, int64_t k,
                          const StepMasks<Mask, SUB>& masks) {
#pragma GCC unroll 4
    for (int u = 0; u < SUMS; ++u) {
      const int64_t at = k + u * SUB;
      const __m512 wv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(masks.sub[u], w + at)));
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
        acc[g][u] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(masks.sub[u], x + g * xs + at), wv, acc[g][u]);
    }
  }
};

}  // namespace

void int8_gemv(int M, const c10::BFloat16* x, const int8_t* w, const float* scale, const c10::BFloat16* bias,
               c10::BFloat16* y, int64_t N, int64_t K) {
  const std::vector<float> wide(x, x + M * K);
  gemv<Int8Dot>(M, wide.data(), K, w, N, K, [&](int m, int64_t n0, int rows, __m512 sums) {
    store_scaled(y, N, scale, bias, m, n0, rows, sums);
  });
}

}  // namespace gemv
