// int8-weight GEMV on CPUs with AVX-512-BF16 and VBMI: each weight becomes its exact bf16 through
// two byte lookups (`vpermi2b`: 7-bit magnitude -> bf16's high and low byte, 128-entry tables in
// registers), and `vdpbf16ps` multiplies pairs by x in bf16, summing in fp32 (x is bf16 already, so
// no precision is lost against widening to fp32). Five vector ops turn 64 weights into bf16 where
// widening to fp32 takes eight and twice the multiplies (gemv_int8.cpp): from two rows of x on,
// that kernel is slower on Zen 4. The tables are indexed by |q| (at most 127: 7 bits); q's sign bit is
// bf16's sign bit, set by one bit-select. x comes laid out in the order the bf16 words come out
// (`lookup_order`).
#include <ATen/Parallel.h>  // library headers first: compiled for the module's base ISA
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <array>
#include <vector>

#pragma GCC target("avx512bf16,avx512vbmi")  // the code below only; called where the CPU has both
#include "gemv.h"

namespace gemv {
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

constexpr int64_t LINE = 64;  // weights widened together

struct Int8LutDot {
  using X = uint16_t;  // bf16, in lookup_order
  using W = int8_t;
  static constexpr int SUB = LINE;  // a step: one line of each panel row, two vdpbf16ps per row of x

  // 64 weights -> bf16 words: first holds elements 16L + 0..7 of each 128-bit lane L, second 16L + 8..15.
  static inline void widen(__m512i q, __m512bh& first, __m512bh& second) {
    const __m512i m = _mm512_abs_epi8(q);
    const __m512i high = _mm512_permutex2var_epi8(_mm512_load_si512(HIGH.data()), m, _mm512_load_si512(HIGH.data() + 64));
    const __m512i low = _mm512_permutex2var_epi8(_mm512_load_si512(LOW.data()), m, _mm512_load_si512(LOW.data() + 64));
    const __m512i sign = _mm512_set1_epi8(char(0x80));
    const __m512i signed_high = _mm512_ternarylogic_epi32(high, q, sign, 0xF8);  // high | (q & 0x80)
    first = (__m512bh)_mm512_unpacklo_epi8(low, signed_high);
    second = (__m512bh)_mm512_unpackhi_epi8(low, signed_high);
  }

  template <int G>
  static inline void step(__m512 (&acc)[G][TILE], const uint16_t* x, int64_t xs, const int8_t* w, int64_t k) {
#pragma GCC unroll 4
    for (int r = 0; r < TILE; ++r) {
      __m512bh first, second;
      widen(_mm512_loadu_si512(w + r * SUB), first, second);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const uint16_t* xg = x + g * xs + k;
        acc[g][r] = _mm512_dpbf16_ps(acc[g][r], (__m512bh)_mm512_loadu_si512(xg), first);
        acc[g][r] = _mm512_dpbf16_ps(acc[g][r], (__m512bh)_mm512_loadu_si512(xg + 32), second);
      }
    }
  }
};

// x [M, K] -> [M, K rounded up to a step, zeros after K], each line's words in widen's order.
std::vector<uint16_t> lookup_order(int M, const c10::BFloat16* x, int64_t K, int64_t padded) {
  std::vector<uint16_t> out(size_t(M) * padded, 0);
  for (int m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t line = k / LINE, e = k % LINE, lane = e / 16, i = e % 16;
      out[m * padded + line * LINE + (i < 8 ? 0 : 32) + lane * 8 + i % 8] = x[m * K + k].x;
    }
  return out;
}

}  // namespace

void int8_lut_gemv(int M, const c10::BFloat16* x, const int8_t* w, const float* scale, const c10::BFloat16* bias,
                   c10::BFloat16* y, int64_t N, int64_t K) {
  const int64_t Kp = padded_k<Int8LutDot>(K);
  const std::vector<uint16_t> xo = lookup_order(M, x, K, Kp);
  gemv<Int8LutDot>(M, xo.data(), Kp, w, N, Kp, [&](int m, int64_t n0, int rows, __m512 sums) {
    store_scaled(y, N, scale, bias, m, n0, rows, sums);
  });
}

}  // namespace gemv
