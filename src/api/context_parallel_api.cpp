// Context-parallel objects and their attachment to attention descriptors (the calls themselves
// go through attention_api.cpp).
#include "api/boundary.h"

#include "core/descriptors.h"
#include "core/handle.h"
#include "cp/context_parallel.h"
#include "cp/ring_schedule.h"

#include "ffpa_build_config.h"

#if FFPA_HAVE_NCCL
#include "cp/nccl_transport.h"
#endif

#include <memory>

namespace {

constexpr int32_t kMaxRanks = 65536;

ffpaContextParallelStruct& liveObject(ffpaContextParallel_t cp, const char* argument) {
  ffpa::requireNotNull(cp, argument);
  ffpa::require(cp->magic == ffpaContextParallelStruct::kMagic, FFPA_STATUS_BAD_PARAM_INVALID_HANDLE,
                argument, " is not a live context-parallel object (destroyed, or not from ffpaCreateContextParallel)");
  return *cp;
}

ffpa::cp::Sharding checkedSharding(ffpaSharding_t sharding) {
  ffpa::require(sharding == FFPA_SHARDING_CONTIGUOUS || sharding == FFPA_SHARDING_ZIGZAG,
                FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "sharding is ", static_cast<int32_t>(sharding),
                "; allowed: FFPA_SHARDING_CONTIGUOUS (0), FFPA_SHARDING_ZIGZAG (1)");
  return static_cast<ffpa::cp::Sharding>(sharding);
}

ffpaContextParallel_t wrap(std::shared_ptr<ffpa::cp::ContextParallel> state) {
  auto object = std::make_unique<ffpaContextParallelStruct>();
  object->state = std::move(state);
  return object.release();
}

}  // namespace

extern "C" {

FFPA_API ffpaStatus_t ffpaCreateContextParallel(ffpaHandle_t handle, ffpaContextParallel_t* cp,
                                                struct ncclComm* comm, ffpaSharding_t sharding) {
  return ffpa::guarded("ffpaCreateContextParallel", [&] {
    ffpa::requireNotNull(cp, "cp");
    *cp = nullptr;
    const ffpa::Context& context = ffpa::contextOf(handle);
    const ffpa::cp::Sharding how = checkedSharding(sharding);
    ffpa::requireNotNull(comm, "comm");
    context.executableRuntime();  // throws for a described device
#if FFPA_HAVE_NCCL
    auto transport = ffpa::cp::ncclTransport(comm, context.device().ordinal);
    const int32_t ranks = transport->ranks();
    const int32_t rank = transport->rank();
    *cp = wrap(std::make_shared<ffpa::cp::ContextParallel>(context.device().ordinal, ranks, rank, how,
                                                           std::move(transport)));
#else
    (void)how;
    ffpa::fail(FFPA_STATUS_NOT_SUPPORTED,
               "this libffpa was built without NCCL (Meson option nccl; see ffpaGetBuildInfo()): "
               "context parallelism needs it");
#endif
  });
}

FFPA_API ffpaStatus_t ffpaCreateContextParallelForDescription(ffpaHandle_t handle, ffpaContextParallel_t* cp,
                                                              int32_t ranks, int32_t rank,
                                                              ffpaSharding_t sharding) {
  return ffpa::guarded("ffpaCreateContextParallelForDescription", [&] {
    ffpa::requireNotNull(cp, "cp");
    *cp = nullptr;
    const ffpa::Context& context = ffpa::contextOf(handle);
    const ffpa::cp::Sharding how = checkedSharding(sharding);
    ffpa::require(ranks >= 1 && ranks <= kMaxRanks, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "ranks is ", ranks,
                  "; allowed: 1 to ", kMaxRanks);
    ffpa::require(rank >= 0 && rank < ranks, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "rank is ", rank,
                  "; allowed: 0 to ranks - 1 (", ranks - 1, ")");
    *cp = wrap(std::make_shared<ffpa::cp::ContextParallel>(context.device().ordinal, ranks, rank, how, nullptr));
  });
}

FFPA_API ffpaStatus_t ffpaDestroyContextParallel(ffpaContextParallel_t cp) {
  return ffpa::guarded("ffpaDestroyContextParallel", [&] {
    if (cp == nullptr) return;
    liveObject(cp, "cp").magic = 0;
    delete cp;
  });
}

FFPA_API ffpaStatus_t ffpaGetContextParallelInfo(ffpaContextParallel_t cp, int32_t* ranks, int32_t* rank,
                                                 ffpaSharding_t* sharding) {
  return ffpa::guarded("ffpaGetContextParallelInfo", [&] {
    const ffpa::cp::ContextParallel& state = *liveObject(cp, "cp").state;
    if (ranks != nullptr) *ranks = state.ranks();
    if (rank != nullptr) *rank = state.rank();
    if (sharding != nullptr) *sharding = static_cast<ffpaSharding_t>(state.sharding());
  });
}

FFPA_API ffpaStatus_t ffpaGetContextParallelShard(ffpaContextParallel_t cp, int64_t localLength,
                                                  int64_t* ranges, int32_t* count) {
  return ffpa::guarded("ffpaGetContextParallelShard", [&] {
    const ffpa::cp::ContextParallel& state = *liveObject(cp, "cp").state;
    ffpa::requireNotNull(ranges, "ranges");
    ffpa::requireNotNull(count, "count");
    ffpa::require(localLength >= 1 && localLength <= (int64_t{1} << 62) / state.ranks(),
                  FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "localLength is ", localLength, "; allowed: 1 to 2^62 / ranks (",
                  (int64_t{1} << 62) / state.ranks(), ")");
    ffpa::require(state.sharding() != ffpa::cp::Sharding::Zigzag || localLength % 2 == 0,
                  FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "localLength is ", localLength,
                  "; zigzag sharding gives every rank two chunks of equal length: it must be even");
    const auto shard = ffpa::cp::shardRanges(state.sharding(), state.ranks(), state.rank(), localLength);
    for (size_t i = 0; i < shard.size(); ++i) {
      ranges[2 * i] = shard[i].begin;
      ranges[2 * i + 1] = shard[i].end;
    }
    *count = static_cast<int32_t>(shard.size());
  });
}

FFPA_API ffpaStatus_t ffpaSetAttentionDescriptorContextParallel(ffpaAttentionDescriptor_t desc,
                                                                ffpaContextParallel_t cp) {
  return ffpa::guarded("ffpaSetAttentionDescriptorContextParallel", [&] {
    ffpa::attentionSettings(desc, "desc");  // throws unless live
    desc->settings.contextParallel = cp == nullptr ? nullptr : liveObject(cp, "cp").state;
  });
}

}  // extern "C"
