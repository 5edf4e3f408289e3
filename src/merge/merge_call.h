// ffpaAttentionMerge behind the C boundary: the checked problem, the checked pointers, and the
// kernel launch (merge_kernel.cu).
#pragma once

#include "core/descriptors.h"
#include "core/problem.h"

#include <array>
#include <cstdint>

namespace ffpa {

inline constexpr int32_t kMaxMergePartials = FFPA_MAX_MERGE_PARTIALS;

// Shapes, types and strides of one merge: `count` partials [B, H, N, D] with their [B, H, N]
// log-sum-exps into one output (and optionally its log-sum-exp).
struct MergeProblem {
  int32_t count = 0;
  ffpaDataType_t partialType = FFPA_DATA_TYPE_FLOAT32;
  ffpaDataType_t outType = FFPA_DATA_TYPE_FLOAT32;
  int64_t batch = 0, heads = 0, seq = 0, headDim = 0;
  Strides partialO{}, partialLse{}, o{}, lse{};  // elements, [B, H, N, D] order
  bool hasLse = false;
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
};

// Copies the caller's pointers after checking them: none null (the index named), each aligned to
// its element type, no output sharing memory with another buffer except the documented in-place
// update (an output given as one of the partials, with the partials' type and strides). Throws.
MergeTensors checkedMergeTensors(const MergeProblem& problem, const MergeLayouts& layouts,
                                 const void* const* partialO, const float* const* partialLse,
                                 void* o, float* lse);

// Whether the kernel may move 4 elements at once: D, every row stride and every pointer allow it.
bool mergeVectorizes(const MergeProblem& problem, const MergeTensors& tensors);

// Enqueues the merge kernel on `stream`; allocates nothing, waits for nothing. Throws
// ffpa::Error (EXECUTION_FAILED_CUDA) when the launch fails.
void enqueueMerge(const MergeProblem& problem, const MergeTensors& tensors, ffpaStream_t stream);

}  // namespace ffpa
