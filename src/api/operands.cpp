#include "api/operands.h"

#include "core/error.h"

namespace ffpa {

bool overlaps(const Operand& a, const Operand& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.data);
  const auto b0 = reinterpret_cast<uintptr_t>(b.data);
  const bool rangesMeet = a0 < b0 + static_cast<uintptr_t>(b.spanBytes) &&
                          b0 < a0 + static_cast<uintptr_t>(a.spanBytes);
  if (!rangesMeet || a.layout == nullptr || b.layout == nullptr) return rangesMeet;
  // Same layout, whole elements apart: decide exactly.
  const TensorLayout& la = *a.layout;
  const TensorLayout& lb = *b.layout;
  const auto bytes = static_cast<int64_t>(elementBytes(la.dtype));
  const int64_t shift = static_cast<int64_t>(b0 - a0);
  if (la.nbDims == lb.nbDims && la.dims == lb.dims && la.strides == lb.strides &&
      elementBytes(lb.dtype) == elementBytes(la.dtype) && shift % bytes == 0) {
    return copiesShareAnElement(la, shift / bytes);
  }
  return true;
}

const TensorLayout* optionalLse(ffpaTensorDescriptor_t lseDesc, const void* lse) {
  require((lseDesc == nullptr) == (lse == nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER,
          lseDesc == nullptr ? "lseDesc is NULL but lse is not" : "lse is NULL but lseDesc is not",
          "; pass both to get the log-sum-exp, or neither");
  return lseDesc == nullptr ? nullptr : &tensorLayout(lseDesc, "lseDesc");
}

}  // namespace ffpa
