// The fp32, bf16 and int8_lut kernels' driver: y[M, N] = x[M, K] W[N, K]^T as sums of outer
// products, GROUP rows of x at a time, any number of rows. W is packed (kernels/gemv.py pack) in
// panels of TILE = 48 output rows: step by step along K, the STEP consecutive weights of each of
// the 48 rows side by side ([N / TILE][K / STEP][TILE][STEP], zeros past N and K), so a panel is
// one sequential stream.
//
// Each step loads the panel's three vectors of weights (48 outputs; int8: widened to bf16 first)
// and, per row of x, broadcasts its STEP elements and adds the products into three accumulators:
// one weight load serves every row of x, one broadcast 48 outputs, and 8 rows keep 24 independent
// chains in registers with no reduction across lanes at the end. Against gemv.h's dot-product tiles
// (4 rows of x at a time, a second group re-reading the panel) this streams W at close to a plain
// read's rate at 8 rows on AMD EPYC Zen 4: there the tiles' memory and arithmetic did not overlap,
// the outer products do (BENCHMARKS.md, issue 34).
//
// Each output (m, n) is one accumulator lane summed in K's order: its result depends only on K, not
// on M or the rows beside it.
//
// Everything here has internal linkage: each kernel's file compiles it for its own ISA.
#pragma once

#include <ATen/Parallel.h>
#include <immintrin.h>

#include "rows.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace outer {
namespace {

constexpr int GROUP = 8;  // rows of x a panel meets at once
constexpr int64_t ROWS = 256;  // rows of x a pass over W takes (fp32, K = 1536: 1.5 MB of x)
constexpr int VECS = 3;  // accumulators per row of x: 8 rows * 3 + 3 weights + 1 broadcast of 32 registers
constexpr int TILE = 16 * VECS;  // outputs per panel (the module's tile for these kernels)
// From this many rows on the kernel prefetches into L2 PREFETCH_BYTES ahead: there arithmetic
// outpaces the hardware prefetcher (a stand-alone prototype on Zen 4: 8 rows 10-15% faster with it,
// 4 rows slower; 4 KB ahead slower than 8 or 16 KB).
constexpr int PREFETCH_FROM_ROWS = 5;
constexpr int PREFETCH_BYTES = 16 * 1024;

// One panel (Kp / STEP steps) against M rows of x (xs elements apart): out[m][v] = lanes of outputs
// 16v..16v+15. Dot is one weight format: Dot::step<M>(acc, x, xs, w, k) adds the products of the
// step's weights (w) and each row's elements k..k+STEP-1 into acc.
template <typename Dot, int M, bool Prefetch>
inline void panel(const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t Kp, __m512 (&out)[M][VECS]) {
  constexpr int64_t STEP_BYTES = TILE * Dot::STEP * int64_t(sizeof(typename Dot::W));
  __m512 acc[M][VECS];  // local and every loop over it unrolled, else GCC keeps it in memory
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 3
    for (int v = 0; v < VECS; ++v) acc[m][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < Kp; k += Dot::STEP, w += TILE * Dot::STEP) {
    if (Prefetch) {
      const char* ahead = reinterpret_cast<const char*>(w) + PREFETCH_BYTES;
#pragma GCC unroll 4
      for (int64_t line = 0; line < STEP_BYTES; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T1);
    }
    Dot::template step<M>(acc, x, xs, w, k);
  }
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 3
    for (int v = 0; v < VECS; ++v) out[m][v] = acc[m][v];
}

// One panel's outputs for G rows of x from row m0: finish(m, n0, lanes, sums) gets x[m] . W[n0 + i]
// in lane i < lanes of sums (16 outputs from n0).
template <typename Dot, int G, bool Prefetch, typename Finish>
inline void group(int64_t m0, const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t p, int64_t N,
                  int64_t Kp, const Finish& finish) {
  __m512 sums[G][VECS];
  panel<Dot, G, Prefetch>(x + m0 * xs, xs, w + p * TILE * Kp, Kp, sums);
  for (int v = 0; v < VECS; ++v) {
    const int64_t n0 = p * TILE + 16 * v;
    const int lanes = static_cast<int>(std::min<int64_t>(16, N - n0));
    if (lanes <= 0) break;
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) finish(m0 + g, n0, lanes, sums[g][v]);
  }
}

template <typename Dot, bool Prefetch, typename Finish>
inline void group_of(int G, int64_t m0, const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t p,
                     int64_t N, int64_t Kp, const Finish& f) {
  switch (G) {
    case 1: return group<Dot, 1, Prefetch>(m0, x, xs, w, p, N, Kp, f);
    case 2: return group<Dot, 2, Prefetch>(m0, x, xs, w, p, N, Kp, f);
    case 3: return group<Dot, 3, Prefetch>(m0, x, xs, w, p, N, Kp, f);
    case 4: return group<Dot, 4, Prefetch>(m0, x, xs, w, p, N, Kp, f);
    case 5: return group<Dot, 5, Prefetch>(m0, x, xs, w, p, N, Kp, f);
    case 6: return group<Dot, 6, Prefetch>(m0, x, xs, w, p, N, Kp, f);
    case 7: return group<Dot, 7, Prefetch>(m0, x, xs, w, p, N, Kp, f);
    default: return group<Dot, 8, Prefetch>(m0, x, xs, w, p, N, Kp, f);
  }
}

// Every output, ROWS rows of x per pass over W, panel by panel, GROUP rows at a time: the first
// group streams the panel from memory, the others find it in L2 (48 outputs by K = 1536: 288 KB in
// fp32). A pass's rows of x stay in L2 or L3 however many rows the call has (a long prefill). x's
// rows are xs elements apart, at least Kp long (zeros past K). Panels split across torch's threads.
template <typename Dot, typename Finish>
void gemv(int64_t M, const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t N, int64_t Kp,
          const Finish& finish) {
  for (int64_t r0 = 0; r0 < M; r0 += ROWS) {
    const int64_t rows = std::min<int64_t>(ROWS, M - r0);
    const bool prefetch = std::min<int64_t>(rows, GROUP) >= PREFETCH_FROM_ROWS;
    at::parallel_for(0, (N + TILE - 1) / TILE, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        for (int64_t m0 = r0; m0 < r0 + rows; m0 += GROUP) {
          const int G = static_cast<int>(std::min<int64_t>(GROUP, r0 + rows - m0));
          if (prefetch && m0 == r0) group_of<Dot, true>(G, m0, x, xs, w, p, N, Kp, finish);
          else group_of<Dot, false>(G, m0, x, xs, w, p, N, Kp, finish);
        }
      }
    });
  }
}

// K rounded up to a whole step (the packed layout's row length).
template <typename Dot>
inline int64_t padded_k(int64_t K) {
  return (K + Dot::STEP - 1) / Dot::STEP * Dot::STEP;
}

inline __mmask16 first_lanes(int lanes) { return __mmask16((1u << lanes) - 1); }

// The pair of 16-bit elements at x (two bf16) in every 32-bit lane: vdpbf16ps's x operand.
inline __m512i pair(const uint16_t* x) {
  int32_t bits;
  std::memcpy(&bits, x, sizeof bits);
  return _mm512_set1_epi32(bits);
}

// y[i] = sums[i] + bias[i] in the lanes of mask, rounded to bf16 to nearest even (as c10 and
// torch's ops round); bias may be null. For the kernels compiled with AVX-512-BF16.
__attribute__((target("avx512bf16"))) inline void store_bf16(uint16_t* y, const uint16_t* bias, __mmask16 mask,
                                                             __m512 sums) {
  if (bias) {  // bf16 -> fp32 is exact: the bits moved up 16
    const __m512i b = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, bias));
    sums = _mm512_add_ps(sums, _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)));
  }
  _mm256_mask_storeu_epi16(y, mask, (__m256i)_mm512_cvtneps_pbh(sums));
}

}  // namespace
}  // namespace outer
