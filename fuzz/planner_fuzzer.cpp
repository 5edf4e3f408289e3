// The planner: an arbitrary problem (extents up to 2^31 - 1, strided layouts, grouped-query heads,
// causal masks, Dqk != Dv, with or without log-sum-exp, forward or backward) built the way the C
// API builds it (makeTensorLayout, then forwardProblem / backwardProblem), arbitrary policies and
// an arbitrary described device, planned by the built-in kernels for a device without runtime.
// Every refusal must be a well-formed ffpa::Error; every plan must be complete and consistent, and
// planning must be a function of the plan key.
#include "core/descriptors.h"
#include "core/device.h"
#include "core/plan_cache.h"
#include "core/plan_key.h"
#include "core/planner.h"
#include "core/policy.h"
#include "core/problem.h"
#include "core/workspace_layout.h"
#include "reference/chunking.h"
#include "reference/reference_plans.h"
#include "support/byte_reader.h"
#include "support/fuzz_checks.h"
#include "support/strided_layouts.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using ffpa_fuzz::ByteReader;
using ffpa_fuzz::completesOrThrowsFfpaError;
using ffpa_fuzz::expect;

namespace {

constexpr int64_t kMaxExtent = (int64_t{1} << 31) - 1;

// --- Shapes and layouts --------------------------------------------------------------------------

int64_t takeCount(ByteReader& in) {
  switch (in.takeIndex(5)) {
    case 0: return 1 + in.takeIndex(4);
    case 1: return 1 + in.take<uint8_t>();
    case 2: return in.pick({int64_t{1}, kMaxExtent, kMaxExtent - 1, int64_t{65536}, int64_t{1} << 20,
                            int64_t{46341}, int64_t{0}, kMaxExtent + 1});
    case 3: return in.take<uint32_t>() & 0x7fffffffu;
    default: return in.take<int64_t>();
  }
}

int64_t takeHeadDim(ByteReader& in) {
  switch (in.takeIndex(3)) {
    case 0: return in.pick({int64_t{64}, int64_t{128}, int64_t{256}, int64_t{320}, int64_t{512}, int64_t{576},
                            int64_t{1024}, int64_t{1025}, int64_t{1}, int64_t{0}, int64_t{16}, int64_t{96}});
    case 1: return 1 + in.take<uint16_t>() % FFPA_MAX_HEAD_DIM;
    default: return takeCount(in);
  }
}

// The extents of one problem, as the caller means them; the layouts may still disagree.
struct Shape {
  int64_t batch, headsQ, headsKv, seqQ, seqKv, headDimQk, headDimV;
};

Shape takeShape(ByteReader& in) {
  Shape s{};
  s.batch = takeCount(in);
  s.headsKv = takeCount(in);
  const int64_t group = takeCount(in);
  // The product may leave the extent range: the layout must then be refused, not wrap.
  const __int128 headsQ = __int128{s.headsKv} * group;
  s.headsQ = static_cast<int64_t>(std::clamp<__int128>(headsQ, std::numeric_limits<int64_t>::min(),
                                                       std::numeric_limits<int64_t>::max()));
  s.seqQ = takeCount(in);
  s.seqKv = in.takeBool() ? s.seqQ : takeCount(in);
  s.headDimQk = takeHeadDim(in);
  s.headDimV = in.takeBool() ? s.headDimQk : takeHeadDim(in);
  return s;
}

// Strides of one tensor: packed (NULL); the two layouts attention tensors come in, [B, H, N, D]
// with N or H next to D, padded except on D, whose unit stride the problem checks demand; any
// order of the dimensions; or raw values.
std::vector<int64_t> takeStrides(ByteReader& in, const std::vector<int64_t>& dims) {
  auto padding = [&](size_t i) { return i == 3 || in.takeBool() ? 0 : in.takeIndex(64); };
  std::vector<size_t> rowMajor(dims.size());  // innermost first: D (or N for the LSE), N, H, B
  for (size_t i = 0; i < rowMajor.size(); ++i) rowMajor[i] = rowMajor.size() - 1 - i;
  std::vector<size_t> headsInner = rowMajor;  // BNHD: H inside N
  if (dims.size() >= 3) std::swap(*std::find(headsInner.begin(), headsInner.end(), 1),
                                  *std::find(headsInner.begin(), headsInner.end(), 2));
  switch (in.takeIndex(6)) {
    case 0:
    case 1: return {};  // NULL: packed row-major
    case 2: return ffpa_fuzz::stridesInOrder(dims, rowMajor, padding);
    case 3: return ffpa_fuzz::stridesInOrder(dims, headsInner, padding);
    case 4: return ffpa_fuzz::takePermutedStrides(in, dims);
    default: return ffpa_fuzz::takeRawStrides(in, dims.size());
  }
}

// One tensor: the intended extents and type, sometimes perturbed so that the problem checks fire.
bool makeLayout(ByteReader& in, std::vector<int64_t> dims, ffpaDataType_t dtype, ffpa::TensorLayout& layout) {
  switch (in.takeIndex(16)) {
    case 0: dims[in.takeIndex(dims.size())] ^= 1; break;  // one more or one less, never overflowing
    case 1: dtype = static_cast<ffpaDataType_t>(in.takeIndex(3)); break;
    case 2: dims.pop_back(); break;  // a rank the role does not take
    default: break;
  }
  const std::vector<int64_t> strides = takeStrides(in, dims);
  return completesOrThrowsFfpaError("makeTensorLayout", [&] {
    layout = ffpa::makeTensorLayout(dtype, static_cast<int32_t>(dims.size()), dims.data(),
                                    strides.empty() ? nullptr : strides.data());
  });
}

// --- Policies and device -------------------------------------------------------------------------

void takePolicy(ByteReader& in, ffpa::Policy& policy) {
  const auto& specs = ffpa::knobSpecs();
  const int settings = static_cast<int>(in.takeIndex(6));
  for (int i = 0; i < settings; ++i) {
    const ffpa::KnobSpec& spec = specs[in.takeIndex(specs.size())];
    if (spec.type == FFPA_POLICY_TYPE_STRING) {
      const std::string dir = in.takeText(32);
      completesOrThrowsFfpaError("setPolicyFromBytes", [&] {
        ffpa::setPolicyFromBytes(policy, spec.knob, dir.c_str(), dir.size() + 1);
      });
      continue;
    }
    int64_t value = in.takeBool() ? spec.minValue + static_cast<int64_t>(in.takeIndex(5))
                                  : in.pick({spec.maxValue, spec.defaultValue, int64_t{4096}, int64_t{1} << 50,
                                             int64_t{100000}, int64_t{-1}});
    if (in.takeIndex(8) == 0) value = in.take<int64_t>();
    completesOrThrowsFfpaError("setPolicyFromBytes", [&] {
      if (spec.type == FFPA_POLICY_TYPE_INT64) {
        ffpa::setPolicyFromBytes(policy, spec.knob, &value, sizeof value);
      } else {
        const auto narrow = static_cast<int32_t>(value);
        ffpa::setPolicyFromBytes(policy, spec.knob, &narrow, sizeof narrow);
      }
    });
  }
}

// A described device, validated as ffpaCreateForDevice validates it; an A100 when refused.
ffpa::DeviceInfo takeDevice(ByteReader& in) {
  ffpaDeviceDesc_t desc{};
  desc.structSize = sizeof desc;
  desc.ordinal = in.takeIndex(4);
  desc.smVersion = in.pick({80, 86, 89, 90, 100, 120, 75, 999, 1000});
  desc.smCount = in.takeBool() ? 1 + in.take<uint8_t>() : in.take<int32_t>();
  desc.sharedMemPerBlockOptin = in.pick({int64_t{48} << 10, int64_t{99} << 10, int64_t{163} << 10,
                                         int64_t{227} << 10, int64_t{16} << 20, (int64_t{48} << 10) - 1});
  desc.sharedMemPerSm = desc.sharedMemPerBlockOptin + (in.takeBool() ? 1024 : -1);
  desc.globalMemBytes = in.takeBool() ? int64_t{80} << 30 : in.take<int64_t>();
  std::strncpy(desc.name, "fuzzed device", sizeof desc.name - 1);

  ffpa::DeviceInfo device;
  if (completesOrThrowsFfpaError("deviceFromDesc", [&] { device = ffpa::deviceFromDesc(&desc); })) return device;
  device.smVersion = 80;
  device.smCount = 108;
  device.sharedMemPerBlockOptin = 163 * 1024;
  device.sharedMemPerSm = 164 * 1024;
  device.globalMemBytes = int64_t{80} << 30;
  device.name = "A100";
  return device;
}

ffpa::AttentionSettings takeSettings(ByteReader& in) {
  ffpa::AttentionSettings settings;
  const int32_t causal = in.takeIndex(3);
  const float scale = in.takeBool() ? 0.0f : in.pick({0.125f, 1.0f, 1e-30f, 1e30f, 0.0441941738f});
  completesOrThrowsFfpaError("setAttentionAttribute", [&] {
    ffpa::setAttentionAttribute(settings, FFPA_ATTENTION_CAUSAL_MODE, &causal, sizeof causal);
    if (scale > 0.0f) ffpa::setAttentionAttribute(settings, FFPA_ATTENTION_SOFTMAX_SCALE, &scale, sizeof scale);
  });
  return settings;
}

// --- Checks on what the planner made ---------------------------------------------------------------

void checkPlan(const ffpa::Plan& plan, const ffpa::Policy& policy) {
  expect(!plan.kernel.empty() && !plan.config.empty(), "a plan without kernel name or configuration");
  expect(plan.payload != nullptr, "plan " + plan.kernel + " has no payload");
  expect(plan.workspaceBytes >= plan.kernelWorkspaceBytes, "plan " + plan.kernel + ": workspace " +
         std::to_string(plan.workspaceBytes) + " < kernel workspace " + std::to_string(plan.kernelWorkspaceBytes));
  expect(plan.workspaceBytes % ffpa::kWorkspaceAlignment == 0 &&
             plan.kernelWorkspaceBytes % ffpa::kWorkspaceAlignment == 0,
         "plan " + plan.kernel + ": workspace sizes " + std::to_string(plan.kernelWorkspaceBytes) + " / " +
             std::to_string(plan.workspaceBytes) + " are not multiples of 256");
  if (policy.flag(FFPA_POLICY_SANITY_CHECK)) {
    expect(plan.sanityScratchOffset >= plan.kernelWorkspaceBytes &&
               plan.sanityScratchOffset % ffpa::kWorkspaceAlignment == 0 &&
               plan.sanityScratchOffset + ffpa::kSanityScratchBytes <= plan.workspaceBytes,
           "plan " + plan.kernel + ": the sanity check's scratch is misplaced");
  }
}

// The reference path's chunking: within cuBLASLt's int32 extents, covering every unit and row.
void checkChunks(const ffpa::AttentionProblem& problem, const ffpa::Policy& policy) {
  const auto chunks = ffpa::reference::chooseChunks(problem, policy.value(FFPA_POLICY_REFERENCE_CHUNK_BYTES));
  const std::string what = ffpa::reference::describeChunks(chunks, problem.seqQ);
  expect(chunks.units == problem.batch * problem.headsKv && chunks.group == problem.groupSize(), what);
  expect(chunks.unitsPerChunk >= 1 && chunks.unitsPerChunk <= std::min<int64_t>(chunks.units, INT32_MAX),
         "units per chunk out of range: " + what);
  expect(chunks.rowsPerChunk >= 1 && chunks.rowsPerChunk <= problem.seqQ &&
             chunks.group * chunks.rowsPerChunk <= INT32_MAX,
         "rows per chunk out of range: " + what);
  const auto shapes = ffpa::reference::chunkShapes(chunks, problem.seqQ);
  expect(!shapes.empty() && shapes.size() <= 4, "chunk shapes of " + what);
}

bool samePlan(const ffpa::Plan& a, const ffpa::Plan& b) {
  return a.kernel == b.kernel && a.config == b.config && a.skipped == b.skipped &&
         a.kernelWorkspaceBytes == b.kernelWorkspaceBytes && a.workspaceBytes == b.workspaceBytes &&
         a.sanityScratchOffset == b.sanityScratchOffset;
}

// A request that differs only where the plan key does not look: the softmax scale (given at
// launch), the knobs that cannot change a plan, the device's properties outside the key.
struct Request {
  ffpa::AttentionProblem problem;
  ffpa::Policy policy;
  ffpa::DeviceInfo device;
};

Request takeKeyTwin(ByteReader& in, const Request& original) {
  Request twin = original;
  twin.problem.scale = in.pick({0.5f, 3.0f, 1e-20f, 1e20f});
  for (const ffpa::KnobSpec& spec : ffpa::knobSpecs()) {
    if (spec.affectsPlan) continue;
    twin.policy.setValue(spec.knob, spec.minValue + static_cast<int64_t>(in.takeIndex(spec.maxValue - spec.minValue + 1)));
  }
  twin.device.name = "another device";
  twin.device.globalMemBytes = 1 + in.take<uint32_t>();
  return twin;
}

// A request that differs in one thing the key must tell apart.
Request takeKeyRival(ByteReader& in, const Request& original) {
  Request rival = original;
  switch (in.takeIndex(6)) {
    case 0: rival.problem.causal = static_cast<ffpaCausalMode_t>((rival.problem.causal + 1) % 3); break;
    case 1: rival.problem.seqKv ^= 1; break;
    case 2: rival.problem.k[2] += 1; break;
    case 3: rival.device.smVersion += 1; break;
    // How many CTAs share an SM decides some defaults (the mma.sync forward's 64-key tiles).
    case 4: rival.device.sharedMemPerSm += 1024; break;
    default:
      rival.policy.setValue(FFPA_POLICY_REFERENCE_BACKEND, !rival.policy.flag(FFPA_POLICY_REFERENCE_BACKEND));
      break;
  }
  return rival;
}

ffpa::PlanKey keyOf(const Request& r) { return ffpa::PlanKey::make(r.problem, r.policy, r.device); }

void planAndCheck(ByteReader& in, const Request& request) {
  ffpa::PlanKey key;
  expect(completesOrThrowsFfpaError("PlanKey::make", [&] { key = keyOf(request); }),
         "PlanKey::make refused a checked problem");
  expect(key == keyOf(request) && key.hash() == keyOf(request).hash(), "PlanKey::make is not deterministic");
  expect(keyOf(takeKeyRival(in, request)) != key, "two requests that may need different plans share a key");
  const Request twin = takeKeyTwin(in, request);
  expect(keyOf(twin) == key, "the plan key changed with something that cannot change the plan");

  const ffpa::Planner planner(ffpa::builtinKernels());
  auto planFor = [&](const Request& r) { return planner.plan({r.problem, r.policy, r.device, nullptr}); };
  ffpa::Plan plan;
  if (!completesOrThrowsFfpaError("Planner::plan", [&] { plan = planFor(request); })) return;
  checkPlan(plan, request.policy);
  if (plan.kernel.rfind("reference.", 0) == 0) {
    expect(completesOrThrowsFfpaError("chooseChunks", [&] { checkChunks(request.problem, request.policy); }),
           "chooseChunks refused a problem the reference path planned");
  }
  ffpa::Plan twinPlan;
  expect(completesOrThrowsFfpaError("Planner::plan", [&] { twinPlan = planFor(twin); }) && samePlan(plan, twinPlan),
         "two requests with one plan key got different plans: the key misses something the planner uses");

  // Through a plan cache: the twin finds the plan cached for the original.
  ffpa::PlanCache cache(in.takeIndex(3));
  const auto first = cache.getOrCreate(key, [&] { return std::make_shared<const ffpa::Plan>(planFor(request)); });
  const auto second = cache.getOrCreate(keyOf(twin), [&] { return std::make_shared<const ffpa::Plan>(planFor(twin)); });
  const ffpa::PlanCacheStats stats = cache.stats();
  if (stats.capacity > 0) {
    expect(first == second && stats.hits == 1 && stats.misses == 1 && stats.size == 1, "the plan cache missed a key it holds");
  } else {
    expect(first != second && stats.size == 0 && stats.misses == 2, "a plan cache of capacity 0 kept a plan");
  }
  expect(samePlan(*first, plan), "the cached plan differs from the one planned directly");
}

// Policies with the info or debug level log every plan: the messages are checked and dropped
// rather than written to the fuzzer's output.
void checkLogMessage(ffpaLogLevel_t level, const char* message, void*) {
  expect(level >= FFPA_LOG_LEVEL_ERROR && level <= FFPA_LOG_LEVEL_DEBUG && message != nullptr && *message != '\0',
         "a log message without level or text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ffpa_fuzz::expectApiResult(ffpaSetLogCallback(checkLogMessage, nullptr), "ffpaSetLogCallback");
  ByteReader in(data, size);
  const bool backward = in.takeBool();
  const bool withLse = backward || in.takeBool();
  const auto dtype = static_cast<ffpaDataType_t>(in.takeIndex(3));
  const ffpa::AttentionSettings settings = takeSettings(in);
  const Shape s = takeShape(in);

  const std::vector<int64_t> qDims{s.batch, s.headsQ, s.seqQ, s.headDimQk};
  const std::vector<int64_t> kDims{s.batch, s.headsKv, s.seqKv, s.headDimQk};
  const std::vector<int64_t> vDims{s.batch, s.headsKv, s.seqKv, s.headDimV};
  const std::vector<int64_t> oDims{s.batch, s.headsQ, s.seqQ, s.headDimV};
  const std::vector<int64_t> lseDims{s.batch, s.headsQ, s.seqQ};
  ffpa::TensorLayout q, k, v, o, lse, dO, dq, dk, dv;
  if (!makeLayout(in, qDims, dtype, q) || !makeLayout(in, kDims, dtype, k) || !makeLayout(in, vDims, dtype, v) ||
      !makeLayout(in, oDims, dtype, o) || (withLse && !makeLayout(in, lseDims, FFPA_DATA_TYPE_FLOAT32, lse))) {
    return 0;
  }
  if (backward && (!makeLayout(in, oDims, dtype, dO) || !makeLayout(in, qDims, dtype, dq) ||
                   !makeLayout(in, kDims, dtype, dk) || !makeLayout(in, vDims, dtype, dv))) {
    return 0;
  }

  ffpa::Policy policy;
  takePolicy(in, policy);
  const ffpa::DeviceInfo device = takeDevice(in);

  ffpa::AttentionProblem problem;
  const bool checked = completesOrThrowsFfpaError(backward ? "backwardProblem" : "forwardProblem", [&] {
    problem = backward ? ffpa::backwardProblem(settings, {&q, &k, &v, &o, &dO, &lse, &dq, &dk, &dv})
                       : ffpa::forwardProblem(settings, q, k, v, o, withLse ? &lse : nullptr);
  });
  if (!checked) return 0;
  expect(problem.headsQ % problem.headsKv == 0 && problem.headDimQk <= FFPA_MAX_HEAD_DIM &&
             problem.headDimV <= FFPA_MAX_HEAD_DIM && problem.scale > 0.0f,
         "an inconsistent problem passed its checks: " + ffpa::describe(problem));
  planAndCheck(in, {problem, policy, device});
  return 0;
}
