#include "sm90/tensor_map_encoding.h"

#include "core/error.h"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

namespace ffpa::sm90 {
namespace {

constexpr uint64_t kStrideLimit = uint64_t{1} << 40;
constexpr uint64_t kDimLimit = uint64_t{1} << 32;

CUtensorMapDataType dataTypeOf(int elementBytes) {
  // TMA copies bytes: an unsigned type of the element's width moves fp16 and bf16 alike, and
  // out-of-bounds elements are zero bits, the +0.0 of either.
  switch (elementBytes) {
    case 1: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case 2: return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case 4: return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    default: fail(FFPA_STATUS_INTERNAL_ERROR, cat("TMA map: element size ", elementBytes, " is not 1, 2 or 4 bytes"));
  }
}

// libcuda's encoder, through the runtime (the library links no libcuda itself). Looked up once.
PFN_cuTensorMapEncodeTiled_v12000 driverEncoder() {
  static std::once_flag once;
  static PFN_cuTensorMapEncodeTiled_v12000 encoder = nullptr;
  static cudaError_t error = cudaSuccess;
  static cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSuccess;
  std::call_once(once, [] {
    void* function = nullptr;
#if CUDART_VERSION >= 12050
    error = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found);
#else  // CUDA 12.0 - 12.4: the unversioned lookup (the ABI of the CUDA version built against)
    error = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &function, cudaEnableDefault, &found);
#endif
    if (error == cudaSuccess && found == cudaDriverEntryPointSuccess) {
      encoder = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
    } else {
      cudaGetLastError();
    }
  });
  if (encoder == nullptr) {
    fail(FFPA_STATUS_NOT_SUPPORTED,
         cat("the CUDA driver offers no cuTensorMapEncodeTiled (", cudaGetErrorName(error),
             found == cudaDriverEntryPointVersionNotSufficent ? ", driver older than CUDA 12.0" : "",
             "): the sm90 kernels need it"));
  }
  return encoder;
}

}  // namespace

TiledEncoding tiledEncoding(const TensorMapSpec& spec) {
  auto broken = [&](const std::string& rule) {
    fail(FFPA_STATUS_INTERNAL_ERROR, cat("TMA map over ", spec.base, ": ", rule));
  };
  if (spec.rank < 1 || spec.rank > kTensorMapMaxRank) broken(cat("rank ", spec.rank, " is not 1..", kTensorMapMaxRank));
  if (reinterpret_cast<uintptr_t>(spec.base) % 16 != 0) broken("the base is not 16-byte aligned");
  if (uint64_t(spec.box[0]) * uint64_t(spec.elementBytes) != 128) {
    broken(cat("a box row is ", spec.box[0], " x ", spec.elementBytes, " bytes, not the 128 of the swizzle"));
  }
  TiledEncoding e{};
  e.dataType = dataTypeOf(spec.elementBytes);
  e.rank = cuuint32_t(spec.rank);
  e.base = const_cast<void*>(spec.base);  // TMA loads only; the driver's signature is not const
  for (int d = 0; d < spec.rank; ++d) {
    if (spec.dims[d] == 0 || spec.dims[d] > kDimLimit) broken(cat("dim ", d, " is ", spec.dims[d], ", not 1..2^32"));
    if (spec.box[d] == 0 || spec.box[d] > 256) broken(cat("box ", d, " is ", spec.box[d], ", not 1..256"));
    e.dims[d] = spec.dims[d];
    e.box[d] = spec.box[d];
    e.elementStrides[d] = 1;
    if (d == 0) continue;
    const uint64_t stride = spec.strideBytes[d];
    if (stride % 16 != 0 || stride == 0 || stride >= kStrideLimit) {
      broken(cat("the stride of dim ", d, " is ", stride, " bytes, not a positive multiple of 16 below 2^40"));
    }
    e.strides[d - 1] = stride;
  }
  e.interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  e.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  // Boxes are 128-byte rows: fetch L2 lines of 128 bytes around them.
  e.l2Promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  e.oobFill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;  // zeros
  return e;
}

CUtensorMap encodeTensorMap(const TensorMapSpec& spec) {
  const TiledEncoding e = tiledEncoding(spec);
  const PFN_cuTensorMapEncodeTiled_v12000 encode = driverEncoder();
  CUtensorMap map;
  const CUresult result = encode(&map, e.dataType, e.rank, e.base, e.dims, e.strides, e.box, e.elementStrides,
                                 e.interleave, e.swizzle, e.l2Promotion, e.oobFill);
  if (result != CUDA_SUCCESS) {
    fail(FFPA_STATUS_EXECUTION_FAILED_CUDA,
         cat("cuTensorMapEncodeTiled refused the map over ", spec.base, " (CUresult ", int(result), ")"));
  }
  return map;
}

}  // namespace ffpa::sm90
