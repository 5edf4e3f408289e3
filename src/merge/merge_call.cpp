#include "merge/merge_call.h"

#include "api/operands.h"
#include "core/error.h"

namespace ffpa {
namespace {

void checkOutputLike(const TensorLayout& t, const char* name) {
  require(t.nbDims == 4, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, name, " has ", t.nbDims,
          " dimensions; attention outputs have 4: [B, H, N, D]");
  require(t.dims[3] == 1 || t.strides[3] == 1, FFPA_STATUS_BAD_PARAM_STRIDE, name,
          ": the stride of D (the last dimension) is ", t.strides[3], "; it must be 1");
}

void checkLseLike(const TensorLayout& t, const char* name, const TensorLayout& partialO) {
  require(t.nbDims == 3, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, name, " has ", t.nbDims,
          " dimensions; a log-sum-exp tensor has 3: [B, H, N]");
  require(t.dtype == FFPA_DATA_TYPE_FLOAT32, FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH, name, " is ",
          dataTypeName(t.dtype), "; log-sum-exp tensors are fp32");
  require(t.dims[0] == partialO.dims[0] && t.dims[1] == partialO.dims[1] &&
              t.dims[2] == partialO.dims[2],
          FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, name, " is ", dimsText(t), "; expected [",
          partialO.dims[0], ", ", partialO.dims[1], ", ", partialO.dims[2],
          "] ([B, H, N] of partialODesc)");
}

void requireElementAligned(const void* pointer, ffpaDataType_t dtype, const char* name, int32_t index) {
  const size_t bytes = elementBytes(dtype);
  if (index >= 0) {
    require(pointer != nullptr, FFPA_STATUS_BAD_PARAM_NULL_POINTER, name, "[", index, "] is NULL");
  } else {
    requireNotNull(pointer, name);
  }
  require(reinterpret_cast<uintptr_t>(pointer) % bytes == 0, FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER,
          name, index >= 0 ? cat("[", index, "]") : std::string(), " (", pointer,
          ") is not aligned to its element size, ", bytes, " bytes");
}

// The one overlap allowed: an output updated in place, given as one of the partials with their
// type, shape and strides (each element is then read before it is written, by the same thread).
bool sameTensor(const Operand& out, const Operand& partial) {
  const TensorLayout& a = *out.layout;
  const TensorLayout& b = *partial.layout;
  return out.data == partial.data && a.dtype == b.dtype && a.nbDims == b.nbDims && a.dims == b.dims &&
         a.strides == b.strides;
}

}  // namespace

MergeProblem mergeProblem(int32_t count, const MergeLayouts& layouts) {
  require(count >= 1 && count <= kMaxMergePartials, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "count is ",
          count, "; allowed: 1 to FFPA_MAX_MERGE_PARTIALS (", kMaxMergePartials, ")");
  const TensorLayout& partial = *layouts.partialO;
  const TensorLayout& out = *layouts.o;
  checkOutputLike(partial, "partialODesc");
  checkOutputLike(out, "oDesc");
  require(out.dims == partial.dims, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "oDesc is ", dimsText(out),
          "; expected ", dimsText(partial), " (the shape of partialODesc)");
  require(partial.dims[3] <= FFPA_MAX_HEAD_DIM, FFPA_STATUS_NOT_SUPPORTED_SHAPE,
          "the head dimension (D of partialODesc) is ", partial.dims[3],
          "; allowed: 1 to FFPA_MAX_HEAD_DIM (", FFPA_MAX_HEAD_DIM, ")");
  checkLseLike(*layouts.partialLse, "partialLseDesc", partial);
  if (layouts.lse != nullptr) checkLseLike(*layouts.lse, "lseDesc", partial);

  MergeProblem p;
  p.count = count;
  p.partialType = partial.dtype;
  p.outType = out.dtype;
  p.batch = partial.dims[0];
  p.heads = partial.dims[1];
  p.seq = partial.dims[2];
  p.headDim = partial.dims[3];
  p.partialO = stridesOf(partial);
  p.partialLse = stridesOf(*layouts.partialLse);
  p.o = stridesOf(out);
  p.hasLse = layouts.lse != nullptr;
  if (p.hasLse) p.lse = stridesOf(*layouts.lse);
  return p;
}

MergeTensors checkedMergeTensors(const MergeProblem& problem, const MergeLayouts& layouts,
                                 const void* const* partialO, const float* const* partialLse,
                                 void* o, float* lse) {
  requireNotNull(partialO, "partialO");
  requireNotNull(partialLse, "partialLse");
  MergeTensors t;
  // On the stack: the execute path allocates nothing, not even on the host.
  std::array<Operand, 2 * kMaxMergePartials> inputs{};
  for (int32_t i = 0; i < problem.count; ++i) {
    requireElementAligned(partialO[i], problem.partialType, "partialO", i);
    requireElementAligned(partialLse[i], FFPA_DATA_TYPE_FLOAT32, "partialLse", i);
    t.partialO[i] = partialO[i];
    t.partialLse[i] = partialLse[i];
    inputs[2 * i] = tensorOperand("a partial output", partialO[i], layouts.partialO, false);
    inputs[2 * i + 1] = tensorOperand("a partial log-sum-exp", partialLse[i], layouts.partialLse, false);
  }
  requireElementAligned(o, problem.outType, "o", -1);
  if (problem.hasLse) requireElementAligned(lse, FFPA_DATA_TYPE_FLOAT32, "lse", -1);
  t.o = o;
  t.lse = lse;

  const Operand oOp = tensorOperand("o", o, layouts.o, true);
  const auto checkOutput = [&](const Operand& out) {
    for (int32_t i = 0; i < 2 * problem.count; ++i) {
      const Operand& in = inputs[i];
      require(!overlaps(out, in) || sameTensor(out, in), FFPA_STATUS_BAD_PARAM, "output ", out.name,
              " overlaps ", in.name, " (index ", i / 2,
              "); an output may share memory with an input only as that very tensor, with its "
              "type and strides (an update in place)");
    }
  };
  checkOutput(oOp);
  if (problem.hasLse) {
    const Operand lseOp = tensorOperand("lse", lse, layouts.lse, true);
    checkOutput(lseOp);
    require(!overlaps(oOp, lseOp), FFPA_STATUS_BAD_PARAM, "output o overlaps output lse");
  }
  return t;
}

bool mergeVectorizes(const MergeProblem& p, const MergeTensors& t) {
  constexpr int64_t kVector = 4;
  const auto rowsAllow = [&](const Strides& s) {
    return s[0] % kVector == 0 && s[1] % kVector == 0 && s[2] % kVector == 0;
  };
  const auto aligned = [&](const void* pointer, ffpaDataType_t dtype) {
    return reinterpret_cast<uintptr_t>(pointer) % (kVector * elementBytes(dtype)) == 0;
  };
  if (p.headDim % kVector != 0 || !rowsAllow(p.partialO) || !rowsAllow(p.o)) return false;
  if (!aligned(t.o, p.outType)) return false;
  for (int32_t i = 0; i < p.count; ++i) {
    if (!aligned(t.partialO[i], p.partialType)) return false;
  }
  return true;
}

}  // namespace ffpa
