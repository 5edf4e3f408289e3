// ldmatrix and mma.sync against direct indexing and plain arithmetic, with the fragments laid out
// by hand from the layout comment of ptx.cuh (lane = 4 * group + quad).
#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "emulation/test_support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

using namespace ffpa::kernels;
using emulation_test::pairOf;
using emulation_test::valueOf;
using ffpa::emulation::launch;

namespace {

enum class Load { X4, X2, X4Trans };

// Shared memory holds 32 rows of 8 elements at scattered 16-byte slots: row r of matrix j is at
// slot slots[8 * j + r]. Lane i passes the address of row i % 8 of matrix i / 8; registers go to
// out[4 * lane + j].
void loadKernel(Load load, const uint16_t* image, const int* slots, uint32_t* out) {
  const int lane = threadIndex();
  std::memcpy(sharedMemory() + 16 * lane, image + 8 * lane, 16);
  blockBarrier();
  const uint32_t address = sharedAddress(sharedMemory()) + 16 * slots[lane];
  uint32_t r[4] = {};
  if (load == Load::X4) {
    loadMatrixX4(r, address);
  } else if (load == Load::X2) {
    uint32_t pair[2];
    loadMatrixX2(pair, address);
    r[0] = pair[0];
    r[1] = pair[1];
  } else {
    loadMatrixX4Trans(r, address);
  }
  for (int j = 0; j < 4; ++j) storeGlobal32(&out[4 * lane + j], r[j]);
}

}  // namespace

TEST_CASE("ldmatrix x4, x2 and x4.trans deliver the documented elements") {
  std::mt19937 random(3);
  std::vector<uint16_t> image(32 * 8);
  for (auto& element : image) element = static_cast<uint16_t>(random());
  std::vector<int> slots(32);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), random);
  // Element (row, column) of matrix j.
  auto element = [&](int j, int row, int column) { return image[8 * slots[8 * j + row] + column]; };

  for (Load load : {Load::X4, Load::X2, Load::X4Trans}) {
    CAPTURE(static_cast<int>(load));
    std::vector<uint32_t> out(32 * 4);
    launch({{}, 32, 32 * 16, {out}}, loadKernel, load, image.data(), slots.data(), out.data());
    const int matrices = load == Load::X2 ? 2 : 4;
    for (int lane = 0; lane < 32; ++lane) {
      const int group = lane / 4, quad = lane % 4;
      for (int j = 0; j < matrices; ++j) {
        const uint32_t expected =
            load == Load::X4Trans
                ? pairOf(element(j, 2 * quad, group), element(j, 2 * quad + 1, group))
                : pairOf(element(j, group, 2 * quad), element(j, group, 2 * quad + 1));
        REQUIRE(out[4 * lane + j] == expected);
      }
    }
  }
}

namespace {

// A 16x16, B 16x8 (k x n) as element bits; C and D 16x8 as floats.
struct MmaCase {
  std::vector<uint16_t> a, b;
  std::vector<float> c;
};

// The lane's fragments, exactly as the comment of ptx.cuh lays them out.
struct Fragments {
  uint32_t a[4], b[2];
  float c[4];
  uint32_t cHalf[2];
};

Fragments fragmentsOf(const MmaCase& m, int lane) {
  const int g = lane / 4, q = lane % 4;
  auto a = [&](int row, int column) {
    return pairOf(m.a[16 * row + column], m.a[16 * row + column + 1]);
  };
  auto b = [&](int k, int n) { return pairOf(m.b[8 * k + n], m.b[8 * (k + 1) + n]); };
  Fragments f;
  f.a[0] = a(g, 2 * q);
  f.a[1] = a(g + 8, 2 * q);
  f.a[2] = a(g, 2 * q + 8);
  f.a[3] = a(g + 8, 2 * q + 8);
  f.b[0] = b(2 * q, g);
  f.b[1] = b(2 * q + 8, g);
  const float* c = m.c.data();
  f.c[0] = c[8 * g + 2 * q];
  f.c[1] = c[8 * g + 2 * q + 1];
  f.c[2] = c[8 * (g + 8) + 2 * q];
  f.c[3] = c[8 * (g + 8) + 2 * q + 1];
  f.cHalf[0] = packPair(f.c[0], f.c[1], HalfTag{});
  f.cHalf[1] = packPair(f.c[2], f.c[3], HalfTag{});
  return f;
}

// D (row-major 16x8) = A B + C in double.
template <class Tag>
std::vector<double> reference(const MmaCase& m, Tag tag) {
  std::vector<double> d(16 * 8);
  for (int i = 0; i < 16; ++i) {
    for (int n = 0; n < 8; ++n) {
      double sum = m.c[8 * i + n];
      for (int k = 0; k < 16; ++k) {
        sum += double{valueOf(m.a[16 * i + k], tag)} * valueOf(m.b[8 * k + n], tag);
      }
      d[8 * i + n] = sum;
    }
  }
  return d;
}

// Each lane runs the mma on its fragments; D is stored in the C layout, four floats per lane.
template <class Tag>
void mmaKernel(bool halfAccumulator, const Fragments* fragments, float* out) {
  const int lane = threadIndex();
  const Fragments& f = fragments[lane];
  float d[4];
  if (halfAccumulator) {
    uint32_t h[2];
    mmaF16(h, f.a, f.b, f.cHalf);
    const float2 top = unpackPair(h[0], HalfTag{}), bottom = unpackPair(h[1], HalfTag{});
    d[0] = top.x, d[1] = top.y, d[2] = bottom.x, d[3] = bottom.y;
  } else {
    mmaF32(d, f.a, f.b, f.c, Tag{});
  }
  for (int e = 0; e < 4; ++e) storeGlobalF32(&out[4 * lane + e], d[e]);
}

template <class Tag>
void checkMma(Tag tag, bool halfAccumulator, unsigned seed) {
  std::mt19937 random(seed);
  MmaCase m{emulation_test::randomElements(16 * 16, tag, random),
            emulation_test::randomElements(16 * 8, tag, random), std::vector<float>(16 * 8)};
  // C holds fp16 values, so that the fp16 accumulator starts from the same C.
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (auto& c : m.c) c = valueOf(emulation_test::bitsOf(uniform(random), HalfTag{}), HalfTag{});
  std::vector<Fragments> fragments;
  for (int lane = 0; lane < 32; ++lane) fragments.push_back(fragmentsOf(m, lane));
  std::vector<float> out(32 * 4);
  launch({{}, 32, 0, {out}}, mmaKernel<Tag>, halfAccumulator, fragments.data(), out.data());

  const std::vector<double> d = reference(m, tag);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, q = lane % 4;
    const int rows[4] = {g, g, g + 8, g + 8}, columns[4] = {2 * q, 2 * q + 1, 2 * q, 2 * q + 1};
    for (int e = 0; e < 4; ++e) {
      const double expected = d[8 * rows[e] + columns[e]];
      // fp32: a few roundings of sums below 64; fp16: one rounding, at most an ulp of the result.
      const double tolerance =
          halfAccumulator ? std::ldexp(1.0, std::ilogb(std::max(std::abs(expected), 1e-4)) - 10)
                          : 1e-5;
      CAPTURE(lane);
      CAPTURE(e);
      REQUIRE(std::abs(out[4 * lane + e] - expected) <= tolerance);
    }
  }
}

}  // namespace

TEST_CASE("mma m16n8k16 with fp32 accumulators: fp16 and bf16") {
  for (unsigned seed = 0; seed < 4; ++seed) {
    checkMma(HalfTag{}, false, seed);
    checkMma(Bf16Tag{}, false, seed);
  }
}

TEST_CASE("mma m16n8k16 with fp16 accumulators") {
  for (unsigned seed = 0; seed < 4; ++seed) checkMma(HalfTag{}, true, seed);
}
