// What the kernels need from the platform besides instructions: qualifiers, element-type tags,
// thread and block indices, dynamic shared memory. On the CPU warp emulator (FFPA_EMULATE) the
// emulator's runtime header provides the same names.
#pragma once

#include <cstdint>

#ifdef FFPA_EMULATE
#include "emulation/runtime.h"  // tests/emulation: FFPA_DEVICE, thread indices, sharedMemory(), ...
#else

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define FFPA_DEVICE __device__ __forceinline__
#define FFPA_KERNEL __global__
// Caps registers so that `threads` threads fit `blocks` blocks per SM.
#define FFPA_LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
// A by-value kernel parameter whose address may be taken without a local copy.
#define FFPA_GRID_CONSTANT __grid_constant__
// Launches the kernel in thread-block clusters of x * y * z blocks (sm_90 and newer).
#define FFPA_CLUSTER_DIMS(x, y, z) __cluster_dims__(x, y, z)

namespace ffpa::kernels {

// Element-type tags select the mma instruction and conversions at compile time.
struct HalfTag {
  using Element = __half;
};
struct Bf16Tag {
  using Element = __nv_bfloat16;
};

FFPA_DEVICE int threadIndex() { return static_cast<int>(threadIdx.x); }
// threadIdx.x read where it is used: the compiler may neither move the read out of a loop nor
// share it with other reads, so what is computed from it is computed again at each use instead
// of holding registers across the loop (for addresses a loop body needs once per iteration, in
// kernels that keep their accumulators at the register limit).
FFPA_DEVICE int threadIndexAtUse() {
  int index;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(index));
  return index;
}
FFPA_DEVICE int blockIndexX() { return static_cast<int>(blockIdx.x); }
FFPA_DEVICE int blockIndexY() { return static_cast<int>(blockIdx.y); }
FFPA_DEVICE int blockIndexZ() { return static_cast<int>(blockIdx.z); }

// The block's dynamic shared memory, 16-byte aligned.
FFPA_DEVICE unsigned char* sharedMemory() {
  extern __shared__ __align__(16) unsigned char ffpaDynamicShared[];
  return ffpaDynamicShared;
}

}  // namespace ffpa::kernels

#endif  // FFPA_EMULATE
