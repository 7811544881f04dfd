// The decode GEMVs' shared driver: y[M, N] = x[M, K] W[N, K]^T for M <= 8 rows, W as torch
// stores it (row-major), read front to back exactly once (the bindings take M <= 8).
//
// One output row n at a time: W's row n streams in once, x's rows (a few KB, in L1) are summed
// against it in groups of up to GROUP (a second group re-reads row n from L1, not memory). Each
// output has SUMS independent partial sums (sub-chunk u of every step goes to sum u, so no
// chain of dependent adds waits on the last), each 16 lanes wide; then ((s0 + s1) + (s2 + s3)) and
// a fixed tree across the lanes. That order depends only on K, never on M or on the rows beside
// it: a row's result is the same alone or among others. W is one sequential stream, which the
// hardware prefetcher follows: software prefetches 0.5-4 KB ahead of every line made one core
// stream 10-20% slower on AMD EPYC (Zen 4), so there are none.
//
// Everything here has internal linkage: each kernel's file compiles it for its own ISA.
#pragma once

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace gemv {
namespace {

constexpr int GROUP = 4;  // x rows summed together: GROUP * SUMS accumulators stay in registers
constexpr int SUMS = 4;
constexpr int64_t GRAIN_BYTES = 64 * 1024;  // W bytes per thread task at least

inline float lane_sum(__m512 v) {
  __m256 half = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 quarter = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  quarter = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
  quarter = _mm_add_ss(quarter, _mm_movehdup_ps(quarter));
  return _mm_cvtss_f32(quarter);
}

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

// Output row w (K weights) against G rows of x: sums[g] = x[g] . w. Dot is one weight format:
// Dot::step<G>(acc, x, K, w, k, masks) adds sub-chunk u at w + k + u * Dot::SUB into acc[g][u].
template <typename Dot, int G>
inline void row_sums(const typename Dot::X* x, const typename Dot::W* w, int64_t K, float* sums) {
  using Masks = StepMasks<typename Dot::Mask, Dot::SUB>;
  constexpr int64_t STEP = int64_t(SUMS) * Dot::SUB;
  __m512 acc[G][SUMS];  // every loop over it unrolled: an index left at run time puts it in memory
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
    for (int u = 0; u < SUMS; ++u) acc[g][u] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + STEP <= K; k += STEP) Dot::template step<G>(acc, x, K, w, k, Masks(STEP));
  if (k < K) Dot::template step<G>(acc, x, K, w, k, Masks(K - k));
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
    sums[g] = lane_sum(_mm512_add_ps(_mm512_add_ps(acc[g][0], acc[g][1]), _mm512_add_ps(acc[g][2], acc[g][3])));
}

template <typename Dot>
inline void group_sums(int G, const typename Dot::X* x, const typename Dot::W* w, int64_t K, float* sums) {
  switch (G) {
    case 1: return row_sums<Dot, 1>(x, w, K, sums);
    case 2: return row_sums<Dot, 2>(x, w, K, sums);
    case 3: return row_sums<Dot, 3>(x, w, K, sums);
    default: return row_sums<Dot, 4>(x, w, K, sums);
  }
}

// Every output: finish(m, n, x[m] . W[n]) for m < M, n < N; rows of W split across torch's threads.
template <typename Dot, typename Finish>
void gemv(int M, const typename Dot::X* x, const typename Dot::W* w, int64_t N, int64_t K, const Finish& finish) {
  const int64_t grain = std::max<int64_t>(1, GRAIN_BYTES / std::max<int64_t>(1, K * int64_t(sizeof(typename Dot::W))));
  at::parallel_for(0, N, grain, [&](int64_t n0, int64_t n1) {
    float sums[GROUP];
    for (int64_t n = n0; n < n1; ++n) {
      for (int m0 = 0; m0 < M; m0 += GROUP) {
        const int G = std::min(GROUP, M - m0);
        group_sums<Dot>(G, x + m0 * K, w + n * K, K, sums);
        for (int g = 0; g < G; ++g) finish(m0 + g, n, sums[g]);
      }
    }
  });
}

}  // namespace
}  // namespace gemv
