// The state behind ffpaContextParallel_t: a rank's place in the ring, its transport and streams
// (absent for an object made for descriptions), and its ring plans, made once per problem.
#pragma once

#include "core/handle.h"
#include "core/plan_key.h"
#include "cp/ring_attention.h"
#include "cp/ring_schedule.h"
#include "cp/transport.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace ffpa::cp {

class ContextParallel {
 public:
  // `transport` null: sizes and descriptions only. Creates the streams when there is a transport.
  ContextParallel(int32_t deviceOrdinal, int32_t ranks, int32_t rank, Sharding sharding,
                  std::unique_ptr<Transport> transport);

  int32_t deviceOrdinal() const { return deviceOrdinal_; }
  int32_t ranks() const { return ranks_; }
  int32_t rank() const { return rank_; }
  Sharding sharding() const { return sharding_; }

  // The ring plan of `local` on `context` under `policy`: planned on first use, then kept (a
  // lookup allocates nothing).
  std::shared_ptr<const RingPlan> plan(Context& context, const Policy& policy, bool mayTune,
                                       const AttentionProblem& local);

  // Enqueues one call of this rank on `snapshot.stream` (forward or backward as the plan says).
  // One call at a time per object: the streams and events are the object's. Throws ffpa::Error:
  // NOT_SUPPORTED for an object without a communicator, BAD_PARAM for a handle on another device.
  void execute(const Context& context, const CallSnapshot& snapshot, const RingPlan& plan,
               const TensorArgs& tensors, void* workspace);

 private:
  int32_t deviceOrdinal_;
  int32_t ranks_;
  int32_t rank_;
  Sharding sharding_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<RingStreams> streams_;
  std::mutex plansMutex_;
  std::unordered_map<PlanKey, std::shared_ptr<const RingPlan>, PlanKeyHash> plans_;
  std::mutex executeMutex_;
};

}  // namespace ffpa::cp

struct ffpaContextParallelStruct {
  static constexpr uint64_t kMagic = 0x46465041'43504152ull;  // "FFPACPAR"
  uint64_t magic = kMagic;
  std::shared_ptr<ffpa::cp::ContextParallel> state;
};
