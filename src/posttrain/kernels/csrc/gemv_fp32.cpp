// fp32 GEMV for decode's few rows: AVX-512F FMA, 16 weights per sub-chunk (gemv.h's driver).
#include "gemv.h"

namespace gemv {
namespace {

struct Fp32Dot {
  using X = float;
  using W = float;
  using Mask = __mmask16;
  static constexpr int SUB = 16;

  template <int G>
  static inline void step(__m512 (&acc)[G][SUMS], const float* x, int64_t xs, const float* w, int64_t k,
                          const StepMasks<Mask, SUB>& masks) {
#pragma GCC unroll 4
    for (int u = 0; u < SUMS; ++u) {
      const int64_t at = k + u * SUB;
      const __m512 wv = _mm512_maskz_loadu_ps(masks.sub[u], w + at);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
        acc[g][u] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(masks.sub[u], x + g * xs + at), wv, acc[g][u]);
    }
  }
};

}  // namespace

void fp32_gemv(int M, const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t K) {
  gemv<Fp32Dot>(M, x, K, w, N, K, [&](int m, int64_t n0, int rows, __m512 sums) {
    const __mmask16 mask = first_lanes(rows);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + n0) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(y + m * N + n0, mask, _mm512_add_ps(sums, b));
  });
}

}  // namespace gemv
