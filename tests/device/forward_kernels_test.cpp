// The fast forward kernels on a GPU, through the public API: the sm80 kernels, which must plan
// wherever one applies (with FFPA_POLICY_HOPPER_KERNELS off, so that Hopper GPUs run them too),
// and the sm90 kernel (FFPA_POLICY_HOPPER_KERNELS, the default) on compute capability 9.0. Their results are measured against float64 attention, with the
// cuBLASLt reference path on the same inputs as the yardstick of what 16-bit inputs allow:
//   - a covering design over head dims 32-1024 (and d_qk != d_v), sequence tails, both causal
//     alignments, MHA/GQA/MQA, packed and padded layouts, both dtypes and every fp16 accumulator;
//   - every value of every kernel knob: a setting is either refused with a message that names
//     the knob, or computes attention as accurately as the default;
//   - bit-identical repeats;
//   - element offsets past 2^31, checked on sampled rows.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "attention_checks.h"
#include "tuned_config_directory.h"
#include "common/half_precision.h"
#include "common/random.h"

using namespace ffpa_tools;
using namespace device_tests;

namespace {

// --- Plans and builds ----------------------------------------------------------------------------

// The fast forward kernels: mma.sync (sm_80 and newer) and, on compute capability 9.0 for
// d_v 65..1024, TMA + wgmma (sm_90a).
constexpr const char* kFastKernelPrefixes[] = {"sm80.forward", "sm90.forward"};

// The descriptors of one forward call; `lse` is null when the LSE is not wanted.
struct ForwardDescriptors {
  ffpaAttentionDescriptor_t attention;
  ffpaTensorDescriptor_t q, k, v, o, lse;
};

ForwardDescriptors descriptors_of(const DeviceProblem& problem, bool with_lse) {
  return {problem.attention.get(), problem.q.desc.get(),
          problem.k.desc.get(),    problem.v.desc.get(),
          problem.o.desc.get(),    with_lse ? problem.lse.desc.get() : nullptr};
}

// The value of the "`item`: value" line of a plan description, "" when there is none.
std::string plan_item(const std::string& text, const std::string& item) {
  const std::string key = item + ": ";
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, key.size(), key) == 0) return line.substr(key.size());
  }
  return "";
}

// The description of the forward plan of `d` on `handle`.
std::string plan_text(const Handle& handle, const ForwardDescriptors& d) {
  size_t length = 0;
  check(ffpaDescribeAttentionForwardPlan(handle.get(), d.attention, d.q, d.k, d.v, d.o, d.lse,
                                         nullptr, 0, &length),
        "ffpaDescribeAttentionForwardPlan");
  std::vector<char> text(length + 1);
  check(ffpaDescribeAttentionForwardPlan(handle.get(), d.attention, d.q, d.k, d.v, d.o, d.lse,
                                         text.data(), text.size(), nullptr),
        "ffpaDescribeAttentionForwardPlan");
  return text.data();
}

// The kernel the forward plan of `d` on `handle` uses, and its launch configuration.
std::string planned_kernel(const Handle& handle, const ForwardDescriptors& d) {
  return plan_item(plan_text(handle, d), "kernel");
}
std::string planned_config(const Handle& handle, const ForwardDescriptors& d) {
  return plan_item(plan_text(handle, d), "config");
}

bool is_fast_kernel(const std::string& kernel) {
  return std::any_of(std::begin(kFastKernelPrefixes), std::end(kFastKernelPrefixes),
                     [&](const char* prefix) { return kernel.rfind(prefix, 0) == 0; });
}

// CHECKs that `kernel` is a fast one; false (after the failed CHECK) when it is not.
bool check_fast_kernel(const std::string& context, const std::string& kernel) {
  CHECK_MESSAGE(is_fast_kernel(kernel),
                context << ": planned " << kernel << ", not a fast (sm80/sm90) forward kernel");
  return is_fast_kernel(kernel);
}

// The head dims this build compiles fast kernels for (empty when the build info has no such list).
std::vector<int64_t> compiled_head_dims() {
  std::vector<int64_t> dims;
  for (const std::string& item : build_info_list("head dims")) {
    std::istringstream number(item);
    int64_t dim = 0;
    if (number >> dim) dims.push_back(dim);
  }
  return dims;
}

// Whether this build has a fast kernel for value head dim `dim_v`: the instance compiled for head
// dim d serves every d_v <= d. Builds with a reduced head-dim set (-Ddev_headdims) leave the
// larger dims to the reference path; those cases are reported and not run. A build info without
// the list expects every dim, so a change of its format fails cases rather than skipping them.
bool build_serves(int64_t dim_v) {
  static const std::vector<int64_t> dims = compiled_head_dims();
  return dims.empty() ||
         std::any_of(dims.begin(), dims.end(), [&](int64_t dim) { return dim >= dim_v; });
}

// build_serves(), and a MESSAGE naming the case when not.
bool runs_on_this_build(const std::string& context, int64_t dim_v) {
  if (build_serves(dim_v)) return true;
  MESSAGE(context << ": not run, this build compiles no fast kernel for d_v=" << dim_v);
  return false;
}

const char* accumulator_name(ffpaAccumulator_t accumulator) {
  switch (accumulator) {
    case FFPA_ACCUMULATOR_F32: return "f32";
    case FFPA_ACCUMULATOR_QK_F16: return "qk_f16";
    case FFPA_ACCUMULATOR_PV_F16: return "pv_f16";
    case FFPA_ACCUMULATOR_F16: return "f16";
    default: return "?";
  }
}

// --- Tolerances ----------------------------------------------------------------------------------
//
// u is the unit roundoff of the 16-bit type: 2^-11 for fp16, 2^-8 for bf16. The inputs come from
// DeviceProblem::fill_inputs(): Q, K in [-2, 2), V in [-1, 1), so |O| < 1.
//
// O with fp32 accumulation (FlashAttention's criterion: within twice the error of a
// straightforward implementation in the same input precision). Such a kernel rounds to 16 bits
// twice where it matters: P before the P.V product, and O at the end; its fp32 sums over at most
// 1024 products or a few hundred keys add about 1e-6. Rounding to nearest has a relative RMS error
// of about 0.43u over values spread across binades, and an error eps_j of p_j moves O by
// sum_j eps_j p_j v_j, which is to O = sum_j p_j v_j (independent v_j) as eps is to 1: a correct
// kernel lands at most near sqrt(2) * 0.43u = 0.61u in relative L2 (a float64 emulation of it on
// such inputs, d = 64 to 1024: 0.48u to 0.54u). The reference path computes in fp32 and rounds
// only O (0.43u), so the bound is max(2 x the reference's error, u): twice the straightforward
// implementation, and never below u, 1.6 times the expected error, so that it cannot be too tight
// where the reference happens to round well. Element by element, half an ulp of |O| < 1 (at most
// u/2) plus u * sum_j p_j |v_j| <= u (2u if the kernel normalized by the sum of the rounded p)
// bound the error by 2.5u (the emulation's largest: 0.66u): allowed 4u.
//
// O with fp16 accumulators (fp16 only). qk_f16 rounds the running Q.K^T sum to fp16 after each
// k-step of 16 products: d_qk/16 roundings of partial sums that grow to 1.33 sqrt(d_qk) RMS give
// every score an error of about 0.10u sqrt(d_qk) RMS after the softmax scale (1.6e-3 at
// d_qk = 1024), with heavy tails (partial sums just above a power of two); pv_f16 rounds the
// running P.V sum after each 16 keys. A float64 emulation of exactly that, on inputs and shapes as
// in the matrix below (Nkv <= 257, scale up to 1.5/sqrt(d_qk)), gives O errors up to 2.6e-3 (qk_f16
// and f16 at d_qk = 1024; pv_f16 alone 7e-4). How often the hardware rounds an fp16 accumulator is
// not documented: rounding every 2 products instead of 16 gives up to 6.6e-3. The fixed bound 2e-2
// keeps 7.8 times the first figure and 3 times the second, and still fails a kernel that gets one
// row in 400 wrong.
constexpr double kHalfAccumulatorRelL2 = 2e-2;
//
// LSE is fp32 in every mode. From fp32 scores its error is about 1e-6 (fp32 dot products, exp2 and
// log2 of relative error 2^-22): allowed max(1e-4, 1e-4 |LSE|). From fp16 Q.K^T sums it is a
// p-weighted mean of the score errors above, and a row that sees one key takes its score's whole
// error: the emulation's largest is 1.6e-2 (3.1e-2 rounding every 2 products). Allowed 6e-2
// absolute, against LSE values of 2 to 8.
constexpr double kLseRelative = 1e-4;
constexpr double kHalfScoreLseAbsolute = 6e-2;
//
// Rows that see no key have exact answers: O = 0 and LSE = -inf, in every mode.

struct Bounds {
  double o_rel_l2;
  double o_max_abs;  // infinity where no per-element bound is derived
  double lse_absolute;
  double lse_relative;  // |LSE - exact| <= max(lse_absolute, lse_relative * |exact|)
};

// `baseline`: the rel L2 error of the reference path's O against float64 on the same inputs.
Bounds fast_bounds(DType dtype, ffpaAccumulator_t accumulator, double baseline) {
  const double u = unit_roundoff(dtype);
  Bounds bounds{std::max(2.0 * baseline, u), 4.0 * u, kLseRelative, kLseRelative};
  if (accumulator == FFPA_ACCUMULATOR_F32) return bounds;
  bounds.o_rel_l2 = kHalfAccumulatorRelL2;
  bounds.o_max_abs = std::numeric_limits<double>::infinity();
  if (accumulator != FFPA_ACCUMULATOR_PV_F16) {
    bounds.lse_absolute = kHalfScoreLseAbsolute;
    bounds.lse_relative = 0.0;
  }
  return bounds;
}

// CHECKs O values (dense, float64) against float64 attention.
void check_o(const std::string& context, const std::vector<double>& actual,
             const std::vector<double>& expected, const Bounds& bounds) {
  const ErrorStats error = compare(actual, expected);  // NaN: infinite errors
  CHECK_MESSAGE(error.rel_l2 <= bounds.o_rel_l2, context << ": O vs float64: " << error.to_string()
                                                         << "; allowed rel L2 " << bounds.o_rel_l2);
  if (std::isfinite(bounds.o_max_abs)) {
    CHECK_MESSAGE(error.max_abs <= bounds.o_max_abs,
                  context << ": O vs float64: " << error.to_string() << "; allowed max abs "
                          << bounds.o_max_abs);
  }
}

// CHECKs LSE values (dense) against float64 attention; equal infinities are exact, NaN fails.
void check_lse(const std::string& context, const std::vector<double>& actual,
               const std::vector<double>& expected, const Bounds& bounds) {
  int64_t outside = 0;
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] == expected[i]) continue;
    const double difference = std::fabs(actual[i] - expected[i]);
    const double allowed =
        std::max(bounds.lse_absolute, bounds.lse_relative * std::fabs(expected[i]));
    if (!(difference <= allowed)) ++outside;
    if (std::isnan(difference) || difference > worst) worst = difference;  // a NaN stays
  }
  CHECK_MESSAGE(outside == 0, context << ": LSE vs float64: " << outside << " of " << actual.size()
                                      << " elements outside max(" << bounds.lse_absolute << ", "
                                      << bounds.lse_relative << " |LSE|); largest difference "
                                      << worst);
}

// CHECKs the downloaded outputs of a fast kernel in `problem`: O and LSE against float64, rows
// that see no key, gaps of padded layouts.
void check_fast_outputs(const std::string& context, const DeviceProblem& problem, bool with_lse,
                        const CpuForward& exact, const Bounds& bounds) {
  check_o(context, problem.o.host.to_dense(), exact.o, bounds);
  if (with_lse) check_lse(context, problem.lse.host.to_dense(), exact.lse, bounds);
  check_masked_rows(context, problem, with_lse);
  check_forward_gaps(context, problem, with_lse);
}

// Elements of the rows that see no key where `problem`'s downloaded O (and LSE) differ from
// `reference_o` (`reference_lse`). Values compare: +0 equals -0, NaN equals nothing.
int64_t masked_row_differences(const DeviceProblem& problem, const HostTensor& reference_o,
                               const HostTensor& reference_lse, bool with_lse) {
  const AttentionProblem& p = problem.config().problem;
  int64_t differences = 0;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seq_q; ++i) {
        if (p.visible_keys(i, b) != 0) continue;
        for (int64_t x = 0; x < p.dim_v; ++x)
          differences += !(problem.o.host.get(b, h, i, x) == reference_o.get(b, h, i, x));
        if (with_lse) differences += !(problem.lse.host.get(b, h, i) == reference_lse.get(b, h, i));
      }
  return differences;
}

// --- The shape matrix ----------------------------------------------------------------------------

struct FastCase {
  TestCase test;
  ffpaAccumulator_t accumulator;

  std::string to_string() const {
    return test.to_string() + ", accumulator " + accumulator_name(accumulator);
  }
};

// The head-dim matrix (head_dim_matrix), its fp16 cases taking the four accumulators in turn
// (five cases each, every accumulator on every tile shape), without LSE twice in every four head
// dims, once per dtype.
std::vector<FastCase> shape_matrix() {
  const ffpaAccumulator_t accumulators[] = {FFPA_ACCUMULATOR_F32, FFPA_ACCUMULATOR_QK_F16,
                                            FFPA_ACCUMULATOR_PV_F16, FFPA_ACCUMULATOR_F16};
  std::vector<FastCase> cases;
  int half_cases = 0;
  for (const MatrixCase& point : head_dim_matrix(41000)) {
    FastCase fast_case;
    fast_case.test = point.test;
    fast_case.test.with_lse = !(point.s % 2 == 1 && point.c == (point.s % 4) / 2);
    fast_case.accumulator =
        point.test.config.dtype == DType::float16 ? accumulators[half_cases++ % 4] : FFPA_ACCUMULATOR_F32;
    cases.push_back(fast_case);
  }
  return cases;
}

// A handle per accumulator mode (the default policy otherwise, with the Hopper kernels when
// `hopper`) and one on the reference path.
class Handles {
 public:
  explicit Handles(bool hopper = false) {
    reference_.set_policy(FFPA_POLICY_REFERENCE_BACKEND, 1);
    // The reference computes the call's problem as it is, not with its query heads as rows.
    reference_.set_policy(FFPA_POLICY_QUERY_HEADS_AS_ROWS, 0);
    for (int mode = FFPA_ACCUMULATOR_QK_F16; mode <= FFPA_ACCUMULATOR_F16; ++mode) {
      fast_[mode].set_policy(FFPA_POLICY_ACCUMULATOR, mode);
    }
    for (Handle& fast : fast_) fast.set_policy(FFPA_POLICY_HOPPER_KERNELS, hopper ? 1 : 0);
  }
  const Handle& fast(ffpaAccumulator_t accumulator) const { return fast_[accumulator]; }
  const Handle& reference() const { return reference_; }
  // A knob of every fast handle (K and V sharing, say).
  void set_fast_policy(ffpaPolicyKnob_t knob, int32_t value) {
    for (Handle& fast : fast_) fast.set_policy(knob, value);
  }

 private:
  Handle fast_[4];  // indexed by ffpaAccumulator_t
  Handle reference_;
};

// One case of the matrix: plan (which must be fast), the reference path, the fast kernel, and
// their checks on the same inputs.
// `edit`, if given, changes the inputs after they are filled (and uploads them again).
void run_fast_case(const Handles& handles, Workspace& workspace, const FastCase& fast_case,
                   const std::function<void(DeviceProblem&)>& edit = {}) {
  const std::string context = fast_case.to_string();
  INFO(context);  // for an exception thrown by a call
  const ProblemConfig& config = fast_case.test.config;
  const bool with_lse = fast_case.test.with_lse;
  if (!runs_on_this_build(context, config.problem.dim_v)) return;
  DeviceProblem problem(config);
  problem.fill_inputs(fast_case.test.start);
  if (edit) edit(problem);
  const Handle& fast = handles.fast(fast_case.accumulator);
  const std::string kernel = planned_kernel(fast, descriptors_of(problem, with_lse));
  if (!check_fast_kernel(context, kernel)) return;

  problem.forward(handles.reference(), workspace, with_lse);  // poisons O and LSE first
  const HostTensor reference_o = problem.o.host;
  const HostTensor reference_lse = problem.lse.host;
  problem.forward(fast, workspace, with_lse);
  const CpuForward exact = cpu_forward(problem);

  const double reference_error = compare(reference_o.to_dense(), exact.o).rel_l2;
  CHECK_MESSAGE(std::isfinite(reference_error),
                context << ": the reference path's O is not finite");
  // A broken reference must not widen the bound: fall back to the floor alone.
  const double baseline = std::isfinite(reference_error) ? reference_error : 0.0;
  check_fast_outputs(context + " [" + kernel + "]", problem, with_lse, exact,
                     fast_bounds(config.dtype, fast_case.accumulator, baseline));
  CHECK_MESSAGE(masked_row_differences(problem, reference_o, reference_lse, with_lse) == 0,
                context << ": rows that see no key differ from the reference path's");
}

// --- Knobs ---------------------------------------------------------------------------------------

struct KnobValue {
  ffpaPolicyKnob_t knob;
  int32_t value;
};
using KnobSetting = std::vector<KnobValue>;

ffpaPolicyInfo_t policy_info(ffpaPolicyKnob_t knob) {
  ffpaPolicyInfo_t info{};
  info.structSize = sizeof info;
  check(ffpaGetPolicyInfo(knob, &info), "ffpaGetPolicyInfo");
  return info;
}

std::string describe(const KnobSetting& setting) {
  std::ostringstream text;
  for (const KnobValue& k : setting) text << " " << policy_info(k.knob).name << "=" << k.value;
  return text.str();
}

// Every value of every kernel-selection knob (values 1-99) but the accumulator, which the shape
// matrix covers: one knob at a time, set explicitly, since the planner adapts knobs left at their
// defaults to fit shared memory and never one that was set. The library's own list and bounds,
// so that a knob added later is covered too. Then combinations at the ends of the pipeline's range.
std::vector<KnobSetting> knob_settings() {
  int32_t count = 0;
  check(ffpaGetPolicyKnobs(0, &count, nullptr), "ffpaGetPolicyKnobs");
  std::vector<ffpaPolicyKnob_t> knobs(static_cast<size_t>(count));
  check(ffpaGetPolicyKnobs(count, &count, knobs.data()), "ffpaGetPolicyKnobs");
  std::vector<KnobSetting> settings;
  for (const ffpaPolicyKnob_t knob : knobs) {
    if (knob == FFPA_POLICY_ACCUMULATOR || knob >= 100) continue;
    const ffpaPolicyInfo_t info = policy_info(knob);
    for (int64_t value = info.minValue; value <= info.maxValue; ++value) {
      settings.push_back({{knob, static_cast<int32_t>(value)}});
    }
  }
  // The slowest pipeline; the deepest one in the least shared memory; padding instead of every
  // swizzle; nothing persisted.
  settings.push_back({{FFPA_POLICY_STAGES, 1}, {FFPA_POLICY_PREFETCH_QKV, 0}});
  settings.push_back({{FFPA_POLICY_STAGES, 4}, {FFPA_POLICY_QKV_SMEM_SHARE, 1}});
  settings.push_back({{FFPA_POLICY_SMEM_SWIZZLE_Q, 0},
                      {FFPA_POLICY_SMEM_SWIZZLE_K, 0},
                      {FFPA_POLICY_SMEM_SWIZZLE_V, 0}});
  settings.push_back({{FFPA_POLICY_PERSIST_Q_G2S, 0}, {FFPA_POLICY_PERSIST_KV_G2S, 0}});
  return settings;
}

// CHECKs a refused setting: a not-supported status, and a message naming a knob of the setting.
void check_refusal(const std::string& context, ffpaStatus_t status, const KnobSetting& setting) {
  const std::string message = last_error_message();
  CHECK_MESSAGE(
      (status == FFPA_STATUS_NOT_SUPPORTED || status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION),
      context << ": refused with " << status_report(status)
              << "; a knob setting may only be refused as not supported");
  const bool names_knob = std::any_of(setting.begin(), setting.end(), [&](const KnobValue& k) {
    return message.find(policy_info(k.knob).name) != std::string::npos;
  });
  CHECK_MESSAGE(names_knob,
                context << ": the refusal does not name the knob: \"" << message << "\"");
  MESSAGE(context << ": refused: " << message);
}

// Runs `problem` (inputs filled, float64 attention `exact`) under `setting`: refused, or planned
// on a fast kernel and as accurate as the default policy must be.
void run_knob_setting(const std::string& problem_context, DeviceProblem& problem,
                      Workspace& workspace, const CpuForward& exact, double reference_error,
                      const KnobSetting& setting) {
  const std::string context = problem_context + " with" + describe(setting);
  INFO(context);  // for an exception thrown by a call
  Handle fast;
  fast.set_policy(FFPA_POLICY_HOPPER_KERNELS, 0);  // the mma.sync kernels on Hopper GPUs too
  fast.set_policy(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_OFF);  // refusals are expected here
  for (const KnobValue& k : setting) fast.set_policy(k.knob, k.value);
  const ForwardDescriptors d = descriptors_of(problem, true);
  size_t bytes = 0;
  const ffpaStatus_t status = ffpaGetAttentionForwardWorkspaceSize(fast.get(), d.attention, d.q,
                                                                   d.k, d.v, d.o, d.lse, &bytes);
  if (status != FFPA_STATUS_SUCCESS) {
    check_refusal(context, status, setting);
    return;
  }
  const std::string kernel = planned_kernel(fast, d);
  if (!check_fast_kernel(context, kernel)) return;
  problem.forward(fast, workspace, true);
  check_fast_outputs(context + " [" + kernel + "]", problem, true, exact,
                     fast_bounds(problem.config().dtype, FFPA_ACCUMULATOR_F32, reference_error));
}

// --- Element offsets past 2^31 -------------------------------------------------------------------

// Device memory, or nothing when the device has too little free (the caller skips).
std::optional<DeviceBuffer> try_allocate(size_t bytes) {
  try {
    return DeviceBuffer(bytes);
  } catch (const CallFailed&) {
    if (cudaGetLastError() != cudaErrorMemoryAllocation) throw;
    return std::nullopt;
  }
}

// fp16 values for a tensor too large to generate on the host: element e (its offset in memory)
// holds pattern[e % period]. The period is odd, so it divides no power of two: an offset that
// wrapped at 2^31 or 2^32 elements reads another value than the right one.
class PeriodicValues {
 public:
  PeriodicValues(uint64_t start, double low, double high) : bits_(kPeriod) {
    Random random(start);
    for (uint16_t& bits : bits_)
      bits = float_to_half_bits(static_cast<float>(random.uniform(low, high)));
  }

  double at(int64_t offset) const {
    return half_bits_to_float(bits_[static_cast<size_t>(offset % kPeriod)]);
  }

  // Writes elements [0, count) of fp16 device memory: one upload of the pattern, then copies of
  // what is already written, doubling each time (a whole number of periods until the last copy).
  void fill(void* device, int64_t count) const {
    auto* out = static_cast<uint16_t*>(device);
    const int64_t first = std::min(count, kPeriod);
    check_cuda(cudaMemcpy(out, bits_.data(), static_cast<size_t>(first) * sizeof(uint16_t),
                          cudaMemcpyHostToDevice),
               "cudaMemcpy of a pattern");
    for (int64_t done = first; done < count;) {
      const int64_t next = std::min(done, count - done);
      check_cuda(cudaMemcpy(out + done, out, static_cast<size_t>(next) * sizeof(uint16_t),
                            cudaMemcpyDeviceToDevice),
                 "cudaMemcpy of a pattern");
      done += next;
    }
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after a fill");
  }

 private:
  static constexpr int64_t kPeriod = 1000003;
  std::vector<uint16_t> bits_;
};

// A [B, H, N, D] input filled from PeriodicValues, readable on the host element by element.
struct LargeInput {
  TensorLayout layout;
  PeriodicValues values;

  std::vector<double> row(int64_t b, int64_t h, int64_t n) const {
    std::vector<double> out(static_cast<size_t>(layout.dims[3]));
    for (int64_t x = 0; x < layout.dims[3]; ++x) out[x] = values.at(layout.offset(b, h, n, x));
    return out;
  }
  // The dense [N, D] matrix of (b, h).
  std::vector<double> matrix(int64_t b, int64_t h) const {
    std::vector<double> out;
    out.reserve(static_cast<size_t>(layout.dims[2] * layout.dims[3]));
    for (int64_t n = 0; n < layout.dims[2]; ++n) {
      const std::vector<double> values_of_row = row(b, h, n);
      out.insert(out.end(), values_of_row.begin(), values_of_row.end());
    }
    return out;
  }
};

struct RowIndex {
  int64_t batch, head, row;
};

// The first and the last row, rows of the last batch (every one past 2^31 elements here; among
// them the first row that sees every key under top-left masking, and the next), and random rows.
std::vector<RowIndex> sampled_rows(const AttentionProblem& p, uint64_t start) {
  std::vector<RowIndex> rows = {{0, 0, 0},
                                {p.batch - 1, p.heads_q - 1, p.seq_q - 1},
                                {p.batch - 1, 0, 0},
                                {p.batch - 1, p.heads_q / 2, p.seq_kv - 1},
                                {p.batch - 1, 3, p.seq_kv},
                                {p.batch / 2, 5, p.seq_q / 2}};
  Random random(start);
  for (int i = 0; i < 6; ++i) {
    rows.push_back({random.range(0, p.batch - 1), random.range(0, p.heads_q - 1),
                    random.range(0, p.seq_q - 1)});
  }
  return rows;
}

// float64 attention for the rows `rows` alone, the rest of the problem never formed: O
// [rows, Dv] and LSE [rows], dense.
CpuForward cpu_forward_rows(const AttentionProblem& p, const std::vector<RowIndex>& rows,
                            const LargeInput& q, const LargeInput& k, const LargeInput& v) {
  CpuForward out;
  out.o.resize(rows.size() * static_cast<size_t>(p.dim_v));
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowIndex& r = rows[i];
    const int64_t kv_head = p.kv_head_of(r.head);
    const std::vector<double> q_row = q.row(r.batch, r.head, r.row);
    const std::vector<double> k_head = k.matrix(r.batch, kv_head);
    const std::vector<double> v_head = v.matrix(r.batch, kv_head);
    out.lse.push_back(attention_row(p, r.row, q_row.data(), k_head.data(), v_head.data(),
                                    out.o.data() + i * static_cast<size_t>(p.dim_v)));
  }
  return out;
}

// The same rows of fp16 O and fp32 LSE in device memory, downloaded one at a time.
CpuForward download_rows(const AttentionProblem& p, const std::vector<RowIndex>& rows,
                         const DeviceBuffer& o, const TensorLayout& o_layout,
                         const DeviceBuffer& lse, const TensorLayout& lse_tensor_layout) {
  CpuForward out;
  std::vector<uint16_t> bits(static_cast<size_t>(p.dim_v));
  for (const RowIndex& r : rows) {
    const auto* o_row =
        static_cast<const uint16_t*>(o.get()) + o_layout.offset(r.batch, r.head, r.row, 0);
    check_cuda(
        cudaMemcpy(bits.data(), o_row, bits.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost),
        "cudaMemcpy of an O row");
    for (const uint16_t b : bits) out.o.push_back(half_bits_to_float(b));
    float value = 0.0f;
    const auto* lse_at =
        static_cast<const float*>(lse.get()) + lse_tensor_layout.offset(r.batch, r.head, r.row, 0);
    check_cuda(cudaMemcpy(&value, lse_at, sizeof value, cudaMemcpyDeviceToHost),
               "cudaMemcpy of an LSE");
    out.lse.push_back(value);
  }
  return out;
}

std::string describe(const RowIndex& r) {
  std::ostringstream text;
  text << "(b=" << r.batch << ", h=" << r.head << ", row=" << r.row << ")";
  return text.str();
}

}  // namespace

TEST_SUITE_BEGIN("device");

TEST_CASE(
    "sm80 forward: head dims 32-1024 across tails, masks, head groups, layouts, dtypes and "
    "accumulators") {
  Handles handles;
  Workspace workspace;
  for (const FastCase& fast_case : shape_matrix()) run_fast_case(handles, workspace, fast_case);
}

TEST_CASE("sm80 forward: every kernel knob value is refused by name or computes correctly") {
  // d = 512 (two column warps, BNHD, GQA, top-left) and d = 128 (one warp per row group, gaps in
  // every tensor, MQA, bottom-right with fully masked rows). The inputs, their float64 attention
  // and the reference's error are shared by every setting.
  const TestCase problems[] = {
      {make_config(attention_shape(1, 4, 2, 190, 321, 512, 512, CausalMask::top_left),
                   DType::float16, LayoutKind::bnhd, 0.0),
       true, 43001},
      {make_config(attention_shape(2, 3, 1, 321, 190, 128, 128, CausalMask::bottom_right),
                   DType::float16, LayoutKind::padded_aligned, 0.0),
       true, 43002},
  };
  Handle reference;
  reference.set_policy(FFPA_POLICY_REFERENCE_BACKEND, 1);
  Workspace workspace;
  const std::vector<KnobSetting> settings = knob_settings();
  for (const TestCase& test : problems) {
    const std::string context = test.to_string();
    INFO(context);
    if (!runs_on_this_build(context, test.config.problem.dim_v)) continue;
    DeviceProblem problem(test.config);
    problem.fill_inputs(test.start);
    problem.forward(reference, workspace, true);
    const CpuForward exact = cpu_forward(problem);
    const double reference_error = compare(problem.o.host.to_dense(), exact.o).rel_l2;
    REQUIRE_MESSAGE(std::isfinite(reference_error),
                    context << ": the reference path's O is not finite");
    for (const KnobSetting& setting : settings) {
      run_knob_setting(context, problem, workspace, exact, reference_error, setting);
    }
  }
}

TEST_CASE("sm80 forward: the same call twice gives the same bits") {
  // One case per tile shape.
  const TestCase tests[] = {
      {make_config(attention_shape(2, 3, 1, 200, 200, 128, 128, CausalMask::bottom_right),
                   DType::float16, LayoutKind::bnhd, 0.0),
       true, 44001},
      {make_config(attention_shape(1, 4, 2, 233, 317, 512, 512, CausalMask::none), DType::bfloat16,
                   LayoutKind::bhnd, 0.0),
       true, 44002},
      {make_config(attention_shape(1, 2, 1, 150, 150, 1024, 1024, CausalMask::top_left),
                   DType::bfloat16, LayoutKind::bhnd, 0.0),
       true, 44003},
  };
  Handle fast;
  fast.set_policy(FFPA_POLICY_HOPPER_KERNELS, 0);  // the mma.sync kernels on Hopper GPUs too
  Workspace workspace;
  for (const TestCase& test : tests) {
    const std::string context = test.to_string();
    INFO(context);
    if (!runs_on_this_build(context, test.config.problem.dim_v)) continue;
    DeviceProblem problem(test.config);
    problem.fill_inputs(test.start);
    const std::string kernel = planned_kernel(fast, descriptors_of(problem, true));
    if (!check_fast_kernel(context, kernel)) continue;
    problem.forward(fast, workspace, true);
    const HostTensor first_o = problem.o.host;
    const HostTensor first_lse = problem.lse.host;
    // Identical NaNs would be identical bits too: the first result must be right. Without a
    // reference run, the rounding error of the exact O stands in for the reference's error.
    const CpuForward exact = cpu_forward(problem);
    const double rounding = rounding_error(exact.o, test.config.dtype).rel_l2;
    check_fast_outputs(context, problem, true, exact,
                       fast_bounds(test.config.dtype, FFPA_ACCUMULATOR_F32, rounding));

    problem.forward(fast, workspace, true);  // poisons the outputs first
    CHECK_MESSAGE(std::memcmp(first_o.data(), problem.o.host.data(), first_o.size_bytes()) == 0,
                  context << ": O differs between two runs");
    CHECK_MESSAGE(
        std::memcmp(first_lse.data(), problem.lse.host.data(), first_lse.size_bytes()) == 0,
        context << ": LSE differs between two runs");
  }
}

constexpr const char* kHopperPrefix = "sm90.forward";

// Runs `config` (fp16, Q and O past 2^31 elements) and checks sampled rows against float64.
// Too large for the float64 attention of the whole problem, and for host-generated inputs:
// periodic inputs, sampled rows. `hopper`: with the Hopper kernels, which must serve it.
void check_large_offsets(const ProblemConfig& config, uint64_t start, bool hopper = false) {
  const AttentionProblem& p = config.problem;  // with the default scale
  const std::string context =
      config.to_string() + ", inputs from Random(" + std::to_string(start) + ")";
  INFO(context);
  if (!runs_on_this_build(context, p.dim_v)) return;
  const LargeInput q{attention_layout(config.layout, p.batch, p.heads_q, p.seq_q, p.dim_qk),
                     PeriodicValues(start, -2.0, 2.0)};
  const LargeInput k{attention_layout(config.layout, p.batch, p.heads_kv, p.seq_kv, p.dim_qk),
                     PeriodicValues(start + 1, -2.0, 2.0)};
  const LargeInput v{attention_layout(config.layout, p.batch, p.heads_kv, p.seq_kv, p.dim_v),
                     PeriodicValues(start + 2, -1.0, 1.0)};
  const TensorLayout o_layout =
      attention_layout(config.layout, p.batch, p.heads_q, p.seq_q, p.dim_v);
  const TensorLayout lse_tensor_layout = lse_layout(config.layout, p.batch, p.heads_q, p.seq_q);
  REQUIRE(o_layout.span() > (int64_t{1} << 31));

  const TensorDescriptor q_desc(DType::float16, q.layout), k_desc(DType::float16, k.layout),
      v_desc(DType::float16, v.layout), o_desc(DType::float16, o_layout),
      lse_desc(DType::float32, lse_tensor_layout);
  const AttentionDescriptor attention(p.causal, false, 0.0);
  const ForwardDescriptors d{attention.get(), q_desc.get(), k_desc.get(),
                             v_desc.get(),    o_desc.get(), lse_desc.get()};
  Handle fast;
  fast.set_policy(FFPA_POLICY_HOPPER_KERNELS, hopper ? 1 : 0);
  const std::string kernel = planned_kernel(fast, d);
  if (!check_fast_kernel(context, kernel)) return;
  if (hopper) REQUIRE_MESSAGE(kernel.rfind(kHopperPrefix, 0) == 0, context << ": planned " << kernel);
  size_t workspace_bytes = 0;
  check(ffpaGetAttentionForwardWorkspaceSize(fast.get(), d.attention, d.q, d.k, d.v, d.o, d.lse,
                                             &workspace_bytes),
        "ffpaGetAttentionForwardWorkspaceSize");
  Workspace workspace;
  void* const scratch = workspace.reserve(workspace_bytes);

  const auto bytes = [](const TensorLayout& layout, DType type) {
    return static_cast<size_t>(layout.span()) * dtype_bytes(type);
  };
  std::optional<DeviceBuffer> q_memory = try_allocate(bytes(q.layout, DType::float16));
  std::optional<DeviceBuffer> k_memory = try_allocate(bytes(k.layout, DType::float16));
  std::optional<DeviceBuffer> v_memory = try_allocate(bytes(v.layout, DType::float16));
  std::optional<DeviceBuffer> o_memory = try_allocate(bytes(o_layout, DType::float16));
  std::optional<DeviceBuffer> lse_memory = try_allocate(bytes(lse_tensor_layout, DType::float32));
  if (!q_memory || !k_memory || !v_memory || !o_memory || !lse_memory) {
    MESSAGE(context << ": not run, the device has too little free memory for it");
    return;
  }
  q.values.fill(q_memory->get(), q.layout.span());
  k.values.fill(k_memory->get(), k.layout.span());
  v.values.fill(v_memory->get(), v.layout.span());
  check_cuda(cudaMemset(o_memory->get(), 0xff, o_memory->size()), "cudaMemset");  // NaN
  check_cuda(cudaMemset(lse_memory->get(), 0xff, lse_memory->size()), "cudaMemset");

  check(ffpaAttentionForward(fast.get(), d.attention, d.q, q_memory->get(), d.k, k_memory->get(),
                             d.v, v_memory->get(), d.o, o_memory->get(), d.lse,
                             static_cast<float*>(lse_memory->get()), scratch, workspace_bytes),
        "ffpaAttentionForward");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the forward");

  const std::vector<RowIndex> rows = sampled_rows(p, start + 3);
  std::string row_list;
  for (const RowIndex& r : rows) row_list += " " + describe(r);
  const std::string checked = context + " [" + kernel + "], rows" + row_list;
  const CpuForward exact = cpu_forward_rows(p, rows, q, k, v);
  const CpuForward actual =
      download_rows(p, rows, *o_memory, o_layout, *lse_memory, lse_tensor_layout);
  const double rounding = rounding_error(exact.o, DType::float16).rel_l2;
  const Bounds bounds = fast_bounds(DType::float16, FFPA_ACCUMULATOR_F32, rounding);
  check_o(checked, actual.o, exact.o, bounds);
  check_lse(checked, actual.lse, exact.lse, bounds);
}

TEST_CASE("fast forward: element offsets past 2^31 (sampled rows against float64)") {
  // BNHD fp16: Q and O hold 257 x 4096 x 16 x 128 = 2^31 + 2^23 elements, so every row of the last
  // batch starts past 2^31 elements (4 GiB). Two 16-bit tensors that large take 8 GiB between
  // them; K and V (GQA, 1000 keys) and the LSE add 0.3 GiB.
  check_large_offsets(make_config(attention_shape(257, 16, 2, 4096, 1000, 128, 128, CausalMask::top_left),
                                  DType::float16, LayoutKind::bnhd, 0.0),
                      45000);
}

// --- The Hopper kernel (FFPA_POLICY_HOPPER_KERNELS) ----------------------------------------------

TEST_CASE("sm90 forward: d_v 16-1024 across tails, masks, head groups, layouts and dtypes") {
  if (!hopper_runs_here()) return;
  Handles handles(true);
  Workspace workspace;
  std::vector<FastCase> cases;
  for (FastCase fast_case : shape_matrix()) {  // every d: the row split up to 256, above it the columns'
    fast_case.accumulator = FFPA_ACCUMULATOR_F32;  // the other modes are the mma.sync kernels'
    cases.push_back(fast_case);
  }
  // d_v that are not whole 64-column blocks, d_qk != d_v both ways, one query row, many KV tiles;
  // above 512, clusters of two CTAs (rank 1 with no d_qk block at d_qk = 64 and 48, a partial and an
  // empty V block at d_v = 528).
  const ShapeRow extra[] = {
      {1, 2, 1, 130, 200, 288, 272, CausalMask::bottom_right, DType::float16, LayoutKind::bhnd},
      {2, 2, 2, 65, 65, 400, 464, CausalMask::top_left, DType::bfloat16, LayoutKind::bnhd},
      {1, 3, 3, 1, 777, 512, 496, CausalMask::none, DType::bfloat16, LayoutKind::padded_aligned},
      {1, 4, 1, 600, 600, 576, 512, CausalMask::bottom_right, DType::float16, LayoutKind::bnhd},
      {1, 2, 1, 300, 450, 1024, 1024, CausalMask::none, DType::bfloat16, LayoutKind::bhnd},
      {2, 2, 2, 129, 70, 576, 528, CausalMask::bottom_right, DType::float16, LayoutKind::bnhd},
      {1, 3, 1, 1, 333, 64, 1008, CausalMask::top_left, DType::bfloat16, LayoutKind::padded_aligned},
      {1, 2, 2, 200, 200, 896, 656, CausalMask::top_left, DType::float16, LayoutKind::bhnd},
      {1, 2, 1, 100, 150, 48, 640, CausalMask::none, DType::bfloat16, LayoutKind::bhnd},
      // The rows split between the consumers (d_v up to 256): a CTA whose second consumer has no
      // row (50 queries) or some (200), the first consumer's last tile masked (causal), d_v 48
      // and 16 on the 64 instance, d_qk != d_v.
      {1, 2, 1, 50, 300, 64, 48, CausalMask::bottom_right, DType::bfloat16, LayoutKind::bnhd},
      {2, 2, 1, 200, 333, 128, 128, CausalMask::top_left, DType::float16, LayoutKind::bhnd},
      {1, 3, 1, 129, 129, 256, 192, CausalMask::none, DType::bfloat16, LayoutKind::padded_aligned},
      {1, 2, 2, 300, 100, 16, 16, CausalMask::bottom_right, DType::float16, LayoutKind::bhnd},
      {1, 2, 1, 200, 333, 448, 64, CausalMask::top_left, DType::bfloat16, LayoutKind::bnhd},  // one K buffer
  };
  uint64_t start = 46000;
  for (const auto& e : extra) {
    FastCase fast_case;
    fast_case.test = {e.config(), true, start++};
    fast_case.accumulator = FFPA_ACCUMULATOR_F32;
    cases.push_back(fast_case);
  }
  int on_hopper = 0;
  for (const FastCase& fast_case : cases) {
    const std::string context = fast_case.to_string();
    DeviceProblem problem(fast_case.test.config);
    const std::string kernel =
        planned_kernel(handles.fast(FFPA_ACCUMULATOR_F32), descriptors_of(problem, fast_case.test.with_lse));
    // Every case above has TMA-addressable strides: the Hopper kernel must take it.
    CHECK_MESSAGE(kernel.rfind(kHopperPrefix, 0) == 0, context << ": planned " << kernel);
    if (kernel.rfind(kHopperPrefix, 0) != 0) continue;
    ++on_hopper;
    run_fast_case(handles, workspace, fast_case);
  }
  MESSAGE(on_hopper << " cases on the sm90 forward");
  CHECK(on_hopper == static_cast<int>(cases.size()));
}

TEST_CASE("fast forward: decode and short queries of GQA and MQA, their query heads as rows, split-KV") {
  // Merged (FFPA_POLICY_QUERY_HEADS_AS_ROWS): decode of GQA and MQA (MLA's 576/512), one
  // bottom-right row, short packed GQA queries, short MQA queries in [B, N, H, D] without an LSE.
  // Not merged: the same with an LSE (heads one way, the LSE's rows the other), one top-left row.
  // Split-KV (the grid leaves SMs idle, the keys have 8 tiles or more): MLA decode of one
  // sequence, GQA decode, and short causal queries of two heads.
  struct DecodeRow {
    ShapeRow shape;
    bool with_lse;
    bool merges;
    bool splits;
  };
  const DecodeRow rows[] = {
      {{4, 16, 2, 1, 1000, 128, 128, CausalMask::none, DType::bfloat16, LayoutKind::bhnd}, true, true, true},
      {{2, 32, 1, 1, 700, 576, 512, CausalMask::bottom_right, DType::bfloat16, LayoutKind::bhnd}, true, true, true},
      {{3, 8, 1, 1, 257, 64, 64, CausalMask::bottom_right, DType::float16, LayoutKind::bnhd}, true, true, false},
      {{2, 12, 3, 5, 300, 256, 256, CausalMask::none, DType::float16, LayoutKind::bhnd}, true, true, false},
      {{1, 8, 1, 7, 333, 512, 512, CausalMask::none, DType::bfloat16, LayoutKind::bnhd}, false, true, false},
      {{1, 8, 1, 7, 333, 512, 512, CausalMask::none, DType::bfloat16, LayoutKind::bnhd}, true, false, false},
      {{2, 8, 2, 1, 100, 128, 128, CausalMask::top_left, DType::float16, LayoutKind::bhnd}, true, false, false},
      {{1, 128, 1, 1, 8192, 576, 512, CausalMask::none, DType::bfloat16, LayoutKind::bhnd}, true, true, true},
      {{1, 16, 2, 1, 6000, 128, 128, CausalMask::none, DType::float16, LayoutKind::bnhd}, false, true, true},
      {{1, 2, 2, 40, 3000, 320, 320, CausalMask::bottom_right, DType::bfloat16, LayoutKind::bhnd}, true, false, true},
  };
  Workspace workspace;
  uint64_t start = 47000;
  for (const bool hopper : {false, true}) {
    if (hopper && !hopper_runs_here()) continue;
    const Handles handles(hopper);
    for (const DecodeRow& row : rows) {
      FastCase fast_case;
      fast_case.test = {row.shape.config(), row.with_lse, start++};
      fast_case.accumulator = FFPA_ACCUMULATOR_F32;
      const std::string context = fast_case.to_string() + (hopper ? " (Hopper kernels)" : "");
      if (!runs_on_this_build(context, row.shape.dv)) continue;
      DeviceProblem problem(fast_case.test.config);
      const std::string config =
          planned_config(handles.fast(FFPA_ACCUMULATOR_F32), descriptors_of(problem, row.with_lse));
      CHECK_MESSAGE((config.find("query_heads_as_rows=") != std::string::npos) == row.merges,
                    context << ": " << config);
      CHECK_MESSAGE((config.find("key_splits=") != std::string::npos) == row.splits, context << ": " << config);
      run_fast_case(handles, workspace, fast_case);
    }
  }
}

TEST_CASE("fast forward: per-batch key lengths, and NaN in K and V past them") {
  // FFPA_ATTENTION_KEY_LENGTHS: entries of no key, one key, a partial tile and all keys, counts
  // out of range (clamped), both causal alignments, GQA decode (its heads as rows, split-KV); on
  // the mma.sync forward, and on an H100 on the Hopper forward (the row split up to d_v 256 by
  // default; the split of the columns on one CTA, K and V shared by two with the multicast knob,
  // clusters of two for d_v above 512), against the reference path and float64 attention, with
  // NaN in every element of K and V past each entry's keys (the Hopper forward loads some and
  // must zero V's).
  struct LengthRow {
    ShapeRow shape;
    std::vector<int64_t> lengths;
  };
  const LengthRow rows[] = {
      {{4, 2, 1, 37, 300, 64, 64, CausalMask::none, DType::float16, LayoutKind::bhnd}, {0, 1, 130, 300}},
      {{3, 2, 2, 70, 200, 128, 96, CausalMask::bottom_right, DType::bfloat16, LayoutKind::bnhd}, {200, 65, 20}},
      {{3, 4, 2, 50, 150, 320, 320, CausalMask::top_left, DType::float16, LayoutKind::padded_aligned},
       {-5, 999, 100}},
      {{2, 8, 1, 1, 2000, 128, 128, CausalMask::none, DType::bfloat16, LayoutKind::bhnd}, {1500, 37}},
      {{2, 32, 1, 1, 3000, 576, 512, CausalMask::bottom_right, DType::bfloat16, LayoutKind::bhnd}, {3000, 1111}},
      {{2, 2, 2, 300, 700, 512, 512, CausalMask::bottom_right, DType::float16, LayoutKind::bhnd}, {333, 700}},
      {{2, 2, 1, 200, 500, 1024, 1024, CausalMask::none, DType::bfloat16, LayoutKind::bnhd}, {257, 450}},
  };
  Workspace workspace;
  uint64_t start = 47200;
  // mma.sync; the Hopper forward; the Hopper forward with K and V shared between row tiles.
  for (const int kernels : {0, 1, 2}) {
    if (kernels > 0 && !hopper_runs_here()) continue;
    Handles handles(kernels > 0);
    if (kernels == 2) handles.set_fast_policy(FFPA_POLICY_HOPPER_KV_MULTICAST, 1);
    for (const LengthRow& row : rows) {
      FastCase fast_case;
      fast_case.test = {row.shape.config(), true, start++};
      fast_case.test.config.problem.key_lengths = row.lengths;
      fast_case.accumulator = FFPA_ACCUMULATOR_F32;
      run_fast_case(handles, workspace, fast_case, [&](DeviceProblem& problem) {
        nan_past_key_lengths(problem);
        if (kernels == 0) return;
        // On an H100 the problem stays on the Hopper forward, both of whose splits read the counts.
        const std::string kernel = planned_kernel(handles.fast(FFPA_ACCUMULATOR_F32), descriptors_of(problem, true));
        CHECK_MESSAGE(kernel.rfind("sm90.forward", 0) == 0, kernel);
        if (kernels == 1 && row.shape.dv <= 64) CHECK_MESSAGE(kernel.find(".row_split") != std::string::npos, kernel);
      });
    }
  }
}

TEST_CASE("runtime autotune of a problem with per-batch key lengths reads no counts while it plans") {
  // GQA decode split across CTAs (split-KV's choices among the candidates): the workspace query
  // tunes with a count pointer that is not yet valid; the call then reads the real counts.
  Handle handle;
  handle.set_policy(FFPA_POLICY_AUTOTUNE, 1);
  handle.set_policy(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, 1);
  ProblemConfig config = make_config(attention_shape(2, 16, 2, 1, 4000, 128, 128, CausalMask::none),
                                     DType::bfloat16, LayoutKind::bhnd, 0.0);
  config.problem.key_lengths = {4000, 333};
  DeviceProblem problem(config);
  problem.fill_inputs(47300);
  const int32_t* counts = nullptr;
  REQUIRE(ffpaGetAttentionAttribute(problem.attention.get(), FFPA_ATTENTION_KEY_LENGTHS, &counts, sizeof counts,
                                    nullptr) == FFPA_STATUS_SUCCESS);
  const int32_t* not_yet = reinterpret_cast<const int32_t*>(uintptr_t{16});  // no memory at all
  REQUIRE(ffpaSetAttentionAttribute(problem.attention.get(), FFPA_ATTENTION_KEY_LENGTHS, &not_yet, sizeof not_yet) ==
          FFPA_STATUS_SUCCESS);
  const std::string config_text = planned_config(handle, descriptors_of(problem, true));  // tunes
  CHECK_MESSAGE(config_text.find("autotuned(") != std::string::npos, config_text);
  REQUIRE(ffpaSetAttentionAttribute(problem.attention.get(), FFPA_ATTENTION_KEY_LENGTHS, &counts, sizeof counts) ==
          FFPA_STATUS_SUCCESS);
  Workspace workspace;
  problem.forward(handle, workspace, true);
  const CpuForward exact = cpu_forward(problem);
  const double rounding = rounding_error(exact.o, config.dtype).rel_l2;
  check_fast_outputs("autotuned decode with key lengths", problem, true, exact,
                     fast_bounds(config.dtype, FFPA_ACCUMULATOR_F32, rounding));
}

TEST_CASE("sm90 forward: the same call twice gives the same bits") {
  if (!hopper_runs_here()) return;
  // One CTA per 64 rows, and a cluster of two (which must also agree on the scores both CTAs
  // complete from their partials).
  for (const int64_t dim : {int64_t{512}, int64_t{768}}) {
  const TestCase test{make_config(attention_shape(2, 4, 2, 333, 517, dim + 64, dim, CausalMask::bottom_right),
                                  DType::bfloat16, LayoutKind::bnhd, 0.0),
                      true, 46100 + static_cast<uint64_t>(dim)};
  Handle fast;
  fast.set_policy(FFPA_POLICY_HOPPER_KERNELS, 1);
  Workspace workspace;
  const std::string context = test.to_string();
  DeviceProblem problem(test.config);
  problem.fill_inputs(test.start);
  const std::string kernel = planned_kernel(fast, descriptors_of(problem, true));
  REQUIRE_MESSAGE(kernel.rfind(kHopperPrefix, 0) == 0, context << ": planned " << kernel);
  problem.forward(fast, workspace, true);
  const HostTensor first_o = problem.o.host;
  const HostTensor first_lse = problem.lse.host;
  const CpuForward exact = cpu_forward(problem);
  const double rounding = rounding_error(exact.o, test.config.dtype).rel_l2;
  check_fast_outputs(context, problem, true, exact, fast_bounds(test.config.dtype, FFPA_ACCUMULATOR_F32, rounding));
  problem.forward(fast, workspace, true);  // poisons the outputs first
  CHECK_MESSAGE(std::memcmp(first_o.data(), problem.o.host.data(), first_o.size_bytes()) == 0,
                context << ": O differs between two runs");
  CHECK_MESSAGE(std::memcmp(first_lse.data(), problem.lse.host.data(), first_lse.size_bytes()) == 0,
                context << ": LSE differs between two runs");
  }
}

// Two shapes for the knobs of the Hopper forward: one row tile per CTA pair and an odd count of
// them, both causal alignments, grouped queries, both dtypes and layouts.
static const TestCase kHopperKnobCases[] = {
      {make_config(attention_shape(1, 4, 2, 300, 700, 512, 512, CausalMask::bottom_right), DType::bfloat16,
                   LayoutKind::bhnd, 0.0),
       true, 46200},
      {make_config(attention_shape(2, 2, 1, 257, 193, 320, 320, CausalMask::top_left), DType::float16,
                   LayoutKind::bnhd, 0.0),
       true, 46201},
};

// Runs `test` in `problem` on `fast`, which must plan the Hopper forward for it, and checks O (and
// LSE) against float64 attention with the bounds of fp32 accumulation; returns the planned kernel.
static std::string check_hopper_forward(Handle& fast, Workspace& workspace, const TestCase& test,
                                        const std::string& context, DeviceProblem& problem) {
  problem.fill_inputs(test.start);
  const std::string kernel = planned_kernel(fast, descriptors_of(problem, test.with_lse));
  REQUIRE_MESSAGE(kernel.rfind(kHopperPrefix, 0) == 0, context << ": planned " << kernel);
  problem.forward(fast, workspace, test.with_lse);
  const CpuForward exact = cpu_forward(problem);
  const double rounding = rounding_error(exact.o, test.config.dtype).rel_l2;
  check_fast_outputs(context, problem, test.with_lse, exact,
                     fast_bounds(test.config.dtype, FFPA_ACCUMULATOR_F32, rounding));
  return kernel;
}

TEST_CASE("sm90 forward: exp2 emulated for 4 and 8 of every 8 column groups is as accurate") {
  if (!hopper_runs_here()) return;
  // The bounds of the special-function unit's exp2: the polynomial (8.6e-5 relative) must fit.
  Workspace workspace;
  for (const int emulated : {4, 8}) {
    Handle fast;
    fast.set_policy(FFPA_POLICY_HOPPER_KERNELS, 1);
    fast.set_policy(FFPA_POLICY_EXP2_EMULATION, emulated);
    for (const TestCase& test : kHopperKnobCases) {
      DeviceProblem problem(test.config);
      check_hopper_forward(fast, workspace, test, test.to_string() + ", exp2 emulated " + std::to_string(emulated) + "/8",
                           problem);
    }
  }
}

TEST_CASE("sm90 forward: CTAs of two row tiles sharing K and V through TMA multicast") {
  if (!hopper_runs_here()) return;
  // FFPA_POLICY_HOPPER_KV_MULTICAST: clusters of two CTAs on adjacent row tiles, each loading half
  // of every K and V tile into both. An odd number of row tiles (the last CTA past the rows),
  // causal masks under which the pair's two row tiles see different KV tiles, rows that see no
  // key, GQA, d_qk != d_v; every call also repeated for the same bits.
  std::vector<TestCase> tests(std::begin(kHopperKnobCases), std::end(kHopperKnobCases));
  tests.insert(tests.end(), {
      {make_config(attention_shape(1, 3, 3, 1000, 1000, 576, 512, CausalMask::none), DType::bfloat16,
                   LayoutKind::padded_aligned, 0.0),
       false, 46302},
      {make_config(attention_shape(1, 2, 2, 200, 70, 384, 448, CausalMask::bottom_right), DType::float16,
                   LayoutKind::bhnd, 0.0),
       true, 46303},
  });
  Handle fast;
  fast.set_policy(FFPA_POLICY_HOPPER_KERNELS, 1);
  fast.set_policy(FFPA_POLICY_HOPPER_KV_MULTICAST, 1);
  Workspace workspace;
  for (const TestCase& test : tests) {
    const std::string context = test.to_string() + ", K and V multicast";
    DeviceProblem problem(test.config);
    const std::string kernel = check_hopper_forward(fast, workspace, test, context, problem);
    const bool shared = kernel.size() > 4 && kernel.compare(kernel.size() - 4, 4, ".kv2") == 0;
    CHECK_MESSAGE(shared, context << ": planned " << kernel);
    const HostTensor first_o = problem.o.host;
    problem.forward(fast, workspace, test.with_lse);  // poisons the outputs first
    CHECK_MESSAGE(std::memcmp(first_o.data(), problem.o.host.data(), first_o.size_bytes()) == 0,
                  context << ": O differs between two runs");
  }
}

TEST_CASE("sm90 forward: element offsets past 2^31 (sampled rows against float64)") {
  if (!hopper_runs_here()) return;
  // The TMA maps step over batches and heads with 64-bit byte strides, the output with 64-bit
  // element offsets: 65 x 1024 x 64 x 512 = 2^31 + 2^25 elements in Q and O (4.1 GB each).
  check_large_offsets(make_config(attention_shape(65, 64, 8, 1024, 700, 512, 512, CausalMask::bottom_right),
                                  DType::float16, LayoutKind::bnhd, 0.0),
                      45100, true);
}

// Runs `test` on `handle`, which must plan `kernel` for it, against float64 attention with the
// bounds of fp32 accumulation.
// `setting`: a part the plan's config must name besides "tuned(" (none when empty).
void check_planned_forward(Handle& handle, Workspace& workspace, const TestCase& test, const std::string& kernel,
                           const std::string& setting = "") {
  const std::string context = test.to_string() + " [" + kernel + "]";
  if (!runs_on_this_build(context, test.config.problem.dim_v)) return;
  DeviceProblem problem(test.config);
  problem.fill_inputs(test.start);
  const ForwardDescriptors descriptors = descriptors_of(problem, test.with_lse);
  const std::string planned = planned_kernel(handle, descriptors);
  CHECK_MESSAGE(planned == kernel, context << ": planned " << planned);
  if (planned != kernel) return;
  const std::string config = planned_config(handle, descriptors);
  CHECK_MESSAGE(config.find("tuned(") != std::string::npos, context << ": no tuned config in " << config);
  CHECK_MESSAGE(config.find(setting) != std::string::npos, context << ": no " << setting << " in " << config);
  problem.forward(handle, workspace, test.with_lse);
  const CpuForward exact = cpu_forward(problem);
  const double rounding = rounding_error(exact.o, test.config.dtype).rel_l2;
  check_fast_outputs(context, problem, test.with_lse, exact,
                     fast_bounds(test.config.dtype, FFPA_ACCUMULATOR_F32, rounding));
}

TEST_CASE("launch parameters no knob sets: every instance a tuned config picks computes correctly") {
  Workspace workspace;
  // The mma.sync forward at d_v <= 128: 32- and 64-key tiles (tile_keys), whichever the device's
  // default is; tails, both causal alignments, GQA, both dtypes.
  const TestCase small[] = {
      {make_config(attention_shape(1, 4, 2, 300, 700, 128, 128, CausalMask::bottom_right), DType::float16,
                   LayoutKind::bhnd, 0.0),
       true, 46400},
      {make_config(attention_shape(2, 2, 1, 257, 193, 96, 112, CausalMask::top_left), DType::bfloat16,
                   LayoutKind::bnhd, 0.0),
       true, 46401},
  };
  for (const int keys : {32, 64}) {
    const std::string config = R"({"tile_keys": )" + std::to_string(keys) + "}";
    const TunedConfigDirectory dir("tile-keys-" + std::to_string(keys),
                                   forward_entry("sm80.forward", "fp16", 128, config) + "," +
                                       forward_entry("sm80.forward", "bf16", 128, config));
    Handle handle;
    handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 0);  // on an H100 the Hopper forward serves d_v 128
    dir.use(handle);
    for (const TestCase& test : small) {
      const char* dtype = test.config.dtype == DType::float16 ? "f16" : "bf16";
      check_planned_forward(handle, workspace, test,
                            std::string("sm80.forward.") + dtype + ".d128.acc_f32.v_s2r" + (keys == 64 ? ".bc64" : ""));
    }
  }
  if (!hopper_runs_here()) return;
  // The Hopper forward with the split of the columns between its consumers that is not the
  // default: one CTA skewed (consumer 1 with 320 columns at d_v 512), clusters even; and one CTA
  // whose consumer 1 runs a tile behind (overlap, the default) or not, with either split; the row
  // split with its consumers issuing their products freely instead of taking turns (pingpong 0),
  // and with KV tiles of 64 keys where 128 is the default (tile_keys 64, d_v up to 128).
  const std::string even = R"({"split": 0})";
  const std::string skewedOverlap = R"({"split": 1, "overlap": 1})", overlap = R"({"overlap": 1})";
  const std::string skewedApart = R"({"split": 1, "overlap": 0})", apart = R"({"overlap": 0})";
  const TunedConfigDirectory dir(
      "split", forward_entry("sm90.forward", "bf16", 512, skewedOverlap) + "," +
                   forward_entry("sm90.forward", "fp16", 448, skewedApart) + "," +
                   forward_entry("sm90.forward", "fp16", 384, apart) + "," +
                   forward_entry("sm90.forward", "bf16", 320, overlap) + "," +
                   forward_entry("sm90.forward", "bf16", 1024, even) + "," +
                   forward_entry("sm90.forward", "fp16", 768, even) + "," +
                   forward_entry("sm90.forward", "fp16", 128, R"({"row_split": 0})") + "," +
                   forward_entry("sm90.forward", "bf16", 256, R"({"row_split": 0, "overlap": 0})") + "," +
                   forward_entry("sm90.forward", "bf16", 192, R"({"pingpong": 0})") + "," +
                   forward_entry("sm90.forward", "fp16", 64, R"({"pingpong": 0, "tile_keys": 64})") + "," +
                   forward_entry("sm90.forward", "bf16", 64, R"({"pingpong": 0})") + "," +
                   forward_entry("sm90.forward", "bf16", 128, R"({"tile_keys": 64})"));
  Handle handle;
  handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 1);
  dir.use(handle);
  struct Case {
    TestCase test;
    const char* kernel;
    const char* setting;
  };
  const Case cases[] = {
      {{make_config(attention_shape(1, 4, 2, 300, 700, 576, 512, CausalMask::bottom_right), DType::bfloat16,
                    LayoutKind::bhnd, 0.0),
        true, 46410},
       "sm90.forward.bf16.d512.skewed", "overlap=1"},
      {{make_config(attention_shape(2, 3, 1, 333, 901, 384, 384, CausalMask::none), DType::float16,
                    LayoutKind::bnhd, 0.0),
        true, 46414},
       "sm90.forward.f16.d384", "split=even overlap=0"},
      {{make_config(attention_shape(1, 2, 2, 190, 260, 64, 304, CausalMask::top_left), DType::bfloat16,
                    LayoutKind::padded_aligned, 0.0),
        false, 46415},
       "sm90.forward.bf16.d320", "overlap=1"},
      {{make_config(attention_shape(2, 2, 1, 257, 193, 448, 432, CausalMask::top_left), DType::float16,
                    LayoutKind::bnhd, 0.0),
        true, 46411},
       "sm90.forward.f16.d448.skewed", "overlap=0"},
      {{make_config(attention_shape(1, 2, 1, 200, 333, 1024, 1008, CausalMask::none), DType::bfloat16,
                    LayoutKind::padded_aligned, 0.0),
        true, 46412},
       "sm90.forward.bf16.d1024.even", "k_buffers=1"},
      {{make_config(attention_shape(1, 3, 3, 129, 70, 768, 768, CausalMask::bottom_right), DType::float16,
                    LayoutKind::bhnd, 0.0),
        false, 46413},
       "sm90.forward.f16.d768.even", "k_buffers=2"},
      // d_v up to 256 with the columns split instead of the rows (row_split 0).
      {{make_config(attention_shape(2, 4, 1, 300, 257, 128, 112, CausalMask::bottom_right), DType::float16,
                    LayoutKind::bnhd, 0.0),
        true, 46416},
       "sm90.forward.f16.d128", "columns=64+64 overlap=1"},
      {{make_config(attention_shape(1, 2, 2, 190, 333, 256, 256, CausalMask::top_left), DType::bfloat16,
                    LayoutKind::bhnd, 0.0),
        true, 46417},
       "sm90.forward.bf16.d256", "columns=128+128 overlap=0"},
      // The row split without its consumers' turns.
      {{make_config(attention_shape(1, 4, 2, 333, 300, 160, 176, CausalMask::bottom_right), DType::bfloat16,
                    LayoutKind::bnhd, 0.0),
        true, 46418},
       "sm90.forward.bf16.d192.row_split", "pingpong=0"},
      {{make_config(attention_shape(2, 2, 1, 257, 190, 48, 48, CausalMask::none), DType::float16,
                    LayoutKind::padded_aligned, 0.0),
        false, 46419},
       "sm90.forward.f16.d64.row_split", "Bc=64 "},
      // 300 keys: the last 128-key tile's second box lies wholly past the keys (TMA fills it
      // with zeros and still counts its bytes).
      {{make_config(attention_shape(1, 4, 1, 461, 300, 64, 64, CausalMask::top_left), DType::bfloat16,
                    LayoutKind::bnhd, 0.0),
        true, 46420},
       "sm90.forward.bf16.d64.row_split.bc128", "pingpong=0"},
      // The row split's KV tiles of 64 keys at d_v 128 (128 by default).
      {{make_config(attention_shape(2, 2, 2, 301, 515, 128, 128, CausalMask::bottom_right), DType::bfloat16,
                    LayoutKind::bhnd, 0.0),
        true, 46421},
       "sm90.forward.bf16.d128.row_split", "Bc=64 "},
  };
  for (const Case& c : cases) check_planned_forward(handle, workspace, c.test, c.kernel, c.setting);
}

TEST_CASE("split-KV's launch parameters from decode entries: no split, and runs of at least 16 KV tiles") {
  Workspace workspace;
  // Decode whose grid leaves SMs idle: MLA of one sequence (576/512, its 128 query heads as rows)
  // and GQA at d 128; their decode entries (seqlen_q 1) are found by the call's one query row.
  const TestCase tests[] = {
      {make_config(attention_shape(1, 128, 1, 1, 8192, 576, 512, CausalMask::none), DType::bfloat16,
                   LayoutKind::bhnd, 0.0),
       true, 47100},
      {make_config(attention_shape(1, 16, 2, 1, 6000, 128, 128, CausalMask::none), DType::float16,
                   LayoutKind::bnhd, 0.0),
       true, 47101},
  };
  for (const bool hopper : {false, true}) {
    if (hopper && !hopper_runs_here()) continue;
    for (const bool off : {true, false}) {
      const std::string config = off ? R"({"split_kv": 0})" : R"({"split_min_tiles": 16})";
      std::string entries;
      for (const char* kernel : {"sm80.forward", "sm90.forward"}) {
        for (const char* dtype : {"bf16", "fp16"}) {
          for (const int dim : {128, 512}) {
            entries += std::string(entries.empty() ? "" : ",") + R"({"direction": "forward", "kernel": ")" +
                       kernel + R"(", "dtype": ")" + dtype + R"(", "head_dim": )" + std::to_string(dim) +
                       R"(, "seqlen_q": 1, "seqlen_kv": 8192, "config": )" + config + "}";
          }
        }
      }
      const TunedConfigDirectory dir(off ? "decode-unsplit" : "decode-long-runs", entries);
      Handle tuned, plain;
      for (Handle* h : {&tuned, &plain}) h->set_policy(FFPA_POLICY_HOPPER_KERNELS, hopper ? 1 : 0);
      plain.set_policy(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, 1);
      dir.use(tuned);
      for (const TestCase& test : tests) {
        if (!runs_on_this_build(test.to_string(), test.config.problem.dim_v)) continue;
        const DeviceProblem problem(test.config);
        const ForwardDescriptors descriptors = descriptors_of(problem, test.with_lse);
        const std::string untuned = planned_config(plain, descriptors);
        CHECK_MESSAGE(untuned.find("key_splits=") != std::string::npos, test.to_string() << ": " << untuned);
        // The kernel the defaults plan, with the entry's split.
        check_planned_forward(tuned, workspace, test, planned_kernel(plain, descriptors),
                              off ? "query_heads_as_rows=" : "key_splits=");
        const std::string chosen = planned_config(tuned, descriptors);
        if (off) {
          CHECK_MESSAGE(chosen.find("key_splits=") == std::string::npos, test.to_string() << ": " << chosen);
        } else {
          const size_t at = chosen.find("split_tiles=");
          CHECK_MESSAGE((at != std::string::npos && std::stoi(chosen.substr(at + 12)) >= 16),
                        test.to_string() << ": " << chosen);
        }
      }
    }
  }
}

TEST_SUITE_END();
