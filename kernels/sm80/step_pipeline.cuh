// The cp.async step stream of one CTA (see step_rings.h): steps are issued ahead into ring slots
// and acquired in order; every decision is uniform across the CTA, so every thread keeps the same
// state. Step g is step g % stepsPerTile of tile g / stepsPerTile; a tile's score steps come first.
//
//   auto pipe = makeStepPipeline(rings, shared, scoreSteps, outputSteps, tiles,
//                                [&](int tile, int inTile, uint32_t slot) { ...copyStepPanels()s... });
//   pipe.start();
//   for each step, in order:  const uint32_t slot = pipe.acquire();  ...ldmatrix from slot...
//
// The issuer only issues cp.async copies; the pipeline commits one group per step.
//
// Both ends of the stream (the next step to issue, the step being acquired) are cursors that move
// one step at a time: a step's tile, its place in the tile and its ring slot are counted, never
// divided out of a step number (an integer division by a run-time value costs about 20
// instructions, and a handful per step cost more than the step's MMAs).
#pragma once

#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm80/panels.cuh"
#include "sm80/step_rings.h"

#include <cstdint>
#include <type_traits>

namespace ffpa::kernels::sm80 {

// Where a step sits in the stream: its tile, and in one word its index in the tile (bits 0-7)
// and the ring slots (bits 8-15: the score steps before it modulo the stages, or every step
// before it with one shared ring; bits 16-23: the output steps before it modulo the stages).
// Small counters share a register: the kernels that use the pipeline keep up to 255 registers
// live, and every register the pipeline holds across their loops is one fewer for the
// accumulators.
struct StepCursor {
  int tile = 0;
  uint32_t place = 0;
};

// The most steps a tile may have (a step's place in its tile is 8 bits). With 16-column panels
// and at least one panel per step, a head dim of 1024 gives at most 64 steps per operand.
constexpr int kMaxStepsPerTile = 255;

template <class Issuer>
struct StepPipeline {
  ffpa::sm80::StepRings rings;
  uint32_t shared;  // shared address of dynamic shared memory
  int scoreSteps;
  int stepsPerTile;  // < 256
  int tiles;
  Issuer issuer;
  StepCursor next;     // the next step to issue
  StepCursor current;  // the step being consumed (step 0 before the first acquire)
  // Bits 8-15: score-ring slots that steps from `current` on hold (with one shared ring, every
  // slot); bits 16-23: output-ring slots they hold; bits 24-30: steps issued from `current` on
  // (one commit group each); bit 31: a step has been acquired.
  uint32_t held = 0;

  // Bit positions of the fields (the ring fields of StepCursor::place and of held match).
  static constexpr int kScore = 8, kOutput = 16, kAhead = 24;
  static constexpr uint32_t kAcquired = 1u << 31;

  static FFPA_DEVICE int inTile(const StepCursor& c) { return int(c.place & 0xffu); }
  FFPA_DEVICE bool isScoreStep(const StepCursor& c) const { return inTile(c) < scoreSteps; }
  // Score steps and output steps of a tile alternate in phases.
  FFPA_DEVICE int phase(const StepCursor& c) const { return 2 * c.tile + (isScoreStep(c) ? 0 : 1); }
  // kScore or kOutput: the ring of the step at `c`, as the position of its fields.
  FFPA_DEVICE int ringOf(const StepCursor& c) const {
    return rings.shared || isScoreStep(c) ? kScore : kOutput;
  }

  // Moves `c` one step on; returns the ring of the step it left, as a unit of its fields.
  FFPA_DEVICE uint32_t advance(StepCursor& c) const {
    const int ring = ringOf(c);
    const uint32_t slot = (c.place >> ring) & 0xffu;
    c.place += slot + 1 == uint32_t(rings.stages) ? 0u - (slot << ring) : 1u << ring;
    if (inTile(c) + 1 == stepsPerTile) {
      c.place &= ~0xffu;
      ++c.tile;
    } else {
      ++c.place;
    }
    return 1u << ring;
  }

  FFPA_DEVICE uint32_t slot(const StepCursor& c) const {
    const int ring = ringOf(c);
    const uint32_t index = (c.place >> ring) & 0xffu;
    if (ring == kScore) return shared + rings.scoreRingOffset + index * rings.scoreSlotBytes;
    return shared + rings.outputRingOffset + index * rings.outputSlotBytes;
  }

  // Commit groups of the steps issued from `current` on: cp.async.wait_group(inFlight() - 1)
  // completes step `current`.
  FFPA_DEVICE int inFlight() const { return int((held >> kAhead) & 0x7fu); }

  FFPA_DEVICE void issue() {
    issuer(next.tile, inTile(next), slot(next));
    copyAsyncCommit();
    held += (1u << kAhead) + advance(next);
  }

  // Whether the next step may be issued while `current` is being consumed: it exists, it is in
  // the same phase unless prefetching, and its ring has a slot that no step from `current` on
  // holds.
  FFPA_DEVICE bool mayIssue() const {
    if (next.tile >= tiles) return false;
    if (!rings.prefetch && phase(next) != phase(current)) return false;
    return int((held >> ringOf(next)) & 0xffu) < rings.stages;
  }

  // Issues the first steps. Copies committed before (persisted tiles) stay the oldest groups.
  FFPA_DEVICE void start() {
    while (mayIssue()) issue();
  }

  // Makes the next step (the first on the first call) visible to the whole CTA and refills the
  // slots of earlier steps. Returns the shared address of the step's slot.
  FFPA_DEVICE uint32_t acquire() {
    // The step acquired last is done with: every thread passes this step's barrier below before
    // any refills its slot.
    if (held & kAcquired) held -= (1u << kAhead) + advance(current);
    held |= kAcquired;
    if (inFlight() == 0) {
      blockBarrier();  // nothing in flight for this step: its slot may still be read
      issue();
    }
    copyAsyncWaitPending(inFlight() - 1);
    blockBarrier();
    while (mayIssue()) issue();
    return slot(current);
  }
};

// The steps of one phase whose panels a warp consumes in an unrolled loop: panels [0, panels) of
// at most kPanels, panelsPerStep to a step, panel p of a step at the step's slot plus
// (p - the step's first panel) * panelStride. Calls body(address, p) for each, with p a constant
// once the loop is unrolled, so that register arrays indexed by it stay in registers. Every step
// is acquired at this one place in the code: each acquire inlines the issue of later steps, and
// a copy of it per panel made kernels too large for the instruction cache. The address runs on
// by one stride per panel (modulo 2^32, from where panel 0 would lie), so that no panel keeps an
// address of its own across the loop.
template <int kPanels, class Pipe, class Body>
FFPA_DEVICE void forEachStepPanel(Pipe& pipe, int panels, int panelsPerStep, uint32_t panelStride, Body&& body) {
  for (int firstPanel = 0; firstPanel < panels; firstPanel += panelsPerStep) {
    uint32_t address = pipe.acquire() - uint32_t(firstPanel) * panelStride;
#pragma unroll
    for (int panel = 0; panel < kPanels; ++panel) {
      if (panel >= firstPanel && panel < firstPanel + panelsPerStep && panel < panels) body(address, panel);
      address += panelStride;
    }
  }
}

// As forEachStepPanel, but hands the body two neighbouring panels at once where both lie in the
// step: body(address, p, std::true_type{}) for panels p and p + 1 (p even), so that it can
// interleave their independent MMAs, and body(address, p, std::false_type{}) for a panel whose
// neighbour lies in another step or past the last.
template <int kPanels, class Pipe, class Body>
FFPA_DEVICE void forEachStepPanelPair(Pipe& pipe, int panels, int panelsPerStep, uint32_t panelStride, Body&& body) {
  for (int firstPanel = 0; firstPanel < panels; firstPanel += panelsPerStep) {
    uint32_t address = pipe.acquire() - uint32_t(firstPanel) * panelStride;
    const int end = firstPanel + panelsPerStep < panels ? firstPanel + panelsPerStep : panels;
#pragma unroll
    for (int panel = 0; panel < kPanels; panel += 2) {
      const bool first = panel >= firstPanel && panel < end;
      const bool second = panel + 1 < kPanels && panel + 1 >= firstPanel && panel + 1 < end;
      if (first && second) {
        body(address, panel, std::true_type{});
      } else if (first) {
        body(address, panel, std::false_type{});
      } else if (second) {
        body(address + panelStride, panel + 1, std::false_type{});
      }
      address += 2 * panelStride;
    }
  }
}

template <class Issuer>
FFPA_DEVICE StepPipeline<Issuer> makeStepPipeline(const ffpa::sm80::StepRings& rings, uint32_t shared,
                                                  int scoreSteps, int outputSteps, int tiles,
                                                  Issuer issuer) {
  return StepPipeline<Issuer>{rings, shared, scoreSteps, scoreSteps + outputSteps, tiles, issuer, {}, {}, 0u};
}

}  // namespace ffpa::kernels::sm80
