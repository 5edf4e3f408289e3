// Shapes and helpers the emulator's kernel tests share.
#pragma once

#include "attention_case.h"
#include "common/cpu_attention.h"
#include "common/host_tensor.h"

#include <cstdint>
#include <vector>

namespace emulation_test {

// attention_shape() with the library's default scale, 1/sqrt(Dqk).
ffpa_tools::AttentionProblem problem(int64_t batch, int64_t headsQ, int64_t headsKv, int64_t seqQ,
                                     int64_t seqKv, int64_t dimQk, int64_t dimV,
                                     ffpa_tools::CausalMask mask);

// The numbers of a comma-separated list, e.g. FFPA_BUILD_STAGES.
std::vector<int> listOf(const char* commaSeparated);

// The largest head dim this build compiles: larger problems go to the reference path.
int largestCompiledHeadDim();

// The attention-slice cases the forward and backward kernel tests share, each on an instance of
// another tile shape where the build compiles it (d 128, 320, 512, 576/512, 1024): a packed
// causal batch with a one-token sequence; two documents sharing a prefix (slices overlapping in
// queries, disjoint in keys); a sliding window; rows and keys no slice covers (before, between
// and after the slices), an inverse-causal slice, more keys than queries, d_qk != d_v; full,
// inverse- and bi-causal slices tiling a square. Batch sizes, layouts, dtypes and schedules vary.
std::vector<AttentionCase> sliceCases();

// The per-batch key-lengths cases (FFPA_ATTENTION_KEY_LENGTHS) the backward kernel tests share:
// entries of no key, one, a partial last tile, a whole number of tiles and all keys; counts past
// Nkv and below 0 (clamped); bottom-right diagonals at each entry's last key (rows of a short
// entry that see no key) and top-left ones; GQA; d from 64 to 1024 and 576 / 512 (the sm90
// kernels' one CTA and clusters of two and four); layouts, dtypes and schedules varying.
std::vector<AttentionCase> backwardKeyLengthCases();

// Slice lists for the tests of the sm90 kernels (tiles of 64 rows and keys). Over 300 tokens:
// three causal documents of 150, 37 and 113 tokens, the last two also seeing a shared prefix of
// 20 keys (segments over several tiles, tiles across 64-index boundaries, walks of two slices).
std::vector<ffpa_tools::Slice> documentsWithPrefix();
// Over 210 rows and 200 keys: an inverse-causal band, a causal block, a bi-causal diagonal; keys
// 180..199 no row sees, rows 190..209 that see no key.
std::vector<ffpa_tools::Slice> bandsAndDiagonal();
// Over 200 rows and 120 keys, slices with more rows than keys: an inverse-causal slice whose key
// hull runs past its keys and the tensor (rows 50.. see nothing through it: walks of tiles that
// are wholly masked, boxes wholly past the tensor), a bi-causal one that shows no pair at all, a
// full block; keys 50..59 between the slices and 100..119 after them, rows 90..99 that see no key.
std::vector<ffpa_tools::Slice> tallSlices();

inline constexpr ffpa_tools::CausalMask kMasks[] = {ffpa_tools::CausalMask::none,
                                                    ffpa_tools::CausalMask::top_left,
                                                    ffpa_tools::CausalMask::bottom_right};
inline constexpr ffpa_tools::LayoutKind kLayouts[] = {ffpa_tools::LayoutKind::bhnd,
                                                      ffpa_tools::LayoutKind::bnhd,
                                                      ffpa_tools::LayoutKind::padded_aligned};

}  // namespace emulation_test
