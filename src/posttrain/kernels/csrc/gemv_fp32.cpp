// fp32 kernel for every linear call: AVX-512F FMA of one broadcast x element with 48 weights (outer.h).
#include "outer.h"

namespace outer {
namespace {

struct Fp32Dot {
  using X = float;
  using W = float;
  static constexpr int STEP = 1;

  template <int M>
  static inline void step(__m512 (&acc)[M][VECS], const float* x, int64_t xs, const float* w, int64_t k) {
    __m512 wv[VECS];
#pragma GCC unroll 3
    for (int v = 0; v < VECS; ++v) wv[v] = _mm512_loadu_ps(w + 16 * v);
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      const __m512 xb = _mm512_set1_ps(x[m * xs + k]);
#pragma GCC unroll 3
      for (int v = 0; v < VECS; ++v) acc[m][v] = _mm512_fmadd_ps(xb, wv[v], acc[m][v]);
    }
  }
};

}  // namespace
}  // namespace outer

namespace gemv {

void fp32_gemv(int M, const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t K) {
  using outer::Fp32Dot;
  const int64_t Kp = outer::padded_k<Fp32Dot>(K);
  std::vector<float> keep;
  outer::gemv<Fp32Dot>(M, padded_rows<float>(M, x, K, Kp, keep), Kp, w, N, Kp,
                       [&](int m, int64_t n0, int lanes, __m512 sums) {
                         const __mmask16 mask = outer::first_lanes(lanes);
                         const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + n0) : _mm512_setzero_ps();
                         _mm512_mask_storeu_ps(y + m * N + n0, mask, _mm512_add_ps(sums, b));
                       });
}

}  // namespace gemv
