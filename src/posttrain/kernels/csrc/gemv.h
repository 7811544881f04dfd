// The decode GEMVs' shared driver: y[M, N] = x[M, K] W[N, K]^T for M <= 8 rows, W as torch
// stores it (row-major), read front to back exactly once (the bindings take M <= 8).
//
// One output row n at a time: W's row n streams in once, x's rows (a few KB, in L1) are summed
// against it in groups of up to GROUP (a second group re-reads row n from L1, not memory). Each
// output has SUMS independent partial sums (sub-chunk u of every step goes to sum u, so no
// chain of dependent adds waits on the last), each 16 lanes wide; then ((s0 + s1) + (s2 + s3)) and
// a fixed tree across the lanes, for 16 outputs at once (lane_sums16). That order depends only on K, never on M or on the rows beside
// it: a row's result is the same alone or among others. W is one sequential stream, which the
// hardware prefetcher follows: software prefetches 0.5-4 KB ahead of every line made one core
// stream 8-19% slower on AMD EPYC (Zen 4), so there are none.
//
// Everything here has internal linkage: each kernel's file compiles it for its own ISA.
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace gemv {
namespace {

constexpr int MAX_ROWS = 8;  // x rows a call takes (the bindings check)
constexpr int BLOCK = 16;  // output rows reduced together (one vector of 16 sums)
constexpr int GROUP = 4;  // x rows summed together: GROUP * SUMS accumulators stay in registers
constexpr int SUMS = 4;
constexpr int64_t GRAIN_BYTES = 64 * 1024;  // W bytes per thread task at least

// The lane masks of one step's SUMS sub-chunks of SUB elements when `left` elements remain.
template <typename Mask, int SUB>
struct StepMasks {
  Mask sub[SUMS];
  explicit StepMasks(int64_t left) {
#pragma GCC unroll 4
    for (int u = 0; u < SUMS; ++u) {
      const int64_t l = left - int64_t(u) * SUB;
      sub[u] = l <= 0 ? Mask(0) : l >= SUB ? Mask(~Mask(0)) : Mask((uint64_t(1) << l) - 1);
    }
  }
};

// Output row w (K weights) against G rows of x (xs apart): lanes[g * stride] = the 16 lane sums of
// x[g] . w. Dot is one weight format: Dot::step<G>(acc, x, xs, w, k, masks) adds sub-chunk u at
// w + k + u * Dot::SUB into acc[g][u].
template <typename Dot, int G>
inline void row_lanes(const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t K, __m512* lanes,
                      int stride) {
  using Masks = StepMasks<typename Dot::Mask, Dot::SUB>;
  constexpr int64_t STEP = int64_t(SUMS) * Dot::SUB;
  __m512 acc[G][SUMS];  // every loop over it unrolled: an index left at run time puts it in memory
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
    for (int u = 0; u < SUMS; ++u) acc[g][u] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + STEP <= K; k += STEP) Dot::template step<G>(acc, x, xs, w, k, Masks(STEP));
  if (k < K) Dot::template step<G>(acc, x, xs, w, k, Masks(K - k));
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
    lanes[g * stride] = _mm512_add_ps(_mm512_add_ps(acc[g][0], acc[g][1]), _mm512_add_ps(acc[g][2], acc[g][3]));
}

template <typename Dot>
inline void group_lanes(int G, const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t K,
                        __m512* lanes, int stride) {
  switch (G) {
    case 1: return row_lanes<Dot, 1>(x, xs, w, K, lanes, stride);
    case 2: return row_lanes<Dot, 2>(x, xs, w, K, lanes, stride);
    case 3: return row_lanes<Dot, 3>(x, xs, w, K, lanes, stride);
    default: return row_lanes<Dot, 4>(x, xs, w, K, lanes, stride);
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

inline __mmask16 first_lanes(int rows) { return __mmask16((1u << rows) - 1); }

// Every output, 16 at a time: finish(m, n0, rows, sums) gets x[m] . W[n0 + r] in lane r < rows.
// W's rows are read in order, each once; blocks of 16 split across torch's threads. x's rows are
// xs elements apart (K, unless a kernel lays x out its own way).
template <typename Dot, typename Finish>
void gemv(int M, const typename Dot::X* x, int64_t xs, const typename Dot::W* w, int64_t N, int64_t K,
          const Finish& finish) {
  const int64_t block_bytes = BLOCK * K * int64_t(sizeof(typename Dot::W));
  const int64_t grain = std::max<int64_t>(1, GRAIN_BYTES / std::max<int64_t>(1, block_bytes));
  at::parallel_for(0, (N + BLOCK - 1) / BLOCK, grain, [&](int64_t b0, int64_t b1) {
    alignas(64) __m512 lanes[MAX_ROWS][BLOCK];
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * BLOCK;
      const int rows = static_cast<int>(std::min<int64_t>(BLOCK, N - n0));
      for (int m = 0; m < M; ++m)  // the last block's missing rows sum to zero
        for (int r = rows; r < BLOCK; ++r) lanes[m][r] = _mm512_setzero_ps();
      for (int r = 0; r < rows; ++r)  // W's row n0 + r from memory once; a second group of x rows finds it in L1
        for (int m0 = 0; m0 < M; m0 += GROUP)
          group_lanes<Dot>(std::min(GROUP, M - m0), x + m0 * xs, xs, w + (n0 + r) * K, K, &lanes[m0][r], BLOCK);
      for (int m = 0; m < M; ++m) finish(m, n0, rows, lane_sums16(lanes[m]));
    }
  });
}

// The int8 kernels' epilogue: y[m, n0 + r] = sums[r] * scale[n0 + r] + bias[n0 + r], rounded to bf16.
inline void store_scaled(c10::BFloat16* y, int64_t N, const float* scale, const c10::BFloat16* bias, int m,
                         int64_t n0, int rows, __m512 sums) {
  alignas(64) float s[BLOCK];
  _mm512_store_ps(s, sums);
  for (int r = 0; r < rows; ++r)
    y[m * N + n0 + r] = c10::BFloat16(s[r] * scale[n0 + r] + (bias ? float(bias[n0 + r]) : 0.0f));
}

}  // namespace
}  // namespace gemv
