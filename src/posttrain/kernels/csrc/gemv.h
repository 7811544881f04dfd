// The widening int8 GEMV's driver (the other kernels have outer.h's): y[M, N] = x[M, K] W[N, K]^T
// for M <= 8 rows, W in the GEMV's packed layout (kernels/gemv.py pack): panels of TILE rows, and
// within a panel chunk after chunk of SUB elements, the TILE rows' chunks side by side
// ([N / TILE][K / SUB][TILE][SUB], zeros past N and K). So a panel is one sequential stream, read
// from memory once.
//
// A group of G <= GROUP rows of x meets a panel: each step loads the TILE weight chunks and G x
// chunks and adds the G * TILE products into as many accumulators held in registers: one weight
// load serves G rows of x and one x load TILE rows of W (half a load per multiply-add at 4 x 4),
// and the G * TILE independent chains keep the FMA pipes busy. A second group of x rows finds the
// panel in L1. Beyond two rows of x a step is as much arithmetic as memory, and the hardware
// prefetcher alone falls behind: the first group then prefetches into L2 PREFETCH_BYTES ahead
// (on AMD EPYC Zen 4, bf16 at 8 rows when it ran here, a third faster; at one or two rows it made
// the pass about 10% slower, so there it is off).
//
// Each output (m, n) has one accumulator: chunk after chunk in K's order, then a fixed tree across
// its 16 lanes, 16 outputs at once (lane_sums16). That order depends only on K, never on M or on
// the rows beside it: a row's result is the same alone or among others.
//
// Everything here has internal linkage: each kernel's file compiles it for its own ISA.
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include "rows.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace gemv {
namespace {

constexpr int MAX_ROWS = 8;  // x rows a call takes (the bindings check)
constexpr int BLOCK = 16;  // output rows reduced together (one vector of 16 sums)
constexpr int TILE = 4;  // W rows in a panel (the module's `tile`, which kernels/gemv.py packs by)
constexpr int GROUP = 4;  // x rows a panel meets at once: GROUP * TILE accumulators in registers
constexpr int PREFETCH_FROM_ROWS = 3;  // calls of this many x rows prefetch W
constexpr int PREFETCH_BYTES = 32 * 1024;  // 16 to 64 KB: the same at 4 and 8 rows; 128 KB slower
constexpr int64_t GRAIN_BYTES = 64 * 1024;  // W bytes per thread task at least

// A panel (Kp elements per row, packed) against G rows of x (xs apart, Kp long): lanes[g * BLOCK + r]
// = the 16 lane sums of x[g] . W[r]. Dot is one weight format: Dot::step<G>(acc, x, xs, w, k) adds
// the chunk at k of each pair into acc[g][r] (w: the step's TILE chunks).
template <typename Dot, int G, bool Prefetch>
inline void panel_lanes(const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t Kp, __m512* lanes) {
  constexpr int64_t STEP = int64_t(TILE) * Dot::SUB;  // W elements a step reads
  __m512 acc[G][TILE];  // every loop over it unrolled: an index left at run time puts it in memory
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
    for (int r = 0; r < TILE; ++r) acc[g][r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < Kp; k += Dot::SUB, w += STEP) {
    if (Prefetch) {
      const char* ahead = reinterpret_cast<const char*>(w) + PREFETCH_BYTES;
#pragma GCC unroll 4
      for (int64_t line = 0; line < STEP * int64_t(sizeof(typename Dot::W)); line += 64)
        _mm_prefetch(ahead + line, _MM_HINT_T1);
    }
    Dot::template step<G>(acc, x, xs, w, k);
  }
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
    for (int r = 0; r < TILE; ++r) lanes[g * BLOCK + r] = acc[g][r];
}

template <typename Dot, bool Prefetch>
inline void group_lanes(int G, const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t Kp,
                        __m512* lanes) {
  switch (G) {
    case 1: return panel_lanes<Dot, 1, Prefetch>(x, xs, w, Kp, lanes);
    case 2: return panel_lanes<Dot, 2, Prefetch>(x, xs, w, Kp, lanes);
    case 3: return panel_lanes<Dot, 3, Prefetch>(x, xs, w, Kp, lanes);
    default: return panel_lanes<Dot, 4, Prefetch>(x, xs, w, Kp, lanes);
  }
}

// The lane sums of 16 vectors at once, v[r] -> lane r, by a fixed tree: pairs of lanes within
// 128-bit blocks, then blocks (45 vector ops for 16 outputs, not 16 separate reductions).
inline __m512 lane_sums16(const __m512* v) {
  __m512 t[8], u[4], w[2];
  for (int i = 0; i < 8; ++i)  // per block: [a0+a2, b0+b2, a1+a3, b1+b3]
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // per block: rows 4i..4i+3, each summed over the block's lanes
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44), _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xEE));
  for (int i = 0; i < 2; ++i)  // blocks (0+1, 2+3) of u[2i], then of u[2i+1]
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
}

// Every output, 16 at a time: finish(m, n0, rows, sums) gets x[m] . W[n0 + r] in lane r < rows.
// W is packed (N rounded up to BLOCK, Kp to Dot::SUB); x's rows are xs elements apart, at least Kp
// long (zeros past K). Blocks of 16 rows split across torch's threads.
template <typename Dot, typename Finish>
void gemv(int M, const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t N, int64_t Kp,
          const Finish& finish) {
  const int64_t grain = std::max<int64_t>(1, GRAIN_BYTES / std::max<int64_t>(1, BLOCK * Kp * int64_t(sizeof(typename Dot::W))));
  const bool prefetch = M >= PREFETCH_FROM_ROWS;
  at::parallel_for(0, (N + BLOCK - 1) / BLOCK, grain, [&](int64_t b0, int64_t b1) {
    alignas(64) __m512 lanes[MAX_ROWS][BLOCK];
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * BLOCK;
      for (int r = 0; r < BLOCK; r += TILE) {
        const typename Dot::W* panel = w + (n0 + r) * Kp;
        for (int m0 = 0; m0 < M; m0 += GROUP) {  // the first group streams the panel, the rest find it in L1
          const int G = std::min(GROUP, M - m0);
          if (prefetch && m0 == 0) group_lanes<Dot, true>(G, x, xs, panel, Kp, &lanes[0][r]);
          else group_lanes<Dot, false>(G, x + m0 * xs, xs, panel, Kp, &lanes[m0][r]);
        }
      }
      const int rows = static_cast<int>(std::min<int64_t>(BLOCK, N - n0));
      for (int m = 0; m < M; ++m) finish(m, n0, rows, lane_sums16(lanes[m]));
    }
  });
}

// K rounded up to a whole step of Dot (the packed layout's row length).
template <typename Dot>
inline int64_t padded_k(int64_t K) {
  return (K + Dot::SUB - 1) / Dot::SUB * Dot::SUB;
}

// The int8 kernel's epilogue: y[m, n0 + r] = sums[r] * scale[n0 + r] + bias[n0 + r], rounded to bf16.
inline void store_scaled(c10::BFloat16* y, int64_t N, const float* scale, const c10::BFloat16* bias, int m,
                         int64_t n0, int rows, __m512 sums) {
  alignas(64) float s[BLOCK];
  _mm512_store_ps(s, sums);
  for (int r = 0; r < rows; ++r)
    y[m * N + n0 + r] = c10::BFloat16(s[r] * scale[n0 + r] + (bias ? float(bias[n0 + r]) : 0.0f));
}

}  // namespace
}  // namespace gemv
