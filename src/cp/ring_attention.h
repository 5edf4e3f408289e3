// Context-parallel attention on one rank: its plans (one attention plan per block of the ring
// schedule, the workspace they share) and its programs, the stream-ordered work of each phase of
// the ring. A phase ends where the ranks exchange blocks, so that ranks simulated in one process
// can be run phase by phase (runRing), while a real rank runs its phases back to back.
//
// Forward, rank r, step s holding the K/V of rank r - s: the step's blocks are attention calls
// writing a partial O (the tensors' type) and LSE, folded into a running fp32 O and LSE by the
// merge kernel; meanwhile the exchange moves the block held to rank r + 1 and receives the next
// one (two K/V buffers). The last step writes O and LSE out in the caller's layouts.
// Backward: the same K/V ring; each step's dQ is added to an fp32 dQ, its dK/dV to an fp32 partial
// that is added, one phase later, to the block's running dK/dV arriving from rank r - 1 and then
// sent on to rank r + 1; after P steps each block's dK/dV reach their home rank.
#pragma once

#include "core/handle.h"
#include "core/plan.h"
#include "core/problem.h"
#include "core/slice_table.h"
#include "cp/ring_schedule.h"
#include "cp/transport.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

namespace ffpa::cp {

// A rank's second stream (the exchanges) and the events ordering it with the caller's stream.
class RingStreams {
 public:
  explicit RingStreams(int32_t deviceOrdinal);  // throws ffpa::Error (EXECUTION_FAILED_CUDA)
  ~RingStreams();
  RingStreams(const RingStreams&) = delete;
  RingStreams& operator=(const RingStreams&) = delete;

  cudaStream_t comm = nullptr;
  cudaEvent_t fork = nullptr;    // caller's stream -> comm: the call's start
  cudaEvent_t ready = nullptr;   // caller's stream -> comm: a buffer may be sent or overwritten
  cudaEvent_t landed = nullptr;  // comm -> caller's stream: an exchange is complete
  cudaEvent_t join = nullptr;    // comm -> caller's stream: the call's end

 private:
  void release();
};

// One attention call of a step: its block, problem and plan. A call of a sliced ring carries
// its step's slices (problem.slices, owned by the ring plan).
struct BlockCall {
  Block block;
  AttentionProblem problem;
  std::shared_ptr<const Plan> plan;
};

// The slices of every step of one ring shape, cut from a slice list (cp/ring_slices.h) and kept
// with it (SliceTable::derived): one sliced call per step, or none where the step sees nothing.
struct RingCut {
  struct StepCut {
    Block block;                                          // the call's rows and keys
    std::unique_ptr<const slices::SliceTable> table;      // null: the step sees nothing
  };
  std::vector<StepCut> steps;
};

struct RingPlan {
  Direction direction = Direction::Forward;
  AttentionProblem local;  // the rank's problem, as its descriptors give it
  RingShape shape;
  std::vector<Step> steps;
  std::vector<std::vector<BlockCall>> calls;  // per step, per block
  // The slices masking the whole sequence (null: the causal mode does), and the steps' cut of
  // them, which the calls point to.
  std::shared_ptr<const slices::SliceTable> slices;
  std::shared_ptr<const RingCut> cut;
  // Workspace offsets. Forward: kv[2], partialO, partialLse, runO, runLse. Backward: kv[2], dq
  // (scratch, the tensors' type), dkv (scratch), dqSum, kvPartial, kvSum[2] (fp32).
  size_t kv[2] = {}, partialO = 0, partialLse = 0, runO = 0, runLse = 0;
  size_t dq = 0, dkv = 0, dqSum = 0, kvPartial = 0, kvSum[2] = {};
  size_t kernel = 0;  // the blocks' own workspace (the largest any needs)
  size_t workspaceBytes = 0;

  // Strides of the dense tensors the ring keeps in the workspace (stridesOf() of packed layouts):
  // a K/V buffer's K and V parts [B, Hkv, Nkv, D], the partial O [B, Hq, Nq, Dv], its LSE
  // [B, Hq, Nq], and dQ [B, Hq, Nq, Dqk].
  struct DenseStrides {
    Strides k{}, v{}, o{}, lse{}, dq{};
  } dense;

  // Elements of one K/V block ([B, Hkv, Nkv, Dqk] then [B, Hkv, Nkv, Dv]).
  int64_t kvElements() const;
  // Whether the rank's own step may leave query rows unseen (slices), so that the forward's
  // running result starts empty (O = 0, LSE = -infinity) rather than with step 0's result.
  bool startsEmpty() const { return slices != nullptr; }
};

// The ring plan of a rank whose local problem is `local` (checked as for a plain call; its mask
// is the global one: `slices`, the table local.slices points to, or the causal mode). Plans every
// block through `context` (so also sizes and describes on a described device). The steps'
// slices are cut, checked and copied to the device the global slices are on (synchronous, as
// ffpaSetAttentionSlices) by the first plan of a ring shape over a slice list, forward or
// backward; later plans reuse that cut. Throws ffpa::Error.
RingPlan planRing(Context& context, const Policy& policy, bool mayTune, const AttentionProblem& local,
                  std::shared_ptr<const slices::SliceTable> slices, int32_t ranks, int32_t rank,
                  Sharding sharding);

// "context parallel: rank 1 of 4, zigzag sharding, 4 ring steps" and one line per block.
std::string describeRing(const RingPlan& plan);

// What one rank's call runs with.
struct RingCall {
  const Context& context;
  CallSnapshot snapshot;  // the policy, and the stream the call is ordered on
  Transport& transport;
  RingStreams& streams;
  void* workspace;  // plan.workspaceBytes
};

// The work of one rank, phase by phase.
class RingProgram {
 public:
  virtual ~RingProgram() = default;
  virtual int phases() const = 0;
  virtual void phase(int index) = 0;
};

std::unique_ptr<RingProgram> ringForward(const RingPlan& plan, const RingCall& call, const TensorArgs& tensors);
std::unique_ptr<RingProgram> ringBackward(const RingPlan& plan, const RingCall& call, const TensorArgs& tensors);

// Runs the programs of the `count` ranks of one process, phase by phase, calling `between()`
// after each phase (where simulated ranks exchange).
template <class Between>
void runRing(RingProgram* const* programs, size_t count, Between between) {
  const int phases = count == 0 ? 0 : programs[0]->phases();
  for (int i = 0; i < phases; ++i) {
    for (size_t r = 0; r < count; ++r) programs[r]->phase(i);
    between();
  }
}

// One rank's whole call (forward or backward, as the plan says), its phases back to back: what a
// real rank runs. Allocates nothing (the program lives on the stack).
void runRank(const RingPlan& plan, const RingCall& call, const TensorArgs& tensors);

}  // namespace ffpa::cp
