// The compiled instances of the sm90 forward kernel, as the planner sees them: one per element type
// and d_v block count (d_v in 65..256 rounds up to 128, 192 or 256 columns; 257..512 to 320, 384,
// 448 or 512; 513..1024 to 640, 768, 896 or 1024, served by clusters of two CTAs), a second one
// with the other split of the
// columns between the consumers where the two differ (384, 448 and 512 columns per CTA), and for
// d_v up to 512 a kernel whose CTAs of two adjacent row tiles share K and V, and for d_v up to 256
// the row split (64, 128, 192 and 256; 64 and 128 also with KV tiles of 128 keys); built only for
// sm_90a (kernels/sm90/forward_instances.cu).
#pragma once

#include "sm90/forward_params.h"

#include <ffpa/ffpa.h>

#include <vector>

namespace ffpa::sm90 {

struct ForwardInstance {
  int headDimV;  // the largest d_v it serves (a multiple of 64)
  ffpaDataType_t dtype;
  const void* kernel;  // the __global__ function, for cudaLaunchKernel and its attributes
  int kvSharing;       // CTAs of adjacent row tiles that share K and V (kvSharingForwardKernel: 2), else 1
  int split;           // kEvenSplit or kSkewedSplit (sm90/forward_params.h)
  bool rowSplit;       // rowSplitForwardKernel (128 rows per CTA, 64 per consumer), for d_v up to 256
  int tileKeys;        // keys per KV tile: kKeys, or the row split's kRowSplitWideKeys
};

using ForwardInstanceList = std::vector<ForwardInstance>;

// Empty when the build compiles no sm_90a code.
const ForwardInstanceList& forwardInstances();

// The instances of one CTA per row tile (d_v <= 256, forward_small_instances.cu; 257..512,
// forward_instances.cu) and of clusters of two (d_v > 512, forward_cluster_instances.cu): three
// translation units that build side by side.
void appendSmallForwardInstances(ForwardInstanceList& out);
void appendOneCtaForwardInstances(ForwardInstanceList& out);
void appendClusterForwardInstances(ForwardInstanceList& out);

// The fp16 and bf16 instances of one kernel, the __global__ functions taken as plain addresses.
template <class Kernel>
void appendBoth(ForwardInstanceList& out, int headDimV, Kernel half, Kernel bf16, int kvSharing, int split,
                bool rowSplit = false, int tileKeys = kKeys) {
  out.push_back(
      {headDimV, FFPA_DATA_TYPE_FLOAT16, reinterpret_cast<const void*>(half), kvSharing, split, rowSplit, tileKeys});
  out.push_back(
      {headDimV, FFPA_DATA_TYPE_BFLOAT16, reinterpret_cast<const void*>(bf16), kvSharing, split, rowSplit, tileKeys});
}

}  // namespace ffpa::sm90
