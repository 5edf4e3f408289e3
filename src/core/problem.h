// An attention problem: the shapes, strides and settings of one forward or backward call, checked
// for consistency. Everything that can change a plan lives here (the scale does not; it is
// passed at launch).
#pragma once

#include "common/problem_sizes.h"
#include "core/descriptors.h"

#include <array>
#include <cstdint>
#include <string>

namespace ffpa {

namespace slices {
class SliceTable;
}

enum class Direction : int32_t { Forward = 0, Backward = 1 };

using Strides = std::array<int64_t, 4>;  // elements, in [B, H, N, D] order (LSE: D unused)

// A layout's strides, those of dimensions of extent 1 normalized to 0 (they never multiply
// anything but 0), so that layouts differing only there share one plan.
Strides stridesOf(const TensorLayout& t);
// "[2, 8, 100, 512]", for messages.
std::string dimsText(const TensorLayout& t);

// Checks shared by the calls' descriptors; each throws ffpa::Error naming `name`.
// An attention tensor [B, H, N, D]: 4 dimensions,
void requireFourDims(const TensorLayout& t, const char* name);
// and D contiguous.
void requireUnitStrideD(const TensorLayout& t, const char* name);
// A log-sum-exp tensor: fp32 [b, h, n]; `origin` says where the expected shape comes from.
void checkLseLayout(const TensorLayout& lse, const char* name, int64_t b, int64_t h, int64_t n,
                    const char* origin);

struct AttentionProblem {
  Direction direction = Direction::Forward;
  ffpaDataType_t dtype = FFPA_DATA_TYPE_FLOAT16;
  int64_t batch = 0;
  int64_t headsQ = 0;
  int64_t headsKv = 0;
  int64_t seqQ = 0;
  int64_t seqKv = 0;
  int64_t headDimQk = 0;
  int64_t headDimV = 0;
  ffpaCausalMode_t causal = FFPA_CAUSAL_NONE;
  // The attention slices that mask this call instead of `causal` (valid for the call; plans
  // depend on their presence only).
  const slices::SliceTable* slices = nullptr;
  // FFPA_ATTENTION_KEY_LENGTHS: B key counts on the device, read by the kernels (valid for the
  // call; plans depend on their presence only). Batch entry b sees keys [0, min(max(L_b, 0), seqKv)).
  const int32_t* keyLengths = nullptr;
  float scale = 0.0f;  // resolved: the descriptor's, or 1/sqrt(headDimQk)
  bool hasLse = false;
  Strides q{}, k{}, v{}, o{}, lse{};  // forward and backward
  Strides dO{}, dq{}, dk{}, dv{};     // backward only

  int64_t groupSize() const { return headsQ / headsKv; }
  // Offset of key 0 of the causal diagonal: query i sees key j iff j <= i + causalOffset().
  int64_t causalOffset() const {
    return causal == FFPA_CAUSAL_BOTTOM_RIGHT ? seqKv - seqQ : 0;
  }
};

// Fills what every kernel's parameters begin with (kernels/common/problem_sizes.h): sizes (as the
// kernels' 32-bit fields; the planners refuse larger problems before), the causal mask, the
// per-batch key lengths (the planners give them only to kernels that read them), and the softmax
// scale in log2 units (the kernels exponentiate with exp2). Not the grid layout.
void copyProblemSizes(const AttentionProblem& problem, ProblemSizes& p);

// The descriptors of a forward call (lse may be nullptr). Throws ffpa::Error naming the
// descriptor argument that is wrong.
AttentionProblem forwardProblem(const AttentionSettings& attn, const TensorLayout& q,
                                const TensorLayout& k, const TensorLayout& v,
                                const TensorLayout& o, const TensorLayout* lse);

struct BackwardLayouts {
  const TensorLayout* q;
  const TensorLayout* k;
  const TensorLayout* v;
  const TensorLayout* o;
  const TensorLayout* dO;
  const TensorLayout* lse;
  const TensorLayout* dq;
  const TensorLayout* dk;
  const TensorLayout* dv;
};
AttentionProblem backwardProblem(const AttentionSettings& attn, const BackwardLayouts& layouts);

// Forward FLOPs by the usual count (2 * B * Hq * Nq * Nkv * (Dqk + Dv)), halved for causal
// masks, over the visible pairs for slices; the backward does 2.5 times as many.
double forwardFlops(const AttentionProblem& problem);

}  // namespace ffpa

namespace ffpa {
// "forward bf16 B=1 Hq=32 Hkv=8 Nq=4096 Nkv=4096 Dqk=512 Dv=512 causal=none", for messages.
std::string describe(const AttentionProblem& problem);
}  // namespace ffpa
