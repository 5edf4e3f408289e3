#include "cp/context_parallel.h"

#include "core/error.h"

namespace ffpa::cp {

ContextParallel::ContextParallel(int32_t deviceOrdinal, int32_t ranks, int32_t rank, Sharding sharding,
                                 std::unique_ptr<Transport> transport)
    : deviceOrdinal_(deviceOrdinal), ranks_(ranks), rank_(rank), sharding_(sharding),
      transport_(std::move(transport)) {
  if (transport_ != nullptr) streams_ = std::make_unique<RingStreams>(deviceOrdinal);
}

std::shared_ptr<const RingPlan> ContextParallel::plan(Context& context, const Policy& policy, bool mayTune,
                                                      const AttentionProblem& local,
                                                      std::shared_ptr<const slices::SliceTable> slices) {
  const RingKey key{PlanKey::make(local, policy, context.device()), slices.get()};
  {
    std::lock_guard<std::mutex> lock(plansMutex_);
    auto found = plans_.find(key);
    if (found != plans_.end()) {
      found->second.lastUse = ++uses_;
      return found->second.plan;
    }
  }
  auto fresh = std::make_shared<const RingPlan>(
      planRing(context, policy, mayTune, local, std::move(slices), ranks_, rank_, sharding_));
  std::shared_ptr<const RingPlan> evicted;  // released after the lock: it may hold the last list
  std::lock_guard<std::mutex> lock(plansMutex_);
  auto [entry, made] = plans_.emplace(key, Kept{std::move(fresh), ++uses_});
  if (made && key.slices != nullptr) {
    size_t sliced = 0;
    auto oldest = plans_.end();
    for (auto at = plans_.begin(); at != plans_.end(); ++at) {
      if (at->first.slices == nullptr) continue;
      ++sliced;
      if (oldest == plans_.end() || at->second.lastUse < oldest->second.lastUse) oldest = at;
    }
    if (sliced > kSlicedPlansKept) {
      evicted = std::move(oldest->second.plan);
      plans_.erase(oldest);
    }
  }
  return entry->second.plan;
}

void ContextParallel::execute(const Context& context, const CallSnapshot& snapshot, const RingPlan& plan,
                              const TensorArgs& tensors, void* workspace) {
  context.executableRuntime();  // a described device fails first, as plain calls do
  require(transport_ != nullptr, FFPA_STATUS_NOT_SUPPORTED,
          "attn's context-parallel object was made by ffpaCreateContextParallelForDescription: it "
          "sizes and describes calls but has no communicator to run them");
  require(context.device().ordinal == deviceOrdinal_, FFPA_STATUS_BAD_PARAM, "the handle is on device ",
          context.device().ordinal, " but attn's context-parallel object on device ", deviceOrdinal_);
  std::lock_guard<std::mutex> lock(executeMutex_);
  runRank(plan, {context, snapshot, *transport_, *streams_, workspace}, tensors);
}

}  // namespace ffpa::cp
