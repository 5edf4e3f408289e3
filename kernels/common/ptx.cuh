// The hardware instructions the FFPA kernels use, as thin named wrappers. Kernels touch the
// hardware only through this header (and element.cuh, platform.cuh), which keeps them readable
// and lets the same kernel source run on the CPU warp emulator of tests/emulation, which provides
// these functions with identical semantics when FFPA_EMULATE is defined.
//
// Shapes and fragment layouts follow the PTX ISA (mma.m16n8k16, ldmatrix). For a thread with
// lane = 4 * group + quad (group 0..7, quad 0..3):
//   A 16x16 (row-major)  a[0] = A[group   ][2q..2q+1]   a[1] = A[group+8][2q..2q+1]
//                        a[2] = A[group   ][2q+8..+9]   a[3] = A[group+8][2q+8..+9]
//   B 16x8  (k x n)      b[0] = B[2q..2q+1][group]      b[1] = B[2q+8..2q+9][group]
//   C 16x8  (fp32)       c[0..1] = C[group][2q..2q+1]   c[2..3] = C[group+8][2q..2q+1]
//   C 16x8  (fp16x2)     c[0] = C[group][2q..2q+1]      c[1] = C[group+8][2q..2q+1]
#pragma once

#include "common/exp2_polynomial.h"
#include "common/platform.cuh"

#include <cstdint>

namespace ffpa::kernels {

#ifndef FFPA_EMULATE

// The 32-bit shared-memory address of a generic pointer into shared memory.
FFPA_DEVICE uint32_t sharedAddress(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// cp.async of 16 bytes from global to shared memory, bypassing L1. When `valid` is false the 16
// bytes are zero-filled and `global` is not read (src-size 0): tails need no branch.
FFPA_DEVICE void copyAsync16(uint32_t shared, const void* global, bool valid) {
  const int sourceBytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(global),
               "r"(sourceBytes));
}

// Closes the group of cp.async issued since the last commit.
FFPA_DEVICE void copyAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `Pending` committed groups are still in flight. Other threads' copies are
// visible only after a following barrier.
template <int Pending>
FFPA_DEVICE void copyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Four 8x8 b16 matrices; lane i gives the address of row (i % 8) of matrix (i / 8). Register j
// receives row (lane / 4), columns 2 * (lane % 4) .. +1 of matrix j.
FFPA_DEVICE void loadMatrixX4(uint32_t (&r)[4], uint32_t shared) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared));
}

// Two 8x8 b16 matrices; lanes 0..15 give the row addresses (lane i: row i % 8 of matrix i / 8;
// the other lanes' addresses are ignored but must be valid shared addresses).
FFPA_DEVICE void loadMatrixX2(uint32_t (&r)[2], uint32_t shared) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared));
}

// As loadMatrixX4 with each matrix transposed: register j receives the elements
// (row 2 * (lane % 4) .. +1, column lane / 4) of matrix j as stored.
FFPA_DEVICE void loadMatrixX4Trans(uint32_t (&r)[4], uint32_t shared) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared));
}

// D = A * B + C, m16n8k16, fp16 inputs, fp32 accumulators.
FFPA_DEVICE void mmaF32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                        const float (&c)[4], HalfTag) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
}

// D = A * B + C, m16n8k16, bf16 inputs, fp32 accumulators.
FFPA_DEVICE void mmaF32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                        const float (&c)[4], Bf16Tag) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
}

// D = A * B + C, m16n8k16, fp16 inputs, fp16 accumulators (each register a half2).
FFPA_DEVICE void mmaF16(uint32_t (&d)[2], const uint32_t (&a)[4], const uint32_t (&b)[2],
                        const uint32_t (&c)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, "
      "{%8, %9};\n"
      : "=r"(d[0]), "=r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));
}

// The value of `value` in lane (lane ^ laneMask) of the warp.
FFPA_DEVICE float shuffleXor(float value, int laneMask) {
  return __shfl_xor_sync(0xffffffffu, value, laneMask);
}

// Whether `predicate` holds in every lane of the warp, or in any: a value the whole warp agrees
// on, for branches that must not diverge.
FFPA_DEVICE bool warpAll(bool predicate) { return __all_sync(0xffffffffu, predicate); }
FFPA_DEVICE bool warpAny(bool predicate) { return __any_sync(0xffffffffu, predicate); }

// bar.sync on barrier `id` (1..15; 0 is __syncthreads) for `threads` threads (a multiple of 32):
// synchronizes a group of warps without stopping the rest of the block. bar.sync is aligned:
// every participating warp must reach this same instruction.
FFPA_DEVICE void namedBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The same for warps of different roles that meet from different code (a consumer warpgroup
// each): barrier.sync, the unaligned form, which allows that.
FFPA_DEVICE void rolesBarrier(int id, int threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// An arrival on barrier `id` of `threads` threads that does not wait for the phase to complete
// (barrier.arrive, unaligned): hands a turn to warps that wait there with rolesBarrier, the
// arrivals and the waits adding up to `threads`.
FFPA_DEVICE void rolesArrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

FFPA_DEVICE void blockBarrier() { __syncthreads(); }

// 2^x by the special-function unit (ex2.approx.ftz: relative error ~2^-22; 2^-inf = 0).
FFPA_DEVICE float exp2Approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 2^x for x <= 8 on the FMA pipes (seed 004's exp2 emulation; the Hopper forward's exponents reach
// its rescale threshold of 8): 2^x = 2^n * 2^f with n = floor(x)
// and f in [0, 1), 2^f by the polynomial of common/exp2_polynomial.h, 2^n added to the exponent
// bits. x < -126 (and -inf) gives exactly 0, as a masked score must; NaN stays NaN (the
// conversion of NaN to an integer gives 0).
FFPA_DEVICE float exp2Polynomial(float x) {
  const float n = floorf(x);
  const float f = x - n;
  const float p = fmaf(fmaf(fmaf(kExp2C3, f, kExp2C2), f, kExp2C1), f, 1.0f);
  const float scaled = __uint_as_float(__float_as_uint(p) + (static_cast<uint32_t>(static_cast<int>(n)) << 23));
  return x < kExp2SmallestExponent ? 0.0f : scaled;
}

// log2(x) by the special-function unit (lg2.approx.ftz; log2(0) = -inf).
FFPA_DEVICE float log2Approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Plain global stores, named so that the emulator can check them against the buffers it knows.
FFPA_DEVICE void storeGlobal32(void* global, uint32_t value) { *static_cast<uint32_t*>(global) = value; }
FFPA_DEVICE void storeGlobalF32(float* global, float value) { *global = value; }

#endif  // !FFPA_EMULATE

}  // namespace ffpa::kernels
