// The cp.async step stream of one CTA (see step_rings.h): steps are issued ahead into ring slots
// and acquired in order; every decision is uniform across the CTA, so every thread keeps the same
// state. Step g is step g % stepsPerTile of tile g / stepsPerTile; a tile's score steps come first.
//
//   auto pipe = makeStepPipeline(rings, shared, scoreSteps, outputSteps, tiles,
//                                [&](int tile, int inTile, uint32_t slot) { ...copyTile()s... });
//   pipe.start();
//   for each step:  const uint32_t slot = pipe.acquire(step);  ...ldmatrix from slot...
//
// The issuer only issues cp.async copies; the pipeline commits one group per step.
#pragma once

#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm80/panels.cuh"
#include "sm80/step_rings.h"

#include <cstdint>

namespace ffpa::kernels::sm80 {

template <class Issuer>
struct StepPipeline {
  ffpa::sm80::StepRings rings;
  uint32_t shared;  // shared address of dynamic shared memory
  int scoreSteps;
  int outputSteps;
  int stepsPerTile;
  int totalSteps;
  Issuer issuer;
  int issued = 0;  // steps issued so far (one commit group each)

  FFPA_DEVICE bool isScoreStep(int step) const { return step % stepsPerTile < scoreSteps; }
  FFPA_DEVICE int phase(int step) const { return 2 * (step / stepsPerTile) + (isScoreStep(step) ? 0 : 1); }

  // Index of a step among the steps of its ring.
  FFPA_DEVICE int ringIndex(int step) const {
    const int tile = step / stepsPerTile, inTile = step % stepsPerTile;
    return inTile < scoreSteps ? tile * scoreSteps + inTile : tile * outputSteps + inTile - scoreSteps;
  }
  // Steps of `step`'s ring that come before step `consumer` (already consumed).
  FFPA_DEVICE int ringConsumedBefore(int step, int consumer) const {
    const int tile = consumer / stepsPerTile, inTile = consumer % stepsPerTile;
    if (isScoreStep(step)) return tile * scoreSteps + (inTile < scoreSteps ? inTile : scoreSteps);
    return tile * outputSteps + (inTile < scoreSteps ? 0 : inTile - scoreSteps);
  }
  FFPA_DEVICE uint32_t slot(int step) const {
    if (rings.shared) return shared + rings.scoreRingOffset + (step % rings.stages) * rings.scoreSlotBytes;
    const uint32_t index = ringIndex(step) % rings.stages;
    return isScoreStep(step) ? shared + rings.scoreRingOffset + index * rings.scoreSlotBytes
                             : shared + rings.outputRingOffset + index * rings.outputSlotBytes;
  }

  FFPA_DEVICE void issue(int step) {
    issuer(step / stepsPerTile, step % stepsPerTile, slot(step));
    copyAsyncCommit();
    ++issued;
  }

  FFPA_DEVICE bool mayIssue(int step, int consumer) const {
    if (step >= totalSteps) return false;
    if (!rings.prefetch && phase(step) != phase(consumer)) return false;
    if (rings.shared) return step - consumer < rings.stages;
    return ringIndex(step) - ringConsumedBefore(step, consumer) < rings.stages;
  }

  // Issues the first steps. Copies committed before (persisted tiles) stay the oldest groups.
  FFPA_DEVICE void start() {
    while (mayIssue(issued, 0)) issue(issued);
  }

  // Makes step `step`'s panels visible to the whole CTA and refills the slots of earlier steps.
  // Returns the shared address of the step's slot.
  FFPA_DEVICE uint32_t acquire(int step) {
    if (issued <= step) {
      blockBarrier();  // nothing in flight for this step: its slot may still be read
      issue(step);
    }
    copyAsyncWaitPending(issued - step - 1);
    blockBarrier();
    while (mayIssue(issued, step)) issue(issued);
    return slot(step);
  }
};

template <class Issuer>
FFPA_DEVICE StepPipeline<Issuer> makeStepPipeline(const ffpa::sm80::StepRings& rings, uint32_t shared,
                                                  int scoreSteps, int outputSteps, int tiles,
                                                  Issuer issuer) {
  const int stepsPerTile = scoreSteps + outputSteps;
  return StepPipeline<Issuer>{rings,        shared, scoreSteps, outputSteps,
                              stepsPerTile, tiles * stepsPerTile, issuer};
}

}  // namespace ffpa::kernels::sm80
