// packPair, unpackPair, scalePair, exp2Approx and log2Approx against their definitions.
#include "common/element.cuh"
#include "common/ptx.cuh"
#include "emulation/test_support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace ffpa::kernels;
using emulation_test::bitsOf;
using emulation_test::valueOf;

namespace {

constexpr float kInfinity = std::numeric_limits<float>::infinity();

// The value of fp16 bits, from the format's definition.
double halfValue(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
  const double sign = bits & 0x8000 ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  if (exponent == 31) return fraction ? std::nan("") : sign * HUGE_VAL;
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

// Whether `bits` is the element of `tag`'s format nearest to x (finite, in range), ties to the
// even one: its neighbours are the adjacent bit patterns.
template <class Tag>
bool isNearest(float x, uint16_t bits, Tag tag) {
  const double error = std::abs(double{valueOf(bits, tag)} - x);
  for (int step : {-1, 1}) {
    const auto neighbour = static_cast<uint16_t>(bits + step);
    const float value = valueOf(neighbour, tag);
    if (std::isnan(value) || std::signbit(value) != std::signbit(x)) continue;
    const double other = std::abs(double{value} - x);
    if (other < error || (other == error && (bits & 1u))) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("packPair puts the low element in bits 0..15") {
  CHECK(packPair(1.0f, 2.0f, HalfTag{}) == 0x40003c00u);
  CHECK(packPair(1.0f, 2.0f, Bf16Tag{}) == 0x40003f80u);
  const float2 pair = unpackPair(0x40003c00u, HalfTag{});
  CHECK(pair.x == 1.0f);
  CHECK(pair.y == 2.0f);
}

TEST_CASE("fp16: every value converts exactly, and back") {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float value = valueOf(static_cast<uint16_t>(bits), HalfTag{});
    const double expected = halfValue(static_cast<uint16_t>(bits));
    if (std::isnan(expected)) {
      REQUIRE(std::isnan(value));
      REQUIRE(std::isnan(valueOf(bitsOf(value, HalfTag{}), HalfTag{})));
    } else {
      REQUIRE(value == expected);
      REQUIRE(bitsOf(value, HalfTag{}) == bits);
    }
  }
}

TEST_CASE("bf16: every value converts exactly, and back") {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float value = valueOf(static_cast<uint16_t>(bits), Bf16Tag{});
    uint32_t floatBits;
    std::memcpy(&floatBits, &value, 4);
    REQUIRE(floatBits == bits << 16);
    if (!std::isnan(value)) REQUIRE(bitsOf(value, Bf16Tag{}) == bits);
  }
}

TEST_CASE("conversions round to nearest, ties to even") {
  // fp16: ulp 2^-10 at 1; the largest finite value is 65504, and 65520 is the tie with 2^16.
  CHECK(bitsOf(1.0f + std::ldexp(1.0f, -11), HalfTag{}) == 0x3c00);
  CHECK(bitsOf(1.0f + 3 * std::ldexp(1.0f, -11), HalfTag{}) == 0x3c02);
  CHECK(bitsOf(65519.0f, HalfTag{}) == 0x7bff);
  CHECK(bitsOf(65520.0f, HalfTag{}) == 0x7c00);
  CHECK(bitsOf(-65520.0f, HalfTag{}) == 0xfc00);
  CHECK(bitsOf(std::ldexp(1.0f, -25), HalfTag{}) == 0x0000);  // tie between 0 and 2^-24
  CHECK(bitsOf(3 * std::ldexp(1.0f, -26), HalfTag{}) == 0x0001);
  CHECK(bitsOf(kInfinity, HalfTag{}) == 0x7c00);
  CHECK(std::isnan(valueOf(bitsOf(std::nanf(""), HalfTag{}), HalfTag{})));
  // bf16: ulp 2^-7 at 1.
  CHECK(bitsOf(1.0f + std::ldexp(1.0f, -8), Bf16Tag{}) == 0x3f80);
  CHECK(bitsOf(1.0f + 3 * std::ldexp(1.0f, -8), Bf16Tag{}) == 0x3f82);
  CHECK(std::isnan(valueOf(bitsOf(std::nanf(""), Bf16Tag{}), Bf16Tag{})));

  std::mt19937 random(1);
  std::uniform_real_distribution<float> significand(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-26, 14);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(significand(random), exponent(random)) * (i % 2 ? -1.0f : 1.0f);
    REQUIRE(isNearest(x, bitsOf(x, HalfTag{}), HalfTag{}));
    REQUIRE(isNearest(x, bitsOf(x, Bf16Tag{}), Bf16Tag{}));
  }
}

TEST_CASE("scalePair multiplies both fp16 halves by the factor rounded to fp16") {
  const uint32_t pair = packPair(1.5f, -3.0f, HalfTag{});
  CHECK(scalePair(pair, 0.5f) == packPair(0.75f, -1.5f, HalfTag{}));
  // 1 + 2^-12 is 1 in fp16: nothing changes.
  CHECK(scalePair(pair, 1.0f + std::ldexp(1.0f, -12)) == pair);
  // The product is rounded once: 1.5 * (1 + 2^-10) = 1.5 + 1.5 * 2^-10 rounds to 1.5 + 2^-9.
  CHECK(unpackPair(scalePair(pair, 1.0f + std::ldexp(1.0f, -10)), HalfTag{}).x ==
        1.5f + std::ldexp(1.0f, -9));
  CHECK(unpackPair(scalePair(pair, 40000.0f), HalfTag{}).y == -kInfinity);  // overflow
  CHECK(scalePair(pair, 0.0f) == packPair(0.0f, -0.0f, HalfTag{}));
}

TEST_CASE("exp2Approx and log2Approx: special values and flushed subnormals") {
  CHECK(exp2Approx(0.0f) == 1.0f);
  CHECK(exp2Approx(-kInfinity) == 0.0f);
  CHECK(exp2Approx(kInfinity) == kInfinity);
  CHECK(exp2Approx(-126.0f) == std::ldexp(1.0f, -126));
  CHECK(exp2Approx(-127.5f) == 0.0f);  // a subnormal result
  CHECK(std::isnan(exp2Approx(std::nanf(""))));
  CHECK(log2Approx(8.0f) == 3.0f);
  CHECK(log2Approx(0.0f) == -kInfinity);
  CHECK(log2Approx(std::ldexp(1.0f, -130)) == -kInfinity);  // a subnormal input
  CHECK(std::isnan(log2Approx(-1.0f)));

  std::mt19937 random(2);
  std::uniform_real_distribution<float> uniform(-100.0f, 100.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = uniform(random);
    const double exact = std::exp2(double{x});
    REQUIRE(std::abs(exp2Approx(x) - exact) <= std::ldexp(exact, -22));
    REQUIRE(std::abs(log2Approx(static_cast<float>(exact)) - x) <=
            1e-5 * std::max(1.0f, std::abs(x)));
  }
}

TEST_CASE("exp2Polynomial: within 8.6e-5 of 2^x on [-126, 8]; exact 0, 1 and NaN where the softmax needs them") {
  CHECK(exp2Polynomial(0.0f) == 1.0f);
  CHECK(exp2Polynomial(-1.0f) == 0.5f);  // whole numbers: p(0) = 1 scaled exactly
  CHECK(exp2Polynomial(8.0f) == 256.0f);  // the Hopper forward's rescale threshold
  CHECK(exp2Polynomial(-126.0f) == std::ldexp(1.0f, -126));
  CHECK(exp2Polynomial(-kInfinity) == 0.0f);  // a masked score
  CHECK(exp2Polynomial(-126.5f) == 0.0f);
  CHECK(exp2Polynomial(-1e30f) == 0.0f);
  CHECK(std::isnan(exp2Polynomial(std::nanf(""))));

  std::mt19937 random(3);
  std::uniform_real_distribution<float> wide(-126.0f, 0.0f), near(-2.0f, 0.0f), above(0.0f, 8.0f);
  double worst = 0.0;
  for (int i = 0; i < 300000; ++i) {
    const float x = i % 3 == 0 ? wide(random) : i % 3 == 1 ? near(random) : above(random);
    const double exact = std::exp2(double{x});
    worst = std::max(worst, std::abs(exp2Polynomial(x) - exact) / exact);
  }
  CHECK(worst <= 8.7e-5);
  CHECK(worst >= 8.0e-5);  // the fit's error, not a far better (or different) function
}
