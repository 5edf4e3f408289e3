// The coefficients of the FMA emulation of exp2 (exp2Polynomial, common/ptx.cuh; seed 004):
// 2^f ~ 1 + c1 f + c2 f^2 + c3 f^3 on [0, 1), with p(0) = 1, fitted by iteratively reweighted
// least squares for the least maximum relative error: 8.6e-5, below half an fp16 ulp (2.4e-4).
// Plain C++, shared by the GPU and the CPU warp emulator.
#pragma once

namespace ffpa::kernels {

constexpr float kExp2C1 = 0.6951167743f;
constexpr float kExp2C2 = 0.2276450537f;
constexpr float kExp2C3 = 0.0770669892f;
// Below this, 2^x is no normal float: the emulation returns 0 (masked scores are -inf).
constexpr float kExp2SmallestExponent = -126.0f;

}  // namespace ffpa::kernels
