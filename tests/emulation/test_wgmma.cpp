// wgmma with A from registers (wgmmaRS) on the emulator: the A fragment layout of sm90/ptx.cuh,
// written out independently here, gives D = A B; a thread that changes its A registers before
// the wait that retires the wgmma, issues it without a wgmmaFence or exits without waiting for it
// is reported.
#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "emulation/launch.h"
#include "sm90/ptx.cuh"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using namespace ffpa::kernels;
using doctest::Contains;
using ffpa::emulation::Config;
using ffpa::emulation::KernelError;
using ffpa::emulation::launch;
using ffpa::emulation::scheduled;

namespace {

constexpr int kN = 64;  // D[64, 64] = A[64, 16] B[16, 64]

// Small integers over 8: exact in fp16 and bf16, and every product sum exact in fp32.
float aValue(int row, int k) { return float((row * 7 + k * 3) % 11 - 5) / 8.0f; }
float bValue(int k, int n) { return float((k * 5 + n * 3) % 13 - 6) / 8.0f; }

// Each of the 128 threads builds its A fragment: a[r] holds A[16 w + group + 8 (r % 2)][2 quad +
// 8 (r / 2) .. +1]. Thread 0 writes B N-major (transposed: element (k, n) in row k % 8 of 8-key
// group k / 8, 1024 bytes apart) with the 128-byte swizzle. Then one wgmmaRS; each thread counts
// its accumulators that differ from A B, unless `mistake` (by thread 5) says otherwise.
enum class Mistake { none, clobber, noFence, noWait };
template <class Tag>
void multiply(uint32_t* wrong, Mistake mistake = Mistake::none) {
  const int t = threadIndex(), warp = t / 32, group = t % 32 / 4, quad = t % 4;
  unsigned char* shared = sharedMemory();
  if (t == 0) {
    for (int k = 0; k < 16; ++k) {
      for (int n = 0; n < kN; ++n) {
        const uint32_t linear = n * 2 + (k / 8) * 1024 + (k % 8) * 128;
        const uint32_t swizzled = linear ^ (((linear >> 7) & 7u) << 4);
        const uint32_t pair = packPair(bValue(k, n), 0.0f, Tag());
        *reinterpret_cast<uint16_t*>(shared + swizzled) = static_cast<uint16_t>(pair & 0xffffu);
      }
    }
  }
  fenceProxyAsync();
  blockBarrier();
  uint32_t a[4];
  for (int r = 0; r < 4; ++r) {
    const int row = 16 * warp + group + 8 * (r % 2), k = 2 * quad + 8 * (r / 2);
    a[r] = packPair(aValue(row, k), aValue(row, k + 1), Tag());
  }
  float d[kN / 2];
  for (float& value : d) value = 0.0f;
  if (mistake != Mistake::noFence || t != 5) wgmmaFence();
  wgmmaRS<kN, true>(d, a, matrixDescriptor(sharedAddress(shared), 16, 1024), false, Tag());
  wgmmaCommit();
  if (mistake == Mistake::clobber && t == 5) a[1] ^= 1u;
  if (mistake == Mistake::noWait && t == 5) return;
  wgmmaWait<0>();
  uint32_t mismatches = 0;
  for (int j = 0; j < kN / 8; ++j) {
    for (int i = 0; i < 4; ++i) {
      const int row = 16 * warp + group + 8 * (i / 2), column = 8 * j + 2 * quad + i % 2;
      float expected = 0.0f;
      for (int k = 0; k < 16; ++k) expected += aValue(row, k) * bValue(k, column);
      mismatches += d[4 * j + i] != expected;
    }
  }
  storeGlobal32(&wrong[t], mismatches);
}

}  // namespace

TEST_CASE("wgmma with A from registers: each warp's fragments are its rows of A (fp16 and bf16, shuffled orders)") {
  std::vector<uint32_t> wrong(128, 99);
  const Config config({1}, 128, 2048, {wrong});
  for (const uint64_t seed : {0u, 1u, 2u}) {
    CAPTURE(seed);
    wrong.assign(wrong.size(), 99);
    launch(scheduled(config, seed), [&] { multiply<HalfTag>(wrong.data()); });
    CHECK(wrong == std::vector<uint32_t>(128, 0));
    wrong.assign(wrong.size(), 99);
    launch(scheduled(config, seed), [&] { multiply<Bf16Tag>(wrong.data()); });
    CHECK(wrong == std::vector<uint32_t>(128, 0));
  }
}

TEST_CASE("wgmma with A from registers: A registers changed before the wait, a missing fence or wait are caught") {
  std::vector<uint32_t> wrong(128, 99);
  const Config config({1}, 128, 2048, {wrong});
  CHECK_THROWS_WITH_AS(launch(config, [&] { multiply<Bf16Tag>(wrong.data(), Mistake::clobber); }),
                       Contains("the A registers of a wgmma changed before a wgmmaWait retired it"), KernelError);
  CHECK_THROWS_WITH_AS(launch(config, [&] { multiply<Bf16Tag>(wrong.data(), Mistake::noFence); }),
                       Contains("wgmma without a wgmmaFence since the thread's last wgmmaWait"), KernelError);
  CHECK_THROWS_WITH_AS(launch(config, [&] { multiply<Bf16Tag>(wrong.data(), Mistake::noWait); }),
                       Contains("the thread exits with a wgmma that no wgmmaWait retired"), KernelError);
}
