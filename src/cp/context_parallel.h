// The state behind ffpaContextParallel_t: a rank's place in the ring, its transport and streams
// (absent for an object made for descriptions), and its ring plans, made once per problem.
#pragma once

#include "core/handle.h"
#include "core/plan_key.h"
#include "cp/ring_attention.h"
#include "cp/ring_schedule.h"
#include "cp/transport.h"

#include <functional>
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

  // The ring plan of `local` on `context` under `policy` (masked by `slices` when local.slices
  // is set): planned on first use, then kept (a lookup allocates nothing). Sliced plans depend on
  // their list too: the kSlicedPlansKept most recently used are kept, each holding its list. (The
  // steps' cut slices live with the list itself, so an evicted plan is made again on the host
  // only, and graphs captured with the list keep what they read.)
  std::shared_ptr<const RingPlan> plan(Context& context, const Policy& policy, bool mayTune,
                                       const AttentionProblem& local,
                                       std::shared_ptr<const slices::SliceTable> slices);
  static constexpr size_t kSlicedPlansKept = 16;

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
  // A ring plan's key: the plan key of its local problem and the identity of its slice list
  // (which the plan keeps alive, so that no other list takes its address while it is kept).
  struct RingKey {
    PlanKey problem;
    const slices::SliceTable* slices;
    bool operator==(const RingKey& o) const { return problem == o.problem && slices == o.slices; }
  };
  struct RingKeyHash {
    size_t operator()(const RingKey& k) const {
      return k.problem.hash() ^ (std::hash<const void*>{}(k.slices) * 0x9e3779b97f4a7c15ull);
    }
  };
  // A kept plan and when it was last used (stamped on every lookup: the sliced plan used least
  // recently goes first; the stamp costs a lookup no allocation).
  struct Kept {
    std::shared_ptr<const RingPlan> plan;
    uint64_t lastUse = 0;
  };
  std::mutex plansMutex_;
  std::unordered_map<RingKey, Kept, RingKeyHash> plans_;
  uint64_t uses_ = 0;
  std::mutex executeMutex_;
};

}  // namespace ffpa::cp

struct ffpaContextParallelStruct {
  static constexpr uint64_t kMagic = 0x46465041'43504152ull;  // "FFPACPAR"
  uint64_t magic = kMagic;
  std::shared_ptr<ffpa::cp::ContextParallel> state;
};
