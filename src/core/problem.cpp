#include "core/problem.h"

#include "core/error.h"
#include "core/slice_table.h"
#include "cp/context_parallel.h"

#include <cmath>

namespace ffpa {

std::string dimsText(const TensorLayout& t) {
  std::string text = "[";
  for (int32_t i = 0; i < t.nbDims; ++i) text += cat(i ? ", " : "", t.dims[i]);
  return text + "]";
}

Strides stridesOf(const TensorLayout& t) {
  Strides s{};
  for (int32_t i = 0; i < t.nbDims; ++i) s[i] = t.dims[i] == 1 ? 0 : t.strides[i];
  return s;
}

void requireFourDims(const TensorLayout& t, const char* name) {
  require(t.nbDims == 4, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, name, " has ", t.nbDims,
          " dimensions; attention tensors have 4: [B, H, N, D]");
}

void requireUnitStrideD(const TensorLayout& t, const char* name) {
  require(t.dims[3] == 1 || t.strides[3] == 1, FFPA_STATUS_BAD_PARAM_STRIDE, name,
          ": the stride of D (the last dimension) is ", t.strides[3], "; it must be 1");
}

void checkLseLayout(const TensorLayout& lse, const char* name, int64_t b, int64_t h, int64_t n,
                    const char* origin) {
  require(lse.nbDims == 3, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, name, " has ", lse.nbDims,
          " dimensions; a log-sum-exp tensor has 3: [B, H, N]");
  require(lse.dtype == FFPA_DATA_TYPE_FLOAT32, FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH, name, " is ",
          dataTypeName(lse.dtype), "; log-sum-exp tensors are fp32");
  require(lse.dims[0] == b && lse.dims[1] == h && lse.dims[2] == n, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
          name, " is ", dimsText(lse), "; expected [", b, ", ", h, ", ", n, "] (", origin, ")");
}

namespace {

// Q, K, V, O and the gradients: 4-D, the problem's type, unit stride on D.
void checkAttentionTensor(const TensorLayout& t, const char* name, ffpaDataType_t dtype) {
  requireFourDims(t, name);
  require(t.dtype == dtype, FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH, name, " is ", dataTypeName(t.dtype),
          " but qDesc is ", dataTypeName(dtype), "; Q, K, V, O and the gradients share one type");
  requireUnitStrideD(t, name);
}

void requireDims(const TensorLayout& t, const char* name, int64_t b, int64_t h, int64_t n, int64_t d,
                 const char* expectation) {
  require(t.dims[0] == b && t.dims[1] == h && t.dims[2] == n && t.dims[3] == d,
          FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, name, " is ", dimsText(t), "; expected [", b, ", ",
          h, ", ", n, ", ", d, "] (", expectation, ")");
}

AttentionProblem checkedCore(const AttentionSettings& attn, const TensorLayout& q,
                             const TensorLayout& k, const TensorLayout& v, const TensorLayout& o,
                             const char* oName) {
  checkAttentionTensor(q, "qDesc", q.dtype);
  checkAttentionTensor(k, "kDesc", q.dtype);
  checkAttentionTensor(v, "vDesc", q.dtype);
  checkAttentionTensor(o, oName, q.dtype);

  AttentionProblem p;
  p.dtype = q.dtype;
  p.batch = q.dims[0];
  p.headsQ = q.dims[1];
  p.seqQ = q.dims[2];
  p.headDimQk = q.dims[3];
  p.headsKv = k.dims[1];
  p.seqKv = k.dims[2];
  p.headDimV = v.dims[3];

  requireDims(k, "kDesc", p.batch, p.headsKv, p.seqKv, p.headDimQk,
              "K has Q's batch and head dimension");
  requireDims(v, "vDesc", p.batch, p.headsKv, p.seqKv, p.headDimV,
              "V has K's batch, heads and sequence length");
  requireDims(o, oName, p.batch, p.headsQ, p.seqQ, p.headDimV,
              "O has Q's batch, heads and sequence length and V's head dimension");
  require(p.headsQ % p.headsKv == 0, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "qDesc has ", p.headsQ,
          " heads and kDesc ", p.headsKv, "; the query heads must be a multiple of the key/value heads");
  require(p.headDimQk <= FFPA_MAX_HEAD_DIM && p.headDimV <= FFPA_MAX_HEAD_DIM,
          FFPA_STATUS_NOT_SUPPORTED_SHAPE, "the head dimensions are ", p.headDimQk,
          " (D of qDesc and kDesc) and ", p.headDimV, " (D of vDesc); allowed: 1 to FFPA_MAX_HEAD_DIM (",
          FFPA_MAX_HEAD_DIM, ")");

  p.causal = attn.causal;
  if (attn.slices) {
    require(attn.causal == FFPA_CAUSAL_NONE, FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
            "attn has slices and FFPA_ATTENTION_CAUSAL_MODE = ", causalModeName(attn.causal),
            "; the slices are the mask: set FFPA_CAUSAL_NONE, or detach the slices");
    // Over a context-parallel sequence the slices mask the whole sequence: P shards of Nq rows.
    const int64_t shards = attn.contextParallel ? attn.contextParallel->ranks() : 1;
    // "attn's slices reach <reached> <last> but <has> <size> <unit>".
    const auto requireWithin = [shards](int64_t extent, int64_t size, const char* reached, const char* has,
                                        const char* unit) {
      if (extent <= size * shards) return;
      fail(FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
           cat("attn's slices reach ", reached, extent - 1, " but ", has, size, unit,
               shards > 1 ? cat(" on each of ", shards, " context-parallel ranks") : std::string()));
    };
    requireWithin(attn.slices->queryExtent(), p.seqQ, "query row ", "qDesc has Nq = ", " rows");
    requireWithin(attn.slices->keyExtent(), p.seqKv, "key ", "kDesc has Nkv = ", " keys");
    p.slices = attn.slices.get();
  }
  if (attn.keyLengths != nullptr) {
    require(!attn.slices, FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
            "attn has slices and FFPA_ATTENTION_KEY_LENGTHS; the slices' key ranges say which keys each sequence "
            "has: detach one of them");
    require(!attn.contextParallel, FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
            "attn is a context-parallel rank's and has FFPA_ATTENTION_KEY_LENGTHS; a ring shards the keys of "
            "equal sequences: detach the key lengths");
    p.keyLengths = attn.keyLengths;
  }
  p.scale = attn.scale > 0.0f ? attn.scale : 1.0f / std::sqrt(static_cast<float>(p.headDimQk));
  p.q = stridesOf(q);
  p.k = stridesOf(k);
  p.v = stridesOf(v);
  p.o = stridesOf(o);
  return p;
}

void checkLse(AttentionProblem& p, const TensorLayout& lse) {
  checkLseLayout(lse, "lseDesc", p.batch, p.headsQ, p.seqQ, "[B, Hq, Nq] of Q");
  p.hasLse = true;
  p.lse = stridesOf(lse);
}

void checkGradient(const TensorLayout& grad, const char* name, const TensorLayout& primal,
                   const char* primalName, ffpaDataType_t dtype) {
  checkAttentionTensor(grad, name, dtype);
  requireDims(grad, name, primal.dims[0], primal.dims[1], primal.dims[2], primal.dims[3],
              cat("the shape of ", primalName).c_str());
}

}  // namespace

AttentionProblem forwardProblem(const AttentionSettings& attn, const TensorLayout& q,
                                const TensorLayout& k, const TensorLayout& v,
                                const TensorLayout& o, const TensorLayout* lse) {
  AttentionProblem p = checkedCore(attn, q, k, v, o, "oDesc");
  p.direction = Direction::Forward;
  if (lse != nullptr) checkLse(p, *lse);
  return p;
}

AttentionProblem backwardProblem(const AttentionSettings& attn, const BackwardLayouts& t) {
  AttentionProblem p = checkedCore(attn, *t.q, *t.k, *t.v, *t.o, "oDesc");
  p.direction = Direction::Backward;
  checkLse(p, *t.lse);
  checkGradient(*t.dO, "doDesc", *t.o, "oDesc", p.dtype);
  checkGradient(*t.dq, "dqDesc", *t.q, "qDesc", p.dtype);
  checkGradient(*t.dk, "dkDesc", *t.k, "kDesc", p.dtype);
  checkGradient(*t.dv, "dvDesc", *t.v, "vDesc", p.dtype);
  p.dO = stridesOf(*t.dO);
  p.dq = stridesOf(*t.dq);
  p.dk = stridesOf(*t.dk);
  p.dv = stridesOf(*t.dv);
  return p;
}

void copyProblemSizes(const AttentionProblem& problem, ProblemSizes& p) {
  p.batch = static_cast<int32_t>(problem.batch);
  p.headsQ = static_cast<int32_t>(problem.headsQ);
  p.groupSize = static_cast<int32_t>(problem.groupSize());
  p.seqQ = static_cast<int32_t>(problem.seqQ);
  p.seqKv = static_cast<int32_t>(problem.seqKv);
  p.headDimQk = static_cast<int32_t>(problem.headDimQk);
  p.headDimV = static_cast<int32_t>(problem.headDimV);
  p.causal = problem.causal != FFPA_CAUSAL_NONE;
  p.causalOffset = problem.causalOffset();
  p.keyLengths = problem.keyLengths;
  p.causalAtKeyEnd = problem.causal == FFPA_CAUSAL_BOTTOM_RIGHT;
  p.scaleLog2 = static_cast<float>(problem.scale * 1.4426950408889634);  // log2(e)
}

double forwardFlops(const AttentionProblem& p) {
  const double full = 2.0 * static_cast<double>(p.batch) * static_cast<double>(p.headsQ) *
                      static_cast<double>(p.seqQ) * static_cast<double>(p.seqKv) *
                      static_cast<double>(p.headDimQk + p.headDimV);
  if (p.slices != nullptr) {
    return full / static_cast<double>(p.seqQ) / static_cast<double>(p.seqKv) *
           static_cast<double>(p.slices->visiblePairs());
  }
  return p.causal == FFPA_CAUSAL_NONE ? full : full / 2.0;
}

}  // namespace ffpa

namespace ffpa {
std::string describe(const AttentionProblem& p) {
  return cat(p.direction == Direction::Forward ? "forward " : "backward ", dataTypeName(p.dtype),
             " B=", p.batch, " Hq=", p.headsQ, " Hkv=", p.headsKv, " Nq=", p.seqQ, " Nkv=", p.seqKv,
             " Dqk=", p.headDimQk, " Dv=", p.headDimV, " causal=", causalModeName(p.causal),
             p.slices ? cat(" slices=", p.slices->slices().size()) : std::string(),
             p.keyLengths ? " key_lengths" : "",
             p.hasLse && p.direction == Direction::Forward ? " lse" : "");
}
}  // namespace ffpa
