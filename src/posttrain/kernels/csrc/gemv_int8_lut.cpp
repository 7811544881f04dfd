// int8-weight GEMV on CPUs with AVX-512-BF16 and VBMI: each weight becomes its exact bf16 through
// two byte lookups (`vpermi2b`: 7-bit magnitude -> bf16's high and low byte, 128-entry tables in
// registers), and `vdpbf16ps` multiplies pairs by x in bf16, summing in fp32 (x is bf16 already, so
// no precision is lost against widening to fp32). Five vector ops turn 64 weights into bf16 where
// widening to fp32 takes eight and twice the multiplies (gemv_int8.cpp): from two rows of x on,
// that kernel is slower on Zen 4. The tables are indexed by |q| (at most 127: 7 bits); q's sign bit is
// bf16's sign bit, set by one bit-select. Sums of outer products (outer.h): a step is 4 elements of K
// against a panel's 48 outputs, 192 bytes of W that widen to two bf16 pairs per output; the pack
// puts each byte where its word comes out of the widening (kernels/gemv.py pack_into).
#include <ATen/Parallel.h>  // library headers first: compiled for the module's base ISA
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <array>
#include <vector>

#pragma GCC target("avx512bf16,avx512vbmi")  // the code below only; called where the CPU has both
#include "outer.h"

namespace outer {
namespace {

// bf16 bits of the integer m (0..127), exactly: exponent of its top bit, the bits below as mantissa.
constexpr uint16_t bf16_of(int m) {
  if (m == 0) return 0;
  int top = 6;
  while (!(m >> top)) --top;
  return uint16_t(((127 + top) << 7) | ((m << (7 - top)) & 0x7F));
}

template <bool High>
constexpr std::array<uint8_t, 128> byte_table() {
  std::array<uint8_t, 128> t{};
  for (int m = 0; m < 128; ++m) t[m] = uint8_t(High ? bf16_of(m) >> 8 : bf16_of(m) & 0xFF);
  return t;
}

alignas(64) constexpr std::array<uint8_t, 128> HIGH = byte_table<true>();
alignas(64) constexpr std::array<uint8_t, 128> LOW = byte_table<false>();

struct Int8LutDot {
  using X = uint16_t;  // bf16
  using W = int8_t;
  static constexpr int STEP = 4;  // two vdpbf16ps pairs

  // 64 weights -> bf16 words: first holds bytes 16L + 0..7 of each 128-bit lane L, second 16L + 8..15.
  static inline void widen(__m512i q, __m512bh& first, __m512bh& second) {
    const __m512i m = _mm512_abs_epi8(q);
    const __m512i high = _mm512_permutex2var_epi8(_mm512_load_si512(HIGH.data()), m, _mm512_load_si512(HIGH.data() + 64));
    const __m512i low = _mm512_permutex2var_epi8(_mm512_load_si512(LOW.data()), m, _mm512_load_si512(LOW.data() + 64));
    const __m512i sign = _mm512_set1_epi8(char(0x80));
    const __m512i signed_high = _mm512_ternarylogic_epi32(high, q, sign, 0xF8);  // high | (q & 0x80)
    first = (__m512bh)_mm512_unpacklo_epi8(low, signed_high);
    second = (__m512bh)_mm512_unpackhi_epi8(low, signed_high);
  }

  // Line v of the step holds outputs 16v..16v+15: their pairs k, k+1 widen into first, k+2, k+3
  // into second.
  template <int M>
  static inline void step(__m512 (&acc)[M][VECS], const uint16_t* x, int64_t xs, const int8_t* w, int64_t k) {
    __m512bh first[VECS], second[VECS];
#pragma GCC unroll 3
    for (int v = 0; v < VECS; ++v) widen(_mm512_loadu_si512(w + 64 * v), first[v], second[v]);
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      const __m512bh x01 = (__m512bh)pair(x + m * xs + k), x23 = (__m512bh)pair(x + m * xs + k + 2);
#pragma GCC unroll 3
      for (int v = 0; v < VECS; ++v) {
        acc[m][v] = _mm512_dpbf16_ps(acc[m][v], x01, first[v]);
        acc[m][v] = _mm512_dpbf16_ps(acc[m][v], x23, second[v]);
      }
    }
  }
};

}  // namespace
}  // namespace outer

namespace gemv {

// y[m, n] = bf16(scale[n] * (x[m] . q[n]) + b[n]).
void int8_lut_gemv(int M, const c10::BFloat16* x, const int8_t* w, const float* scale, const c10::BFloat16* bias,
                   c10::BFloat16* y, int64_t N, int64_t K) {
  using outer::Int8LutDot;
  const int64_t Kp = outer::padded_k<Int8LutDot>(K);
  std::vector<uint16_t> keep;
  const uint16_t* xp = padded_rows<uint16_t>(M, reinterpret_cast<const uint16_t*>(x), K, Kp, keep);
  outer::gemv<Int8LutDot>(M, xp, Kp, w, N, Kp, [&](int m, int64_t n0, int lanes, __m512 sums) {
    const __mmask16 mask = outer::first_lanes(lanes);
    outer::store_bf16(reinterpret_cast<uint16_t*>(y) + m * N + n0,
                      bias ? reinterpret_cast<const uint16_t*>(bias) + n0 : nullptr, mask,
                      _mm512_mul_ps(sums, _mm512_maskz_loadu_ps(mask, scale + n0)));
  });
}

}  // namespace gemv
