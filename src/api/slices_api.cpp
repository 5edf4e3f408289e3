// Attention slices: the list objects and their attachment to attention descriptors.
#include "api/boundary.h"

#include "core/descriptors.h"
#include "core/handle.h"
#include "core/slice_table.h"

#include <memory>

namespace {

ffpaSlicesStruct& liveSlices(ffpaAttentionSlices_t slices, const char* argument) {
  ffpa::requireNotNull(slices, argument);
  ffpa::require(slices->magic == ffpaSlicesStruct::kMagic, FFPA_STATUS_BAD_PARAM_INVALID_HANDLE,
                argument, " is not a live slice list (destroyed, or not from ffpaCreateAttentionSlices)");
  return *slices;
}

const std::shared_ptr<const ffpa::slices::SliceTable>& setTable(ffpaAttentionSlices_t slices,
                                                                const char* argument) {
  ffpaSlicesStruct& list = liveSlices(slices, argument);
  ffpa::require(list.table != nullptr, FFPA_STATUS_BAD_PARAM_NOT_FINALIZED, argument,
                " was never set (call ffpaSetAttentionSlices or ffpaSetAttentionSlicesFromOffsets first)");
  return list.table;
}

// Builds (checks), uploads when the list's handle executes, and only then replaces the table:
// a failure leaves the previous slices in place.
void install(ffpaSlicesStruct& list, std::vector<ffpa::slices::SliceRange> ranges) {
  auto table = std::make_shared<ffpa::slices::SliceTable>(std::move(ranges));
  if (list.onDevice) table->upload(list.deviceOrdinal);
  list.table = std::move(table);
}

}  // namespace

extern "C" {

FFPA_API ffpaStatus_t ffpaCreateAttentionSlices(ffpaHandle_t handle, ffpaAttentionSlices_t* slices) {
  return ffpa::guarded("ffpaCreateAttentionSlices", [&] {
    ffpa::requireNotNull(slices, "slices");
    *slices = nullptr;
    const ffpa::Context& context = ffpa::contextOf(handle);
    auto list = std::make_unique<ffpaSlicesStruct>();
    list->deviceOrdinal = context.device().ordinal;
    list->onDevice = context.runtime() != nullptr;
    *slices = list.release();
  });
}

FFPA_API ffpaStatus_t ffpaDestroyAttentionSlices(ffpaAttentionSlices_t slices) {
  return ffpa::guarded("ffpaDestroyAttentionSlices", [&] {
    if (slices == nullptr) return;
    liveSlices(slices, "slices").magic = 0;
    delete slices;
  });
}

FFPA_API ffpaStatus_t ffpaSetAttentionSlices(ffpaAttentionSlices_t slices, int32_t count,
                                             const int32_t* queryRanges, const int32_t* keyRanges,
                                             const int32_t* masks) {
  return ffpa::guarded("ffpaSetAttentionSlices", [&] {
    ffpaSlicesStruct& list = liveSlices(slices, "slices");
    install(list, ffpa::slices::slicesFromRanges(count, queryRanges, keyRanges, masks));
  });
}

FFPA_API ffpaStatus_t ffpaSetAttentionSlicesFromOffsets(ffpaAttentionSlices_t slices,
                                                        int32_t sequences,
                                                        const int32_t* queryOffsets,
                                                        const int32_t* keyOffsets,
                                                        ffpaSliceMask_t mask) {
  return ffpa::guarded("ffpaSetAttentionSlicesFromOffsets", [&] {
    ffpaSlicesStruct& list = liveSlices(slices, "slices");
    install(list, ffpa::slices::slicesFromOffsets(sequences, queryOffsets, keyOffsets, mask));
  });
}

FFPA_API ffpaStatus_t ffpaGetAttentionSlicesInfo(ffpaAttentionSlices_t slices, int32_t* count,
                                                 int64_t* queryExtent, int64_t* keyExtent,
                                                 int64_t* visiblePairs) {
  return ffpa::guarded("ffpaGetAttentionSlicesInfo", [&] {
    const ffpa::slices::SliceTable& table = *setTable(slices, "slices");
    if (count != nullptr) *count = static_cast<int32_t>(table.slices().size());
    if (queryExtent != nullptr) *queryExtent = table.queryExtent();
    if (keyExtent != nullptr) *keyExtent = table.keyExtent();
    if (visiblePairs != nullptr) *visiblePairs = table.visiblePairs();
  });
}

FFPA_API ffpaStatus_t ffpaSetAttentionDescriptorSlices(ffpaAttentionDescriptor_t desc,
                                                       ffpaAttentionSlices_t slices) {
  return ffpa::guarded("ffpaSetAttentionDescriptorSlices", [&] {
    ffpa::attentionSettings(desc, "desc");  // throws unless live
    desc->settings.slices = slices == nullptr ? nullptr : setTable(slices, "slices");
  });
}

}  // extern "C"
