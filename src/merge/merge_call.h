// ffpaAttentionMerge, ffpaAttentionApplySinks and ffpaAttentionSinksBackward behind the C
// boundary: the checked problems, the checked pointers, and the kernel launches (merge_kernel.cu,
// sink_gradient_kernel.cu).
#pragma once

#include "core/descriptors.h"
#include "core/problem.h"

#include <array>
#include <cstdint>

namespace ffpa {

inline constexpr int32_t kMaxMergePartials = FFPA_MAX_MERGE_PARTIALS;

// The B, H and N strides of a tensor, as the kernels take them (D is contiguous). constexpr, so
// that device code may call offset() (nvcc --expt-relaxed-constexpr).
struct RowStrides {
  int64_t b, h, n;
  constexpr int64_t offset(int64_t ib, int64_t ih, int64_t in) const { return ib * b + ih * h + in * n; }
};
inline RowStrides rowStrides(const Strides& s) { return {s[0], s[1], s[2]}; }

// Shapes, types and strides of one merge: `count` partials [B, H, N, D] with their [B, H, N]
// log-sum-exps into one output (and optionally its log-sum-exp).
struct MergeProblem {
  int32_t count = 0;
  ffpaDataType_t partialType = FFPA_DATA_TYPE_FLOAT32;
  ffpaDataType_t outType = FFPA_DATA_TYPE_FLOAT32;
  int64_t batch = 0, heads = 0, seq = 0, headDim = 0;
  Strides partialO{}, partialLse{}, o{}, lse{};  // elements, [B, H, N, D] order
  bool hasLse = false;
  // The output (O and its LSE, so hasLse) holds one more part before the merge: a running result
  // that the partials are folded into, in place (context parallelism; not in the public API).
  bool carry = false;
};

struct MergeLayouts {
  const TensorLayout* partialO;
  const TensorLayout* partialLse;
  const TensorLayout* o;
  const TensorLayout* lse;  // null when the merged log-sum-exp is not wanted
};

// Throws ffpa::Error naming the descriptor (or `count`) that is wrong.
MergeProblem mergeProblem(int32_t count, const MergeLayouts& layouts);

struct MergeTensors {
  std::array<const void*, kMaxMergePartials> partialO{};
  std::array<const float*, kMaxMergePartials> partialLse{};
  void* o = nullptr;
  float* lse = nullptr;
  const float* sinks = nullptr;  // [H]: one more part per row, with O = 0 and LSE = sinks[h]
};

// Copies the caller's pointers after checking them: none null (the index named), each aligned to
// its element type, no output sharing memory with another buffer except the documented in-place
// update (an output given as one of the partials, with the partials' type and strides). Throws.
MergeTensors checkedMergeTensors(const MergeProblem& problem, const MergeLayouts& layouts,
                                 const void* const* partialO, const float* const* partialLse,
                                 void* o, float* lse);

// ffpaAttentionApplySinks: a merge of one part, the result itself in place, with the sinks as the
// other part. Throws naming the argument that is wrong.
MergeProblem applySinksProblem(const TensorLayout& o, const TensorLayout& lse);
MergeTensors checkedApplySinksTensors(const MergeProblem& problem, const TensorLayout& oLayout,
                                      const TensorLayout& lseLayout, const float* sinks, void* o,
                                      float* lse);

// ffpaAttentionSinksBackward: O' and dO [B, H, N, D] of one type, LSE' [B, H, N].
struct SinkGradientProblem {
  ffpaDataType_t dtype = FFPA_DATA_TYPE_FLOAT32;
  int64_t batch = 0, heads = 0, seq = 0, headDim = 0;
  Strides o{}, dO{}, lse{};
};
struct SinkGradientTensors {
  const float* sinks;
  const void* o;
  const void* dO;
  const float* lse;
  float* dSinks;
};
SinkGradientProblem sinkGradientProblem(const TensorLayout& o, const TensorLayout& dO,
                                        const TensorLayout& lse);
// Pointers not null, aligned to their element types; dSinks overlapping no input. Throws.
void checkSinkGradientTensors(const SinkGradientProblem& problem, const TensorLayout& oLayout,
                              const TensorLayout& dOLayout, const TensorLayout& lseLayout,
                              const SinkGradientTensors& tensors);
// One CTA per head sums its rows in a fixed order: the same bits on every run.
void enqueueSinkGradient(const SinkGradientProblem& problem, const SinkGradientTensors& tensors,
                         ffpaStream_t stream);

// Whether the kernel may move 4 elements at once: D, every row stride and every pointer allow it.
bool mergeVectorizes(const MergeProblem& problem, const MergeTensors& tensors);

// Enqueues the merge kernel on `stream`; allocates nothing, waits for nothing. Throws
// ffpa::Error (EXECUTION_FAILED_CUDA) when the launch fails.
void enqueueMerge(const MergeProblem& problem, const MergeTensors& tensors, ffpaStream_t stream);

}  // namespace ffpa
