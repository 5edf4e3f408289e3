// The sm90 forward instances for d_v up to 256: the row split, and one CTA per row tile for
// d_v 65..256 (compiled for sm_90a only, beside forward_instances.cu: see kernels/meson.build).
#include "sm90/forward_one_cta.cuh"
#include "sm90/forward_row_split_kernel.cuh"

namespace ffpa::sm90 {
namespace {

// The row split (no attention slices): d_v up to kHeadDimV, in whole 64-column blocks, KV tiles of
// kTileKeys keys.
template <int kHeadDimV, int kTileKeys = kKeys>
void appendRowSplit(ForwardInstanceList& out) {
  using ffpa::kernels::Bf16Tag;
  using ffpa::kernels::HalfTag;
  using ffpa::kernels::sm90::rowSplitForwardKernel;
  appendBoth(out, kHeadDimV, &rowSplitForwardKernel<HalfTag, kHeadDimV, kTileKeys>,
             &rowSplitForwardKernel<Bf16Tag, kHeadDimV, kTileKeys>, 1, kEvenSplit, true, kTileKeys);
}

}  // namespace

void appendSmallForwardInstances(ForwardInstanceList& out) {
  appendRowSplit<64>(out);
  appendRowSplit<128>(out);
  appendRowSplit<64, kRowSplitWideKeys>(out);
  appendRowSplit<128, kRowSplitWideKeys>(out);
  appendRowSplit<192>(out);
  appendRowSplit<256>(out);
  // The split of the columns serves d_v 65..256 with attention slices, and where a tuned config
  // or runtime autotune chooses it.
  appendOneCta<128>(out);
  appendOneCta<192>(out);
  appendOneCta<256>(out);
}

}  // namespace ffpa::sm90
