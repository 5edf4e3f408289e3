// An attention problem: the shapes, strides and settings of one forward or backward call, checked
// for consistency. Everything that can change a plan lives here (the scale does not; it is
// passed at launch).
#pragma once

#include "core/descriptors.h"

#include <array>
#include <cstdint>
#include <string>

namespace ffpa {

enum class Direction : int32_t { Forward = 0, Backward = 1 };

using Strides = std::array<int64_t, 4>;  // elements, in [B, H, N, D] order (LSE: D unused)

// A layout's strides, those of dimensions of extent 1 normalized to 0 (they never multiply
// anything but 0), so that layouts differing only there share one plan.
Strides stridesOf(const TensorLayout& t);
// "[2, 8, 100, 512]", for messages.
std::string dimsText(const TensorLayout& t);

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

// Copies what every kernel's parameters carry under the same names: sizes (as the kernels' 32-bit
// fields; the planners refuse larger problems before), the causal mask, and the softmax scale in
// log2 units (the kernels exponentiate with exp2).
template <class KernelParams>
void copyProblemSizes(const AttentionProblem& problem, KernelParams& p) {
  p.batch = static_cast<int32_t>(problem.batch);
  p.headsQ = static_cast<int32_t>(problem.headsQ);
  p.groupSize = static_cast<int32_t>(problem.groupSize());
  p.seqQ = static_cast<int32_t>(problem.seqQ);
  p.seqKv = static_cast<int32_t>(problem.seqKv);
  p.causal = problem.causal != FFPA_CAUSAL_NONE;
  p.causalOffset = problem.causalOffset();
  p.scaleLog2 = static_cast<float>(problem.scale * 1.4426950408889634);  // log2(e)
}

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
// masks; the backward does 2.5 times as many.
double forwardFlops(const AttentionProblem& problem);

}  // namespace ffpa

namespace ffpa {
// "forward bf16 B=1 Hq=32 Hkv=8 Nq=4096 Nkv=4096 Dqk=512 Dv=512 causal=none", for messages.
std::string describe(const AttentionProblem& problem);
}  // namespace ffpa
