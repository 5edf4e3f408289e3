#include "cp/context_parallel.h"

#include "core/error.h"

#include <algorithm>

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
  // The most recently used sliced key goes last.
  const auto touch = [this](const RingKey& used) {
    const auto at = std::find(slicedKeys_.begin(), slicedKeys_.end(), used);
    if (at != slicedKeys_.end()) slicedKeys_.erase(at);
    slicedKeys_.push_back(used);
  };
  {
    std::lock_guard<std::mutex> lock(plansMutex_);
    auto found = plans_.find(key);
    if (found != plans_.end()) {
      if (key.slices != nullptr) touch(key);
      return found->second;
    }
  }
  auto fresh = std::make_shared<const RingPlan>(
      planRing(context, policy, mayTune, local, std::move(slices), ranks_, rank_, sharding_));
  std::shared_ptr<const RingPlan> evicted;  // released after the lock: it may hold the last list
  std::lock_guard<std::mutex> lock(plansMutex_);
  auto entry = plans_.emplace(key, std::move(fresh)).first;
  if (key.slices != nullptr) {
    touch(key);
    if (slicedKeys_.size() > kSlicedPlansKept) {
      auto oldest = plans_.find(slicedKeys_.front());
      evicted = std::move(oldest->second);
      plans_.erase(oldest);
      slicedKeys_.pop_front();
    }
  }
  return entry->second;
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
