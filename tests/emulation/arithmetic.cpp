// element.cuh's conversions and ptx.cuh's special functions, on the host.
#include "common/half_precision.h"  // tools/common: round-to-nearest-even fp16 and bf16
#include "common/exp2_polynomial.h"
#include "emulation/runtime.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ffpa::kernels {
inline namespace emulated {
namespace {

uint32_t pack(uint16_t low, uint16_t high) { return uint32_t{low} | uint32_t{high} << 16; }

// The .ftz of ex2.approx and lg2.approx: subnormal inputs and results count as zero.
float flushSubnormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

}  // namespace

uint32_t packPair(float low, float high, HalfTag) {
  return pack(ffpa_tools::float_to_half_bits(low), ffpa_tools::float_to_half_bits(high));
}

uint32_t packPair(float low, float high, Bf16Tag) {
  return pack(ffpa_tools::float_to_bfloat16_bits(low), ffpa_tools::float_to_bfloat16_bits(high));
}

float2 unpackPair(uint32_t bits, HalfTag) {
  return {ffpa_tools::half_bits_to_float(static_cast<uint16_t>(bits)),
          ffpa_tools::half_bits_to_float(static_cast<uint16_t>(bits >> 16))};
}

float2 unpackPair(uint32_t bits, Bf16Tag) {
  return {ffpa_tools::bfloat16_bits_to_float(static_cast<uint16_t>(bits)),
          ffpa_tools::bfloat16_bits_to_float(static_cast<uint16_t>(bits >> 16))};
}

uint32_t scalePair(uint32_t bits, float factor) {
  // __hmul2 with __float2half2_rn(factor): the factor is rounded to fp16 first. A product of two
  // fp16 values is exact in fp32, so rounding it to fp16 is the correctly rounded fp16 product.
  const float scale = unpackPair(packPair(factor, factor, HalfTag{}), HalfTag{}).x;
  const float2 pair = unpackPair(bits, HalfTag{});
  return packPair(pair.x * scale, pair.y * scale, HalfTag{});
}

float exp2Approx(float x) {
  return flushSubnormal(static_cast<float>(std::exp2(double{flushSubnormal(x)})));
}

float log2Approx(float x) { return static_cast<float>(std::log2(double{flushSubnormal(x)})); }

float exp2Polynomial(float x) {
  const float n = std::floor(x);
  const float f = x - n;
  const float p = std::fma(std::fma(std::fma(kExp2C3, f, kExp2C2), f, kExp2C1), f, 1.0f);
  // cvt.rzi.s32.f32: NaN gives 0, out-of-range values saturate; the shifted exponent wraps.
  const double d = n;
  const int32_t exponent = std::isnan(d) ? 0 : d >= 2147483647.0 ? INT32_MAX
                                          : d <= -2147483648.0 ? INT32_MIN : static_cast<int32_t>(d);
  uint32_t bits;
  std::memcpy(&bits, &p, 4);
  bits += static_cast<uint32_t>(exponent) << 23;
  float scaled;
  std::memcpy(&scaled, &bits, 4);
  return x < kExp2SmallestExponent ? 0.0f : scaled;
}

}  // namespace emulated
}  // namespace ffpa::kernels
