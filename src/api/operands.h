// The device buffers of an execute call, for the checks every call makes before it touches the
// device: no output may share memory with another buffer of the call.
#pragma once

#include "core/descriptors.h"

#include <cstdint>

namespace ffpa {

// One device buffer: a tensor, or the workspace (no layout).
struct Operand {
  const char* name;
  const void* data;
  const TensorLayout* layout;
  int64_t spanBytes;
  bool isOutput;
};

inline Operand tensorOperand(const char* name, const void* data, const TensorLayout* layout,
                             bool isOutput) {
  return {name, data, layout, layout->spanBytes(), isOutput};
}

// Whether two buffers share a byte. Exact for two tensors of one layout whole elements apart (so
// interleaved slices of one buffer pass); a range test otherwise.
bool overlaps(const Operand& a, const Operand& b);

// An optional log-sum-exp output (of the forward, of a merge): its descriptor and pointer come
// together or not at all. The layout, or null when neither is given; throws otherwise.
const TensorLayout* optionalLse(ffpaTensorDescriptor_t lseDesc, const void* lse);

}  // namespace ffpa
