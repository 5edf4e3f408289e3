// The cp.async step pipeline's shared-memory rings, as the host lays them out and the kernels
// (step_pipeline.cuh) use them. Plain C++ (no CUDA), so that the planner, the kernels and the CPU
// warp emulator compute the same layout.
//
// A kernel loops over tiles (KV tiles of the forward, Q tiles of the dK/dV kernel, ...). Each
// tile is a run of steps: first the score steps (panels of the operands of S = A B^T, reduced over
// the head dim), then the output steps (panels of the B operand of the output GEMM, per column
// warp). Score steps rotate through one ring of `stages` slots, output steps through another,
// or both through one ring when `shared` is set.
#pragma once

#include <cstdint>

namespace ffpa::sm80 {

struct StepRings {
  int32_t stages;      // slots per ring, 1..4
  int32_t prefetch;    // issue steps of the next phase while the current one computes
  int32_t shared;      // one ring for both kinds of steps
  uint32_t scoreRingOffset;   // bytes from the start of dynamic shared memory
  uint32_t outputRingOffset;  // == scoreRingOffset when shared
  uint32_t scoreSlotBytes;
  uint32_t outputSlotBytes;
};

constexpr uint32_t alignUp(uint64_t bytes, uint64_t alignment) {
  return static_cast<uint32_t>((bytes + alignment - 1) / alignment * alignment);
}

// Lays out the rings from byte `offset` for slots of the given sizes; returns the end offset.
inline uint32_t layOutRings(StepRings& rings, int stages, bool prefetch, bool shared, uint64_t scoreStepBytes,
                            uint64_t outputStepBytes, uint32_t offset) {
  rings.stages = stages;
  rings.prefetch = prefetch;
  rings.shared = shared;
  uint32_t scoreSlot = alignUp(scoreStepBytes, 128);
  uint32_t outputSlot = alignUp(outputStepBytes, 128);
  if (shared) scoreSlot = outputSlot = scoreSlot > outputSlot ? scoreSlot : outputSlot;
  rings.scoreSlotBytes = scoreSlot;
  rings.outputSlotBytes = outputSlot;
  rings.scoreRingOffset = offset;
  offset += scoreSlot * stages;
  rings.outputRingOffset = shared ? rings.scoreRingOffset : offset;
  if (!shared) offset += outputSlot * stages;
  return offset;
}

}  // namespace ffpa::sm80
