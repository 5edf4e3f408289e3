// What every attention kernel's parameters begin with: the problem's sizes, its causal mask and
// softmax scale (filled from the checked problem by copyProblemSizes, src/core/problem.h), and
// the grid layout the planner chose. Plain C++, for the host and the kernels alike.
#pragma once

#include <cstdint>

namespace ffpa {

struct ProblemSizes {
  int32_t batch;
  int32_t headsQ;
  int32_t groupSize;  // query heads per KV head
  int32_t seqQ;
  int32_t seqKv;
  int32_t headDimQk;  // a multiple of 16 for the FFPA kernels, within the instance's range
  int32_t headDimV;
  int32_t causal;     // query i sees key j iff j <= i + causalOffset
  int64_t causalOffset;
  float scaleLog2;    // softmax scale * log2(e): scores are kept in the log2 domain
  int32_t gridDnhb;   // grid (tiles, H, B) instead of (tiles, B*H); the planner's choice
  // FFPA_ATTENTION_KEY_LENGTHS: B key counts on the device (batch entry b sees keys [0, L_b),
  // L_b clamped to [0, seqKv]), or null. Every kernel reads it but the mma.sync forward's 64-key
  // instance of d_v up to 128, which the planner gives no such problem.
  const int32_t* keyLengths;
  int32_t causalAtKeyEnd;  // a bottom-right mask: with key lengths, its diagonal ends at L_b - 1
};

}  // namespace ffpa
