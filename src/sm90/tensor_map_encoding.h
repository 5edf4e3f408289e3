// Turning a TMA description (kernels/sm90/tensor_map.h) into the driver's opaque CUtensorMap.
//
// The map holds the tensor's address, so it is encoded for every call, on the host: a few
// microseconds, no device memory and no synchronization, which keeps the execute path graph-
// capturable (the kernel receives the map by value, as a __grid_constant__ parameter).
#pragma once

#include "sm90/tensor_map.h"

#include <cuda.h>

namespace ffpa::sm90 {

// The arguments of cuTensorMapEncodeTiled for one description.
struct TiledEncoding {
  CUtensorMapDataType dataType;
  cuuint32_t rank;
  void* base;
  cuuint64_t dims[kTensorMapMaxRank];
  cuuint64_t strides[kTensorMapMaxRank - 1];  // bytes, of dims 1..rank-1
  cuuint32_t box[kTensorMapMaxRank];
  cuuint32_t elementStrides[kTensorMapMaxRank];
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2Promotion;
  CUtensorMapFloatOOBfill oobFill;
};

// Checks `spec` against the driver's rules for tiled maps with the 128-byte swizzle (16-byte
// aligned base, strides multiples of 16 below 2^40, boxes of 1..256 elements with 128-byte
// rows) and returns its arguments. Throws ffpa::Error (INTERNAL_ERROR) naming the broken rule:
// callers refuse such tensors at planning time (forwardRefusal), so this is a library bug.
TiledEncoding tiledEncoding(const TensorMapSpec& spec);

// The encoded map. Throws ffpa::Error: NOT_SUPPORTED when the driver lacks
// cuTensorMapEncodeTiled (older than CUDA 12.0), EXECUTION_FAILED_CUDA when it refuses the map.
CUtensorMap encodeTensorMap(const TensorMapSpec& spec);

}  // namespace ffpa::sm90
