// Attention: workspace queries and execution. Each call resolves and checks its arguments, plans
// (or finds the cached plan), checks pointers and workspace, and only then touches the device.
#include "api/boundary.h"
#include "api/operands.h"

#include "core/descriptors.h"
#include "core/handle.h"
#include "core/plan_launch.h"
#include "core/problem.h"
#include "core/workspace_layout.h"
#include "cp/context_parallel.h"

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>

namespace ffpa {
namespace {

constexpr uintptr_t kTensorAlignment = 16;

// An initializer_list, not a vector: the execute path allocates nothing, not even on the host.
void checkOperands(std::initializer_list<Operand> operands) {
  for (const Operand& op : operands) {
    if (op.layout == nullptr) continue;  // the workspace: checked by checkWorkspace
    requireNotNull(op.data, op.name);
    require(reinterpret_cast<uintptr_t>(op.data) % kTensorAlignment == 0,
            FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, op.name, " (", op.data,
            ") is not aligned to ", kTensorAlignment, " bytes");
  }
  for (const Operand& out : operands) {
    if (!out.isOutput || out.data == nullptr || out.spanBytes == 0) continue;
    for (const Operand& other : operands) {
      if (&out == &other || other.data == nullptr || other.spanBytes == 0) continue;
      require(!overlaps(out, other), FFPA_STATUS_BAD_PARAM, out.layout ? "output " : "", out.name,
              " overlaps ", other.name,
              "; outputs and the workspace must not share memory with any other buffer of the call");
    }
  }
}

void checkWorkspace(size_t needed, const void* workspace, size_t workspaceSize, const char* queryName) {
  require(workspaceSize >= needed, FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,
          "workspaceSize is ", workspaceSize, " bytes; this problem needs ", needed,
          " (see ", queryName, ")");
  if (needed == 0) return;
  requireNotNull(workspace, "workspace");
  require(reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlignment == 0,
          FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, "workspace (", workspace,
          ") is not aligned to ", kWorkspaceAlignment, " bytes");
}

// The part of the workspace the plan uses, as an operand that must overlap no tensor.
Operand workspaceOperand(size_t bytes, const void* workspace) {
  return {"workspace", workspace, nullptr, static_cast<int64_t>(bytes), true};
}

// Why a call plans: to size or describe (may tune: allocate and synchronize), or to execute (may
// not; see core/autotune.h).
enum class Purpose { Prepare, Execute };

// A planned call: one plan, or, for a descriptor with a context-parallel object, the ring plan
// of this rank (one plan per block of each step).
struct PlannedCall {
  Context& context;
  CallSnapshot snapshot;
  AttentionProblem problem;
  std::shared_ptr<const Plan> plan;
  std::shared_ptr<cp::ContextParallel> contextParallel;
  std::shared_ptr<const cp::RingPlan> ring;

  size_t workspaceBytes() const { return ring ? ring->workspaceBytes : plan->workspaceBytes; }
};

PlannedCall planned(Context& context, CallSnapshot snapshot, AttentionProblem problem,
                    const AttentionSettings& settings, Purpose purpose) {
  const bool mayTune = purpose == Purpose::Prepare;
  if (settings.contextParallel) {
    auto ring = settings.contextParallel->plan(context, *snapshot.policy, mayTune, problem, settings.slices);
    return {context, std::move(snapshot), std::move(problem), nullptr, settings.contextParallel, std::move(ring)};
  }
  auto plan = context.plan(problem, *snapshot.policy, mayTune);
  return {context, std::move(snapshot), std::move(problem), std::move(plan), nullptr, nullptr};
}

PlannedCall planForward(ffpaHandle_t handle, ffpaAttentionDescriptor_t attn,
                        ffpaTensorDescriptor_t qDesc, ffpaTensorDescriptor_t kDesc,
                        ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
                        const TensorLayout* lse, Purpose purpose) {
  Context& context = contextOf(handle);
  CallSnapshot snapshot = context.snapshot();
  setCallLogLevel(snapshot.policy->logLevel());
  const AttentionSettings& settings = attentionSettings(attn, "attn");
  AttentionProblem problem = forwardProblem(settings, tensorLayout(qDesc, "qDesc"), tensorLayout(kDesc, "kDesc"),
                                            tensorLayout(vDesc, "vDesc"), tensorLayout(oDesc, "oDesc"), lse);
  return planned(context, std::move(snapshot), std::move(problem), settings, purpose);
}

BackwardLayouts backwardLayouts(ffpaTensorDescriptor_t qDesc, ffpaTensorDescriptor_t kDesc,
                                ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
                                ffpaTensorDescriptor_t doDesc, ffpaTensorDescriptor_t lseDesc,
                                ffpaTensorDescriptor_t dqDesc, ffpaTensorDescriptor_t dkDesc,
                                ffpaTensorDescriptor_t dvDesc) {
  return {&tensorLayout(qDesc, "qDesc"),   &tensorLayout(kDesc, "kDesc"),
          &tensorLayout(vDesc, "vDesc"),   &tensorLayout(oDesc, "oDesc"),
          &tensorLayout(doDesc, "doDesc"), &tensorLayout(lseDesc, "lseDesc"),
          &tensorLayout(dqDesc, "dqDesc"), &tensorLayout(dkDesc, "dkDesc"),
          &tensorLayout(dvDesc, "dvDesc")};
}

PlannedCall planBackward(ffpaHandle_t handle, ffpaAttentionDescriptor_t attn,
                         const BackwardLayouts& layouts, Purpose purpose) {
  Context& context = contextOf(handle);
  CallSnapshot snapshot = context.snapshot();
  setCallLogLevel(snapshot.policy->logLevel());
  const AttentionSettings& settings = attentionSettings(attn, "attn");
  AttentionProblem problem = backwardProblem(settings, layouts);
  return planned(context, std::move(snapshot), std::move(problem), settings, purpose);
}

void execute(const PlannedCall& call, const TensorArgs& tensors, void* workspace) {
  if (call.ring) {
    call.contextParallel->execute(call.context, call.snapshot, *call.ring, tensors, workspace);
  } else {
    launchPlan(call.context, call.snapshot, call.problem, *call.plan, tensors, workspace);
  }
}

// The text of ffpaDescribeAttention*Plan.
void describePlan(const PlannedCall& call, char* buffer, size_t size, size_t* length) {
  std::string text;
  if (call.ring) {
    text = cat("problem: ", describe(call.problem), "\n", cp::describeRing(*call.ring),
               "workspace: ", call.ring->workspaceBytes, " bytes\n");
  } else {
    const Plan& plan = *call.plan;
    text = cat("problem: ", describe(call.problem), "\nkernel: ", plan.kernel, "\nconfig: ", plan.config,
               "\nworkspace: ", plan.workspaceBytes, " bytes\n");
    std::istringstream skipped(plan.skipped);
    for (std::string line; std::getline(skipped, line);) text += cat("skipped: ", line, "\n");
  }
  const size_t whole = copyText(text, buffer, size);
  if (length != nullptr) *length = whole;
}

}  // namespace
}  // namespace ffpa

extern "C" {

FFPA_API ffpaStatus_t ffpaGetAttentionForwardWorkspaceSize(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    ffpaTensorDescriptor_t kDesc, ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
    ffpaTensorDescriptor_t lseDesc, size_t* bytes) {
  return ffpa::guarded("ffpaGetAttentionForwardWorkspaceSize", [&] {
    ffpa::requireNotNull(bytes, "bytes");
    const ffpa::TensorLayout* lse = lseDesc == nullptr ? nullptr : &ffpa::tensorLayout(lseDesc, "lseDesc");
    *bytes = ffpa::planForward(handle, attn, qDesc, kDesc, vDesc, oDesc, lse, ffpa::Purpose::Prepare)
                 .workspaceBytes();
  });
}

FFPA_API ffpaStatus_t ffpaDescribeAttentionForwardPlan(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    ffpaTensorDescriptor_t kDesc, ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
    ffpaTensorDescriptor_t lseDesc, char* buffer, size_t size, size_t* length) {
  return ffpa::guarded("ffpaDescribeAttentionForwardPlan", [&] {
    const ffpa::TensorLayout* lse = lseDesc == nullptr ? nullptr : &ffpa::tensorLayout(lseDesc, "lseDesc");
    ffpa::describePlan(ffpa::planForward(handle, attn, qDesc, kDesc, vDesc, oDesc, lse, ffpa::Purpose::Prepare),
                       buffer, size, length);
  });
}

FFPA_API ffpaStatus_t ffpaAttentionForward(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    const void* q, ffpaTensorDescriptor_t kDesc, const void* k, ffpaTensorDescriptor_t vDesc,
    const void* v, ffpaTensorDescriptor_t oDesc, void* o, ffpaTensorDescriptor_t lseDesc,
    float* lse, void* workspace, size_t workspaceSize) {
  return ffpa::guarded("ffpaAttentionForward", [&] {
    const ffpa::TensorLayout* lseLayout = ffpa::optionalLse(lseDesc, lse);
    const ffpa::PlannedCall call =
        ffpa::planForward(handle, attn, qDesc, kDesc, vDesc, oDesc, lseLayout, ffpa::Purpose::Execute);
    using ffpa::tensorOperand;
    const ffpa::Operand qOp = tensorOperand("q", q, &ffpa::tensorLayout(qDesc, "qDesc"), false);
    const ffpa::Operand kOp = tensorOperand("k", k, &ffpa::tensorLayout(kDesc, "kDesc"), false);
    const ffpa::Operand vOp = tensorOperand("v", v, &ffpa::tensorLayout(vDesc, "vDesc"), false);
    const ffpa::Operand oOp = tensorOperand("o", o, &ffpa::tensorLayout(oDesc, "oDesc"), true);
    const ffpa::Operand wsOp = ffpa::workspaceOperand(call.workspaceBytes(), workspace);
    if (lseLayout != nullptr) {
      ffpa::checkOperands({qOp, kOp, vOp, oOp, tensorOperand("lse", lse, lseLayout, true), wsOp});
    } else {
      ffpa::checkOperands({qOp, kOp, vOp, oOp, wsOp});
    }
    ffpa::checkWorkspace(call.workspaceBytes(), workspace, workspaceSize, "ffpaGetAttentionForwardWorkspaceSize");
    ffpa::TensorArgs tensors;
    tensors.q = q;
    tensors.k = k;
    tensors.v = v;
    tensors.out = o;
    tensors.lseOut = lse;
    ffpa::execute(call, tensors, workspace);
  });
}

FFPA_API ffpaStatus_t ffpaGetAttentionBackwardWorkspaceSize(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    ffpaTensorDescriptor_t kDesc, ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
    ffpaTensorDescriptor_t doDesc, ffpaTensorDescriptor_t lseDesc, ffpaTensorDescriptor_t dqDesc,
    ffpaTensorDescriptor_t dkDesc, ffpaTensorDescriptor_t dvDesc, size_t* bytes) {
  return ffpa::guarded("ffpaGetAttentionBackwardWorkspaceSize", [&] {
    ffpa::requireNotNull(bytes, "bytes");
    const ffpa::BackwardLayouts layouts = ffpa::backwardLayouts(
        qDesc, kDesc, vDesc, oDesc, doDesc, lseDesc, dqDesc, dkDesc, dvDesc);
    *bytes = ffpa::planBackward(handle, attn, layouts, ffpa::Purpose::Prepare).workspaceBytes();
  });
}

FFPA_API ffpaStatus_t ffpaDescribeAttentionBackwardPlan(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    ffpaTensorDescriptor_t kDesc, ffpaTensorDescriptor_t vDesc, ffpaTensorDescriptor_t oDesc,
    ffpaTensorDescriptor_t doDesc, ffpaTensorDescriptor_t lseDesc, ffpaTensorDescriptor_t dqDesc,
    ffpaTensorDescriptor_t dkDesc, ffpaTensorDescriptor_t dvDesc, char* buffer, size_t size,
    size_t* length) {
  return ffpa::guarded("ffpaDescribeAttentionBackwardPlan", [&] {
    const ffpa::BackwardLayouts layouts = ffpa::backwardLayouts(
        qDesc, kDesc, vDesc, oDesc, doDesc, lseDesc, dqDesc, dkDesc, dvDesc);
    ffpa::describePlan(ffpa::planBackward(handle, attn, layouts, ffpa::Purpose::Prepare), buffer, size, length);
  });
}

FFPA_API ffpaStatus_t ffpaAttentionBackward(
    ffpaHandle_t handle, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t qDesc,
    const void* q, ffpaTensorDescriptor_t kDesc, const void* k, ffpaTensorDescriptor_t vDesc,
    const void* v, ffpaTensorDescriptor_t oDesc, const void* o, ffpaTensorDescriptor_t doDesc,
    const void* dO, ffpaTensorDescriptor_t lseDesc, const float* lse,
    ffpaTensorDescriptor_t dqDesc, void* dq, ffpaTensorDescriptor_t dkDesc, void* dk,
    ffpaTensorDescriptor_t dvDesc, void* dv, void* workspace, size_t workspaceSize) {
  return ffpa::guarded("ffpaAttentionBackward", [&] {
    const ffpa::BackwardLayouts t = ffpa::backwardLayouts(
        qDesc, kDesc, vDesc, oDesc, doDesc, lseDesc, dqDesc, dkDesc, dvDesc);
    const ffpa::PlannedCall call = ffpa::planBackward(handle, attn, t, ffpa::Purpose::Execute);
    using ffpa::tensorOperand;
    ffpa::checkOperands({tensorOperand("q", q, t.q, false), tensorOperand("k", k, t.k, false),
                         tensorOperand("v", v, t.v, false), tensorOperand("o", o, t.o, false),
                         tensorOperand("dO", dO, t.dO, false), tensorOperand("lse", lse, t.lse, false),
                         tensorOperand("dq", dq, t.dq, true), tensorOperand("dk", dk, t.dk, true),
                         tensorOperand("dv", dv, t.dv, true), ffpa::workspaceOperand(call.workspaceBytes(), workspace)});
    ffpa::checkWorkspace(call.workspaceBytes(), workspace, workspaceSize, "ffpaGetAttentionBackwardWorkspaceSize");
    ffpa::TensorArgs tensors;
    tensors.q = q;
    tensors.k = k;
    tensors.v = v;
    tensors.o = o;
    tensors.dO = dO;
    tensors.lse = lse;
    tensors.dq = dq;
    tensors.dk = dk;
    tensors.dv = dv;
    ffpa::execute(call, tensors, workspace);
  });
}

}  // extern "C"
