// Split-KV: when a forward problem has too few row tiles to fill the GPU (decode, short queries
// of few heads), the KV tiles each row tile sees are cut into runs of tilesPerSplit tiles, and
// the CTAs of grid z = s compute their rows' attention over run s alone: an output normalised
// over those keys and its log-sum-exp, in fp32, into the plan's workspace. A merge of the `splits`
// partial results (the arithmetic of ffpaAttentionMerge) then writes the call's O and LSE.
// Plain C++, for the host and the kernels alike.
#pragma once

#include <cstdint>

namespace ffpa {

struct KeySplit {
  int32_t splits = 1;         // 1: no split, O and LSE are the call's
  int32_t tilesPerSplit = 0;  // KV tiles of run s: [s * tilesPerSplit, (s + 1) * tilesPerSplit)
  int64_t partialOStride = 0;    // floats from one split's partial O to the next's
  int64_t partialLseStride = 0;  // floats from one split's partial LSE to the next's
};

}  // namespace ffpa
