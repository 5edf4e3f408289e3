#include "attention_case.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace emulation_test {

using ffpa_tools::DType;
using ffpa_tools::HostTensor;

std::string AttentionCase::toString() const {
  std::ostringstream text;
  text << shape.to_string() << " " << ffpa_tools::dtype_name(dtype) << " "
       << ffpa_tools::layout_name(layout) << (withLse ? " lse" : " no-lse")
       << (device == PlannedDevice::hopper ? " sm90" : " sm80") << " start=" << start;
  if (scheduleSeed != 0) text << " schedule=" << scheduleSeed;
  for (const auto& [knob, value] : knobs) {
    text << " " << ffpa::knobSpec(knob).name << "=" << ffpa::knobValueName(knob, value);
  }
  for (const auto& [name, value] : launchConfig) text << " " << name << "=" << value;
  return text.str();
}

HostTensor queryTensor(const AttentionCase& c, int64_t dim) {
  const auto& s = c.shape;
  return HostTensor(c.dtype, ffpa_tools::attention_layout(c.layout, s.batch, s.heads_q, s.seq_q, dim));
}

HostTensor keyTensor(const AttentionCase& c, int64_t dim) {
  const auto& s = c.shape;
  return HostTensor(c.dtype, ffpa_tools::attention_layout(c.layout, s.batch, s.heads_kv, s.seq_kv, dim));
}

HostTensor lseTensor(const AttentionCase& c) {
  const auto& s = c.shape;
  return HostTensor(DType::float32, ffpa_tools::lse_layout(c.layout, s.batch, s.heads_q, s.seq_q));
}

ffpa::AttentionProblem libraryProblem(const AttentionCase& c, ffpa::Direction direction) {
  const auto& s = c.shape;
  ffpa::AttentionProblem problem;
  problem.direction = direction;
  problem.dtype = c.dtype == DType::float16    ? FFPA_DATA_TYPE_FLOAT16
                  : c.dtype == DType::bfloat16 ? FFPA_DATA_TYPE_BFLOAT16
                                               : FFPA_DATA_TYPE_FLOAT32;
  problem.batch = s.batch;
  problem.headsQ = s.heads_q;
  problem.headsKv = s.heads_kv;
  problem.seqQ = s.seq_q;
  problem.seqKv = s.seq_kv;
  problem.headDimQk = s.dim_qk;
  problem.headDimV = s.dim_v;
  problem.causal = s.causal == ffpa_tools::CausalMask::top_left       ? FFPA_CAUSAL_TOP_LEFT
                   : s.causal == ffpa_tools::CausalMask::bottom_right ? FFPA_CAUSAL_BOTTOM_RIGHT
                                                                      : FFPA_CAUSAL_NONE;
  problem.scale = static_cast<float>(s.scale);  // the attribute is a float
  problem.hasLse = c.withLse || direction == ffpa::Direction::Backward;
  return problem;
}

void nanPastKeyCounts(const ffpa_tools::AttentionProblem& shape, ffpa_tools::HostTensor& k,
                      ffpa_tools::HostTensor& v) {
  if (shape.key_lengths.empty()) return;
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads_kv; ++h) {
      for (int64_t key = shape.keys_of(b); key < shape.seq_kv; ++key) {
        for (int64_t d = 0; d < shape.dim_qk; ++d) k.set(b, h, key, d, kNan);
        for (int64_t d = 0; d < shape.dim_v; ++d) v.set(b, h, key, d, kNan);
      }
    }
  }
}

std::unique_ptr<ffpa::slices::SliceTable> sliceTableOf(const AttentionCase& c) {
  if (c.shape.slices.empty()) return nullptr;
  std::vector<ffpa::slices::SliceRange> ranges;
  for (const ffpa_tools::Slice& s : c.shape.slices) {
    ranges.push_back({static_cast<int32_t>(s.q0), static_cast<int32_t>(s.q1), static_cast<int32_t>(s.k0),
                      static_cast<int32_t>(s.k1), s.mask});
  }
  return std::make_unique<ffpa::slices::SliceTable>(std::move(ranges));
}

ffpa::Strides stridesOf(const HostTensor& tensor) {
  const auto& layout = tensor.layout();
  return {layout.strides[0], layout.strides[1], layout.strides[2], layout.strides[3]};
}

ffpa::Policy policyOf(const AttentionCase& c) {
  ffpa::Policy policy;
  // The built-in launch defaults, whatever tuned-config files this machine has.
  policy.setValue(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, 1, FFPA_POLICY_SOURCE_DEFAULT);
  for (const auto& [knob, value] : c.knobs) policy.setValue(knob, value);
  return policy;
}

ffpa::DeviceInfo deviceOf(const AttentionCase& c) {
  const bool hopper = c.device == PlannedDevice::hopper;
  ffpa::DeviceInfo d;
  d.name = hopper ? "emulated H100" : "emulated A100";
  d.smVersion = hopper ? 90 : 80;
  d.smCount = hopper ? 132 : 108;
  d.sharedMemPerBlockOptin = hopper ? 227 * 1024 : 163 * 1024;
  d.sharedMemPerSm = d.sharedMemPerBlockOptin + 1024;
  d.globalMemBytes = int64_t{80} << 30;
  return d;
}

ffpaAccumulator_t accumulatorOf(const AttentionCase& c) {
  ffpaAccumulator_t accumulator = FFPA_ACCUMULATOR_F32;
  for (const auto& [knob, value] : c.knobs) {
    if (knob == FFPA_POLICY_ACCUMULATOR) accumulator = static_cast<ffpaAccumulator_t>(value);
  }
  return accumulator;
}

std::vector<uint8_t> bytesOf(const HostTensor& tensor) {
  const auto* data = static_cast<const uint8_t*>(tensor.data());
  return {data, data + tensor.size_bytes()};
}

bool allPoison(const HostTensor& tensor) {
  const std::vector<uint8_t> bytes = bytesOf(tensor);
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0xFF; });
}

}  // namespace emulation_test
