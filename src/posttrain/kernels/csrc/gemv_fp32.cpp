// fp32 GEMV for decode's few rows: AVX-512F FMA of one broadcast x element with 48 weights (outer.h).
#include "outer.h"

namespace outer {
namespace {

struct Fp32Dot {
  using X = float;
  using W = float;
  using V = __m512;
  static constexpr int STEP = 1;
  static inline __m512 load(const float* w) { return _mm512_loadu_ps(w); }
  static inline __m512 broadcast(const float* x) { return _mm512_set1_ps(*x); }
  static inline __m512 fma(__m512 acc, __m512 x, __m512 w) { return _mm512_fmadd_ps(x, w, acc); }
};

}  // namespace
}  // namespace outer

namespace gemv {

void fp32_gemv(int M, const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t K) {
  using outer::Fp32Dot;
  const int64_t Kp = outer::padded_k<Fp32Dot>(K);
  std::vector<float> keep;
  outer::gemv<Fp32Dot>(M, outer::padded_rows(M, x, K, Kp, keep), Kp, w, N, Kp,
                       [&](int m, int64_t n0, int lanes, __m512 sums) {
                         const __mmask16 mask = outer::first_lanes(lanes);
                         const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + n0) : _mm512_setzero_ps();
                         _mm512_mask_storeu_ps(y + m * N + n0, mask, _mm512_add_ps(sums, b));
                       });
}

}  // namespace gemv
