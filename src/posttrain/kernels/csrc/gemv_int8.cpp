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
  static constexpr int SUB = 16;

  template <int G>
  static inline void step(__m512 (&acc)[G][TILE], const float* x, int64_t xs, const int8_t* w, int64_t k) {
    __m512 wv[TILE];
#pragma GCC unroll 4
    for (int r = 0; r < TILE; ++r)
      wv[r] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + r * SUB))));
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const __m512 xv = _mm512_loadu_ps(x + g * xs + k);
#pragma GCC unroll 4
      for (int r = 0; r < TILE; ++r) acc[g][r] = _mm512_fmadd_ps(xv, wv[r], acc[g][r]);
    }
  }
};

}  // namespace

void int8_gemv(int M, const c10::BFloat16* x, const int8_t* w, const float* scale, const c10::BFloat16* bias,
               c10::BFloat16* y, int64_t N, int64_t K) {
  const int64_t Kp = padded_k<Int8Dot>(K);
  std::vector<float> wide;
  gemv<Int8Dot>(M, padded_rows<float>(M, x, K, Kp, wide), Kp, w, N, Kp, [&](int m, int64_t n0, int rows, __m512 sums) {
    store_scaled(y, N, scale, bias, m, n0, rows, sums);
  });
}

}  // namespace gemv
