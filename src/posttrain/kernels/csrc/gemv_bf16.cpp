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
  static constexpr int SUB = 32;

  template <int G>
  static inline void step(__m512 (&acc)[G][TILE], const uint16_t* x, int64_t xs, const uint16_t* w, int64_t k) {
    __m512bh wv[TILE];
#pragma GCC unroll 4
    for (int r = 0; r < TILE; ++r) wv[r] = (__m512bh)_mm512_loadu_si512(w + r * SUB);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + g * xs + k);
#pragma GCC unroll 4
      for (int r = 0; r < TILE; ++r) acc[g][r] = _mm512_dpbf16_ps(acc[g][r], xv, wv[r]);
    }
  }
};

}  // namespace

void bf16_gemv(int M, const c10::BFloat16* x, const c10::BFloat16* w, const c10::BFloat16* bias, c10::BFloat16* y,
               int64_t N, int64_t K) {
  const int64_t Kp = padded_k<Bf16Dot>(K);
  std::vector<uint16_t> keep;
  const uint16_t* xp = padded_rows<uint16_t>(M, reinterpret_cast<const uint16_t*>(x), K, Kp, keep);
  gemv<Bf16Dot>(M, xp, Kp, reinterpret_cast<const uint16_t*>(w), N, Kp,
                [&](int m, int64_t n0, int rows, __m512 sums) {
                  alignas(64) float s[BLOCK];
                  _mm512_store_ps(s, sums);
                  for (int r = 0; r < rows; ++r)  // c10's rounding to bf16, as torch's ops round
                    y[m * N + n0 + r] = c10::BFloat16(s[r] + (bias ? float(bias[n0 + r]) : 0.0f));
                });
}

}  // namespace gemv
