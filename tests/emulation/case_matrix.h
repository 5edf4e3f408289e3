// Shapes and helpers the emulator's kernel tests share.
#pragma once

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

inline constexpr ffpa_tools::CausalMask kMasks[] = {ffpa_tools::CausalMask::none,
                                                    ffpa_tools::CausalMask::top_left,
                                                    ffpa_tools::CausalMask::bottom_right};
inline constexpr ffpa_tools::LayoutKind kLayouts[] = {ffpa_tools::LayoutKind::bhnd,
                                                      ffpa_tools::LayoutKind::bnhd,
                                                      ffpa_tools::LayoutKind::padded_aligned};

}  // namespace emulation_test
