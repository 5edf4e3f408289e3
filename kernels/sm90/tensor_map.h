// The description of a TMA tensor map that the host fills (plain C++, shared by the planner, the
// kernels and the CPU warp emulator), and the type a kernel receives it as: the driver's opaque
// CUtensorMap on the GPU (encoded by src/sm90/tensor_map.cpp), the description itself on the
// emulator, which copies boxes by reading it.
//
// Dimensions run innermost first (the head dim, then rows, heads, batch), as the driver's do.
#pragma once

#include <cstdint>

namespace ffpa::sm90 {

constexpr int kTensorMapMaxRank = 4;

struct TensorMapSpec {
  const void* base = nullptr;  // 16-byte aligned
  int rank = 0;                // 1 .. kTensorMapMaxRank
  int elementBytes = 2;
  uint64_t dims[kTensorMapMaxRank] = {};       // elements; dims[0] is contiguous
  uint64_t strideBytes[kTensorMapMaxRank] = {};  // of dims 1..rank-1 (strideBytes[0] unused), multiples of 16
  uint32_t box[kTensorMapMaxRank] = {};        // elements per box, each 1..256; box[0] * elementBytes == 128
  // Boxes land in shared memory with the 128-byte swizzle: in each 1024-byte block of 8 rows of
  // 128 bytes, 16-byte unit u of row r is stored at unit u ^ r (the layout wgmma reads with
  // swizzle mode 128B). Elements outside dims read as zeros.
};

}  // namespace ffpa::sm90

#ifdef FFPA_EMULATE
namespace ffpa::sm90 {
using TensorMap = TensorMapSpec;
}
#else
#include <cuda.h>  // CUtensorMap (a type only: nothing of libcuda is linked)
namespace ffpa::sm90 {
using TensorMap = CUtensorMap;
}
#endif
