// Element values for the library's simple CUDA kernels (reference path, sanity check, merge):
// conversions of fp16, bf16 and fp32 to and from fp32, and the choice of a kernel instance by
// the element type of a descriptor.
#pragma once

#include <ffpa/ffpa.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace ffpa {

__device__ inline float toFloat(float x) { return x; }
__device__ inline float toFloat(__half x) { return __half2float(x); }
__device__ inline float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

// Round to nearest even, as every output of libffpa is rounded.
template <class T>
__device__ inline T fromFloat(float x);
template <>
__device__ inline float fromFloat<float>(float x) { return x; }
template <>
__device__ inline __half fromFloat<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Calls fn with a null pointer of the element type of `dtype`, to pick a kernel instance.
template <class Fn>
void withElementType(ffpaDataType_t dtype, Fn&& fn) {
  switch (dtype) {
    case FFPA_DATA_TYPE_FLOAT16: fn(static_cast<__half*>(nullptr)); break;
    case FFPA_DATA_TYPE_BFLOAT16: fn(static_cast<__nv_bfloat16*>(nullptr)); break;
    default: fn(static_cast<float*>(nullptr)); break;
  }
}

template <class Tag>
using ElementOf = std::remove_pointer_t<Tag>;

}  // namespace ffpa
