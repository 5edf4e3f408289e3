// One attention problem as the emulator's tests describe it, and what the library's planner needs
// to plan it: the problem with its strides, the policy with the case's knobs, a described device.
#pragma once

#include "common/cpu_attention.h"
#include "common/host_tensor.h"
#include "core/device.h"
#include "core/policy.h"
#include "core/problem.h"
#include "core/slice_table.h"
#include "tuning/tuned_config.h"

#include <ffpa/ffpa.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace emulation_test {

using Knobs = std::vector<std::pair<ffpaPolicyKnob_t, int64_t>>;

// The GPUs problems are planned for: shared memory per block as on an H100 (227 KiB) or an A100
// (163 KiB).
enum class PlannedDevice { hopper, ampere };

struct AttentionCase {
  ffpa_tools::AttentionProblem shape;  // its scale is set explicitly (rounded to float)
  ffpa_tools::DType dtype = ffpa_tools::DType::float16;
  ffpa_tools::LayoutKind layout = ffpa_tools::LayoutKind::bhnd;
  bool withLse = true;  // forward only: the backward always takes the LSE
  Knobs knobs;          // set with the setter's priority; the rest keep their defaults
  // Launch parameters as a tuned config or autotune would give them (empty: the defaults).
  ffpa::tuning::LaunchConfig launchConfig;
  PlannedDevice device = PlannedDevice::hopper;
  uint64_t start = 1;  // of the random inputs
  uint64_t scheduleSeed = 0;  // of every launch (emulation::Config::scheduleSeed; 0: fixed order)

  std::string toString() const;
};

// [B, H, N, D] tensors of a case, in its dtype and layout.
ffpa_tools::HostTensor queryTensor(const AttentionCase& c, int64_t dim);  // [B, Hq, Nq, dim]
ffpa_tools::HostTensor keyTensor(const AttentionCase& c, int64_t dim);    // [B, Hkv, Nkv, dim]
ffpa_tools::HostTensor lseTensor(const AttentionCase& c);                 // fp32 [B, Hq, Nq]

// The library's description of the case: sizes, mask, scale; the caller sets the strides.
ffpa::AttentionProblem libraryProblem(const AttentionCase& c, ffpa::Direction direction);
ffpa::Strides stridesOf(const ffpa_tools::HostTensor& tensor);
ffpa::Policy policyOf(const AttentionCase& c);
ffpa::DeviceInfo deviceOf(const AttentionCase& c);
ffpaAccumulator_t accumulatorOf(const AttentionCase& c);

// The library's table of the case's slices (c.shape.slices), or null when it has none.
std::unique_ptr<ffpa::slices::SliceTable> sliceTableOf(const AttentionCase& c);

// NaN in every element of K and V (key tensors of c.shape) past each batch entry's key count
// (FFPA_ATTENTION_KEY_LENGTHS, c.shape.key_lengths; nothing without counts): a kernel that lets a
// key past the count reach its results fails the checks.
void nanPastKeyCounts(const ffpa_tools::AttentionProblem& shape, ffpa_tools::HostTensor& k,
                      ffpa_tools::HostTensor& v);

// The tensor's bytes, and whether every byte is still the 0xFF poison.
std::vector<uint8_t> bytesOf(const ffpa_tools::HostTensor& tensor);
bool allPoison(const ffpa_tools::HostTensor& tensor);

}  // namespace emulation_test
