#include "merge/merge_call.h"

#include "api/operands.h"
#include "core/error.h"

namespace ffpa {
namespace {

void checkOutputLike(const TensorLayout& t, const char* name) {
  requireFourDims(t, name);
  requireUnitStrideD(t, name);
}

void checkLseLike(const TensorLayout& t, const char* name, const TensorLayout& partialO) {
  checkLseLayout(t, name, partialO.dims[0], partialO.dims[1], partialO.dims[2], "[B, H, N] of the outputs");
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
         stridesOf(a) == stridesOf(b);
}

// A per-head fp32 vector ([H] sinks or their gradients): a plain range of H floats.
Operand headVector(const char* name, const float* data, int64_t heads, bool isOutput) {
  return {name, data, nullptr, heads * static_cast<int64_t>(sizeof(float)), isOutput};
}

void requireApart(const Operand& a, const Operand& b) {
  require(!overlaps(a, b), FFPA_STATUS_BAD_PARAM, a.name, " overlaps ", b.name,
          "; they must not share memory");
}

void requireHeadDim(const TensorLayout& t, const char* name) {
  require(t.dims[3] <= FFPA_MAX_HEAD_DIM, FFPA_STATUS_NOT_SUPPORTED_SHAPE, "the head dimension (D of ",
          name, ") is ", t.dims[3], "; allowed: 1 to FFPA_MAX_HEAD_DIM (", FFPA_MAX_HEAD_DIM, ")");
}

// A problem from layouts already checked.
MergeProblem problemOf(int32_t count, const MergeLayouts& layouts) {
  const TensorLayout& partial = *layouts.partialO;
  MergeProblem p;
  p.count = count;
  p.partialType = partial.dtype;
  p.outType = layouts.o->dtype;
  p.batch = partial.dims[0];
  p.heads = partial.dims[1];
  p.seq = partial.dims[2];
  p.headDim = partial.dims[3];
  p.partialO = stridesOf(partial);
  p.partialLse = stridesOf(*layouts.partialLse);
  p.o = stridesOf(*layouts.o);
  p.hasLse = layouts.lse != nullptr;
  if (p.hasLse) p.lse = stridesOf(*layouts.lse);
  return p;
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
  requireHeadDim(partial, "partialODesc");
  checkLseLike(*layouts.partialLse, "partialLseDesc", partial);
  if (layouts.lse != nullptr) checkLseLike(*layouts.lse, "lseDesc", partial);
  return problemOf(count, layouts);
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

MergeProblem applySinksProblem(const TensorLayout& o, const TensorLayout& lse) {
  checkOutputLike(o, "oDesc");
  requireHeadDim(o, "oDesc");
  checkLseLike(lse, "lseDesc", o);
  return problemOf(1, {&o, &lse, &o, &lse});
}

MergeTensors checkedApplySinksTensors(const MergeProblem& problem, const TensorLayout& oLayout,
                                      const TensorLayout& lseLayout, const float* sinks, void* o,
                                      float* lse) {
  requireElementAligned(sinks, FFPA_DATA_TYPE_FLOAT32, "sinks", -1);
  // Named as this call's arguments here: below they are also the (only) partial.
  requireElementAligned(o, problem.outType, "o", -1);
  requireElementAligned(lse, FFPA_DATA_TYPE_FLOAT32, "lse", -1);
  const void* partialO = o;
  const float* partialLse = lse;
  const MergeLayouts layouts{&oLayout, &lseLayout, &oLayout, &lseLayout};
  MergeTensors t = checkedMergeTensors(problem, layouts, &partialO, &partialLse, o, lse);
  const Operand sinkOp = headVector("sinks", sinks, problem.heads, false);
  requireApart(tensorOperand("o", o, &oLayout, true), sinkOp);
  requireApart(tensorOperand("lse", lse, &lseLayout, true), sinkOp);
  t.sinks = sinks;
  return t;
}

SinkGradientProblem sinkGradientProblem(const TensorLayout& o, const TensorLayout& dO,
                                        const TensorLayout& lse) {
  checkOutputLike(o, "oDesc");
  checkOutputLike(dO, "doDesc");
  require(dO.dtype == o.dtype, FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH, "doDesc is ", dataTypeName(dO.dtype),
          " but oDesc is ", dataTypeName(o.dtype), "; dO has the type of O");
  require(dO.dims == o.dims, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "doDesc is ", dimsText(dO), "; expected ",
          dimsText(o), " (the shape of oDesc)");
  requireHeadDim(o, "oDesc");
  checkLseLike(lse, "lseDesc", o);
  SinkGradientProblem p;
  p.dtype = o.dtype;
  p.batch = o.dims[0];
  p.heads = o.dims[1];
  p.seq = o.dims[2];
  p.headDim = o.dims[3];
  p.o = stridesOf(o);
  p.dO = stridesOf(dO);
  p.lse = stridesOf(lse);
  return p;
}

void checkSinkGradientTensors(const SinkGradientProblem& problem, const TensorLayout& oLayout,
                              const TensorLayout& dOLayout, const TensorLayout& lseLayout,
                              const SinkGradientTensors& t) {
  requireElementAligned(t.sinks, FFPA_DATA_TYPE_FLOAT32, "sinks", -1);
  requireElementAligned(t.o, problem.dtype, "o", -1);
  requireElementAligned(t.dO, problem.dtype, "dO", -1);
  requireElementAligned(t.lse, FFPA_DATA_TYPE_FLOAT32, "lse", -1);
  requireElementAligned(t.dSinks, FFPA_DATA_TYPE_FLOAT32, "dSinks", -1);
  const Operand out = headVector("dSinks", t.dSinks, problem.heads, true);
  requireApart(out, headVector("sinks", t.sinks, problem.heads, false));
  requireApart(out, tensorOperand("o", t.o, &oLayout, false));
  requireApart(out, tensorOperand("dO", t.dO, &dOLayout, false));
  requireApart(out, tensorOperand("lse", t.lse, &lseLayout, false));
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
