// bf16 GEMV for decode's few rows: AVX-512-BF16 `vdpbf16ps` of one broadcast pair of x elements
// with 48 pairs of weights (outer.h); fp32 sums, one rounding to bf16 at the end.
#include <ATen/Parallel.h>  // library headers first: compiled for the module's base ISA
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <cstring>

#pragma GCC target("avx512bf16")  // the code below only; the module calls it where the CPU has the flag
#include "outer.h"

namespace outer {
namespace {

struct Bf16Dot {
  using X = uint16_t;
  using W = uint16_t;
  using V = __m512bh;
  static constexpr int STEP = 2;  // vdpbf16ps adds a pair of products per fp32 lane
  static inline __m512bh load(const uint16_t* w) { return (__m512bh)_mm512_loadu_si512(w); }
  static inline __m512bh broadcast(const uint16_t* x) {
    int32_t pair;
    std::memcpy(&pair, x, sizeof pair);
    return (__m512bh)_mm512_set1_epi32(pair);
  }
  static inline __m512 fma(__m512 acc, __m512bh x, __m512bh w) { return _mm512_dpbf16_ps(acc, x, w); }
};

}  // namespace
}  // namespace outer

namespace gemv {

void bf16_gemv(int M, const c10::BFloat16* x, const c10::BFloat16* w, const c10::BFloat16* bias, c10::BFloat16* y,
               int64_t N, int64_t K) {
  using outer::Bf16Dot;
  const int64_t Kp = outer::padded_k<Bf16Dot>(K);
  std::vector<uint16_t> keep;
  const uint16_t* xp = outer::padded_rows(M, reinterpret_cast<const uint16_t*>(x), K, Kp, keep);
  outer::gemv<Bf16Dot>(M, xp, Kp, reinterpret_cast<const uint16_t*>(w), N, Kp,
                       [&](int m, int64_t n0, int lanes, __m512 sums) {
                         const __mmask16 mask = outer::first_lanes(lanes);
                         if (bias) {  // bf16 -> fp32 is exact: the bits moved up 16
                           const __m256i b = _mm256_maskz_loadu_epi16(mask, bias + n0);
                           sums = _mm512_add_ps(sums, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16)));
                         }
                         // round to nearest even, as c10 and torch's ops round
                         _mm256_mask_storeu_epi16(y + m * N + n0, mask, (__m256i)_mm512_cvtneps_pbh(sums));
                       });
}

}  // namespace gemv
