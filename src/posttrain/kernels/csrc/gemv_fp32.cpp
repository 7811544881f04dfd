// fp32 GEMV for decode's few rows: AVX-512F FMA, 16 weights per sub-chunk (gemv.h's driver).
#include "gemv.h"

namespace gemv {
namespace {

struct Fp32Dot {
  using X = float;
  using W = float;
  static constexpr int SUB = 16;

  template <int G>
  static inline void step(__m512 (&acc)[G][TILE], const float* x, int64_t xs, const float* w, int64_t k) {
    __m512 wv[TILE];
#pragma GCC unroll 4
    for (int r = 0; r < TILE; ++r) wv[r] = _mm512_loadu_ps(w + r * SUB);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const __m512 xv = _mm512_loadu_ps(x + g * xs + k);
#pragma GCC unroll 4
      for (int r = 0; r < TILE; ++r) acc[g][r] = _mm512_fmadd_ps(xv, wv[r], acc[g][r]);
    }
  }
};

}  // namespace

void fp32_gemv(int M, const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t K) {
  const int64_t Kp = padded_k<Fp32Dot>(K);
  std::vector<float> keep;
  gemv<Fp32Dot>(M, padded_rows<float>(M, x, K, Kp, keep), Kp, w, N, Kp, [&](int m, int64_t n0, int rows, __m512 sums) {
    const __mmask16 mask = first_lanes(rows);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + n0) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(y + m * N + n0, mask, _mm512_add_ps(sums, b));
  });
}

}  // namespace gemv
