// End to end: a small GEMM kernel written only against the kernel interface, in the style of the
// attention kernels (cp.async double buffering, ldmatrix, mma, masked stores), against a CPU GEMM.
#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "emulation/test_support.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace ffpa::kernels;
using emulation_test::valueOf;
using ffpa::emulation::KernelError;
using ffpa::emulation::launch;

namespace {

constexpr int kTileBytes = 16 * 32;          // 16 rows of 16 elements
constexpr int kStageBytes = 2 * kTileBytes;  // A tile, then B tile

// C[m x n] (fp32) = A[m x k] B[k x n], all row-major; n and k multiples of 16. One warp computes
// one 16x16 tile of C (block x: columns, block y: rows), stepping through k 16 at a time with two
// shared-memory stages; rows of A past m are zero-filled and their C rows not stored.
// kWaitPending: the cp.async groups still allowed in flight at the wait (1 is right).
template <class Tag, int kWaitPending>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(32, 1)
    gemmKernel(const typename Tag::Element* a, const typename Tag::Element* b, float* c, int m,
               int n, int k) {
  const int lane = threadIndex(), group = lane / 4, quad = lane % 4;
  const int row0 = 16 * blockIndexY(), column0 = 16 * blockIndexX();
  const uint32_t shared = sharedAddress(sharedMemory());
  const int steps = k / 16;

  // Lane l copies 16-byte unit l % 2 of row l / 2 of both tiles.
  auto issue = [&](int step) {
    const uint32_t stage = shared + (step % 2) * kStageBytes;
    const int row = lane / 2, unit = lane % 2;
    const bool valid = row0 + row < m;
    const auto* aSource = valid ? a + (row0 + row) * k + 16 * step + 8 * unit : a;
    copyAsync16(stage + row * 32 + unit * 16, aSource, valid);
    copyAsync16(stage + kTileBytes + row * 32 + unit * 16,
                b + (16 * step + row) * n + column0 + 8 * unit, true);
    copyAsyncCommit();
  };

  float accumulator[2][4] = {};
  issue(0);
  for (int step = 0; step < steps; ++step) {
    if (step + 1 < steps) {
      issue(step + 1);
    } else {
      copyAsyncCommit();  // an empty group keeps the wait count uniform
    }
    copyAsyncWait<kWaitPending>();
    blockBarrier();
    const uint32_t stage = shared + (step % 2) * kStageBytes;
    // Matrices j = 0..3 of the x4 loads: rows 8 * (j % 2) .. +7, columns 8 * (j / 2) .. +7.
    const int row = lane % 8 + 8 * ((lane / 8) % 2), unit = lane / 16;
    uint32_t aFragment[4], bFragments[4];
    loadMatrixX4(aFragment, stage + row * 32 + unit * 16);
    loadMatrixX4Trans(bFragments, stage + kTileBytes + row * 32 + unit * 16);
#pragma unroll
    for (int tile = 0; tile < 2; ++tile) {
      const uint32_t bFragment[2] = {bFragments[2 * tile], bFragments[2 * tile + 1]};
      mmaF32(accumulator[tile], aFragment, bFragment, accumulator[tile], Tag{});
    }
    blockBarrier();  // the stage is refilled two steps later
  }
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + group + 8 * half;
    if (row >= m) continue;
    for (int tile = 0; tile < 2; ++tile) {
      for (int e = 0; e < 2; ++e) {
        storeGlobalF32(&c[row * n + column0 + 8 * tile + 2 * quad + e],
                       accumulator[tile][2 * half + e]);
      }
    }
  }
}

template <class Tag>
struct Problem {
  using Element = typename Tag::Element;
  int m, n, k;
  std::vector<Element> a, b;
  std::vector<float> c;

  Problem(int m, int n, int k, unsigned seed) : m(m), n(n), k(k), c(m * n) {
    std::mt19937 random(seed);
    for (uint16_t bits : emulation_test::randomElements(m * k, Tag{}, random)) a.push_back({bits});
    for (uint16_t bits : emulation_test::randomElements(k * n, Tag{}, random)) b.push_back({bits});
  }

  template <int kWaitPending>
  void run() {
    launch({{n / 16, (m + 15) / 16}, 32, 2 * kStageBytes, {a, b, c}}, gemmKernel<Tag, kWaitPending>,
           a.data(), b.data(), c.data(), m, n, k);
  }

  void check() const {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double sum = 0.0, magnitude = 0.0;
        for (int l = 0; l < k; ++l) {
          const double product =
              double{valueOf(a[i * k + l].bits, Tag{})} * valueOf(b[l * n + j].bits, Tag{});
          sum += product;
          magnitude += std::abs(product);
        }
        CAPTURE(i);
        CAPTURE(j);
        REQUIRE(std::abs(c[i * n + j] - sum) <= 1e-6 * magnitude + 1e-6);
      }
    }
  }
};

}  // namespace

TEST_CASE("a cp.async + ldmatrix + mma GEMM matches the CPU (fp16 and bf16, ragged rows)") {
  Problem<HalfTag> half(40, 32, 64, 5);
  half.run<1>();
  half.check();
  Problem<Bf16Tag> bf16(16, 48, 96, 6);
  bf16.run<1>();
  bf16.check();
}

TEST_CASE("the same GEMM waiting for one group too few is caught") {
  Problem<HalfTag> problem(16, 16, 64, 7);
  CHECK_THROWS_WITH_AS(problem.run<2>(),
                       doctest::Contains("still being written by a cp.async in flight"),
                       KernelError);
}
