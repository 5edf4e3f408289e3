// Copies and sums of [B, H, N, D] tensors with any row strides (D contiguous) and any element
// types: how context parallelism packs K/V for the ring, adds the gradients of its steps in fp32,
// and writes its fp32 results out in the tensors' type.
#pragma once

#include "merge/merge_call.h"

#include <ffpa/ffpa.h>

#include <cstdint>

namespace ffpa::cp {

struct RowTensor {
  void* data = nullptr;
  ffpaDataType_t dtype = FFPA_DATA_TYPE_FLOAT32;
  RowStrides strides{0, 0, 0};  // elements
};

struct RowShape {
  int64_t batch = 0, heads = 0, rows = 0, dim = 0;
};

enum class RowOp { Copy, Add };  // dst = src, or dst += src (in fp32, then rounded to dst's type)

// Enqueues the kernel on `stream`; allocates nothing. Throws ffpa::Error when the launch fails.
void enqueueRows(RowOp op, const RowShape& shape, const RowTensor& dst, const RowTensor& src,
                 ffpaStream_t stream);

}  // namespace ffpa::cp
