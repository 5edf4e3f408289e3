#include "cp/ring_attention.h"

#include "core/cuda_check.h"
#include "core/device.h"
#include "core/error.h"
#include "core/plan_launch.h"
#include "core/workspace_layout.h"
#include "cp/ring_slices.h"
#include "cp/row_copy.h"
#include "merge/merge_call.h"

#include <algorithm>
#include <initializer_list>
#include <sstream>

namespace ffpa::cp {
namespace {

// The strides stridesOf() gives a packed layout of these dims (extent-1 dimensions 0), so that
// the blocks' plans are the plans of equal plain calls.
Strides packedStrides(std::initializer_list<int64_t> dims) {
  return stridesOf(makeTensorLayout(FFPA_DATA_TYPE_FLOAT32, static_cast<int32_t>(dims.size()), dims.begin(), nullptr));
}

RingPlan::DenseStrides denseStridesOf(const AttentionProblem& l) {
  RingPlan::DenseStrides d;
  d.k = packedStrides({l.batch, l.headsKv, l.seqKv, l.headDimQk});
  d.v = packedStrides({l.batch, l.headsKv, l.seqKv, l.headDimV});
  d.o = packedStrides({l.batch, l.headsQ, l.seqQ, l.headDimV});
  d.lse = packedStrides({l.batch, l.headsQ, l.seqQ});
  d.dq = packedStrides({l.batch, l.headsQ, l.seqQ, l.headDimQk});
  return d;
}

AttentionProblem blockProblem(const RingPlan& plan, const Block& block) {
  const AttentionProblem& l = plan.local;
  AttentionProblem p = l;
  p.seqQ = block.queries.size();
  p.seqKv = block.keys.size();
  p.causal = block.causal ? FFPA_CAUSAL_BOTTOM_RIGHT : FFPA_CAUSAL_NONE;
  p.slices = nullptr;
  // K and V come from the ring's dense buffers, whatever the caller's layouts.
  p.k = plan.dense.k;
  p.v = plan.dense.v;
  if (plan.direction == Direction::Forward) {
    p.o = plan.dense.o;  // the partial O
    p.lse = plan.dense.lse;
    p.hasLse = true;
  } else {
    p.dq = plan.dense.dq;
    p.dk = p.k;
    p.dv = p.v;
  }
  return p;
}

void layOut(RingPlan& plan, size_t kernelBytes) {
  const AttentionProblem& l = plan.local;
  const size_t elem = elementBytes(l.dtype);
  const size_t kv = static_cast<size_t>(plan.kvElements());
  const size_t rows = static_cast<size_t>(l.batch * l.headsQ * l.seqQ);
  WorkspaceLayout w;
  plan.kv[0] = w.add(kv * elem);
  plan.kv[1] = w.add(kv * elem);
  if (plan.direction == Direction::Forward) {
    plan.partialO = w.add(rows * l.headDimV * elem);
    plan.partialLse = w.add(rows * sizeof(float));
    plan.runO = w.add(rows * l.headDimV * sizeof(float));
    plan.runLse = w.add(rows * sizeof(float));
  } else {
    plan.dq = w.add(rows * l.headDimQk * elem);
    plan.dkv = w.add(kv * elem);
    plan.dqSum = w.add(rows * l.headDimQk * sizeof(float));
    plan.kvPartial = w.add(kv * sizeof(float));
    plan.kvSum[0] = w.add(kv * sizeof(float));
    plan.kvSum[1] = w.add(kv * sizeof(float));
  }
  plan.kernel = w.add(kernelBytes);
  plan.workspaceBytes = w.total();
}

// A sliced ring: each step one sliced call over the rows and keys its slices reach (none when
// the step sees nothing), its table checked like the caller's and copied where theirs is. Cut
// once per ring shape and kept with the slice list, whose users (graphs included) may read it.
std::shared_ptr<const RingCut> cutOf(const slices::SliceTable& global, const RingShape& shape,
                                     const std::vector<Step>& steps) {
  constexpr int64_t kRingCutTag = 0x52494e47;  // "RING": the kind of derived data
  const slices::SliceTable::DerivedKey key{kRingCutTag, shape.ranks, shape.rank,
                                           static_cast<int64_t>(shape.sharding), shape.localQueries,
                                           shape.localKeys};
  const auto make = [&]() -> std::shared_ptr<const void> {
    auto cut = std::make_shared<RingCut>();
    for (const Step& step : steps) {
      StepSlices pieces = stepSlices(global.slices(), shape, step.source);
      RingCut::StepCut& s = cut->steps.emplace_back();
      if (pieces.slices.empty()) continue;
      auto table = std::make_unique<slices::SliceTable>(std::move(pieces.slices));
      if (global.deviceOrdinal() >= 0) table->upload(global.deviceOrdinal());
      s.block = {pieces.queries, pieces.keys, false};
      s.table = std::move(table);
    }
    return cut;
  };
  return std::static_pointer_cast<const RingCut>(global.derived(key, make));
}

}  // namespace

int64_t RingPlan::kvElements() const {
  return local.batch * local.headsKv * local.seqKv * (local.headDimQk + local.headDimV);
}

RingPlan planRing(Context& context, const Policy& policy, bool mayTune, const AttentionProblem& local,
                  std::shared_ptr<const slices::SliceTable> slices, int32_t ranks, int32_t rank,
                  Sharding sharding) {
  require(slices.get() == local.slices, FFPA_STATUS_INTERNAL_ERROR, "ring plan: the slices are not the problem's");
  RingPlan plan;
  plan.direction = local.direction;
  plan.local = local;
  plan.slices = std::move(slices);
  plan.shape = {ranks, rank, sharding, local.causal != FFPA_CAUSAL_NONE, local.seqQ, local.seqKv};
  plan.steps = ringSchedule(plan.shape);
  plan.dense = denseStridesOf(local);
  if (plan.slices) {
    plan.cut = cutOf(*plan.slices, plan.shape, plan.steps);
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const RingCut::StepCut& step = plan.cut->steps[s];
      plan.steps[s].blocks.clear();
      if (step.table) plan.steps[s].blocks.push_back(step.block);
    }
  }
  size_t kernelBytes = 0;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    std::vector<BlockCall> calls;
    for (const Block& block : plan.steps[s].blocks) {
      BlockCall call{block, blockProblem(plan, block), nullptr};
      if (plan.cut) call.problem.slices = plan.cut->steps[s].table.get();
      call.plan = context.plan(call.problem, policy, mayTune);
      kernelBytes = std::max(kernelBytes, call.plan->workspaceBytes);
      calls.push_back(std::move(call));
    }
    plan.calls.push_back(std::move(calls));
  }
  layOut(plan, kernelBytes);
  return plan;
}

std::string describeRing(const RingPlan& plan) {
  std::ostringstream text;
  text << "context parallel: rank " << plan.shape.rank << " of " << plan.shape.ranks << ", "
       << shardingName(plan.shape.sharding) << " sharding, " << plan.steps.size() << " ring steps\n";
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    text << "step " << s << ": K/V of rank " << plan.steps[s].source;
    if (plan.calls[s].empty()) text << ", nothing seen";
    text << "\n";
    for (const BlockCall& c : plan.calls[s]) {
      text << "  queries [" << c.block.queries.begin << ", " << c.block.queries.end << ") keys ["
           << c.block.keys.begin << ", " << c.block.keys.end << ") ";
      if (c.problem.slices != nullptr) {
        text << c.problem.slices->slices().size() << " slices";
      } else {
        text << (c.block.causal ? "causal" : "full");
      }
      text << ": " << c.plan->kernel << " (" << c.plan->config << ")\n";
    }
  }
  return text.str();
}

RingStreams::RingStreams(int32_t deviceOrdinal) {
  ScopedDevice device(deviceOrdinal);
  try {
    checkCuda(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    for (cudaEvent_t* e : {&fork, &ready, &landed, &join}) {
      checkCuda(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
  } catch (...) {
    release();
    throw;
  }
}

RingStreams::~RingStreams() { release(); }

void RingStreams::release() {
  for (cudaEvent_t e : {fork, ready, landed, join}) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (comm != nullptr) cudaStreamDestroy(comm);
  fork = ready = landed = join = nullptr;
  comm = nullptr;
}

namespace {

// The parts every rank program shares: the plan, the call, the tensors, and the stream-ordering.
class ProgramBase : public RingProgram {
 public:
  ProgramBase(const RingPlan& plan, const RingCall& call, const TensorArgs& tensors)
      : plan_(plan), call_(call), t_(tensors), elem_(elementBytes(plan.local.dtype)) {}

 protected:
  const AttentionProblem& local() const { return plan_.local; }
  int32_t ranks() const { return plan_.shape.ranks; }
  cudaStream_t stream() const { return call_.snapshot.stream; }
  cudaStream_t comm() const { return call_.streams.comm; }
  template <class T = void>
  T* at(size_t offset) const { return slice<T>(call_.workspace, offset); }

  static void record(cudaEvent_t event, cudaStream_t stream) {
    checkCuda(cudaEventRecord(event, stream), "cudaEventRecord");
  }
  static void wait(cudaStream_t stream, cudaEvent_t event) {
    checkCuda(cudaStreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent");
  }
  // The comm stream starts after what the caller enqueued before the call.
  void fork() const {
    record(call_.streams.fork, stream());
    wait(comm(), call_.streams.fork);
  }
  // The caller's stream continues after everything the comm stream did for the call.
  void join() const {
    record(call_.streams.join, comm());
    wait(stream(), call_.streams.join);
  }
  // The previous phase's exchange is complete: the caller's stream may use what it brought.
  void landed() const {
    record(call_.streams.landed, comm());
    wait(stream(), call_.streams.landed);
  }
  // Sends and receives once what the caller's stream enqueued so far is done.
  void exchange(const Transfer* transfers, int count) const {
    if (count == 0) return;
    record(call_.streams.ready, stream());
    wait(comm(), call_.streams.ready);
    call_.transport.exchange(transfers, count, comm());
  }

  // The K and V parts of K/V buffer `i` (dense).
  size_t kvBytes() const { return static_cast<size_t>(plan_.kvElements()) * elem_; }
  void* keysOf(size_t offset) const { return at(offset); }
  void* valuesOf(size_t offset, size_t elem) const {
    return at<unsigned char>(offset) +
           static_cast<size_t>(local().batch * local().headsKv * local().seqKv * local().headDimQk) * elem;
  }
  RowStrides kStrides() const { return rowStrides(plan_.dense.k); }
  RowStrides vStrides() const { return rowStrides(plan_.dense.v); }
  RowShape kShape(int64_t rows) const { return {local().batch, local().headsKv, rows, local().headDimQk}; }
  RowShape vShape(int64_t rows) const { return {local().batch, local().headsKv, rows, local().headDimV}; }

  // The caller's K and V into K/V buffer 0: the ring sends contiguous blocks.
  void packKv() const {
    const ffpaDataType_t type = local().dtype;
    enqueueRows(RowOp::Copy, kShape(local().seqKv), {keysOf(plan_.kv[0]), type, kStrides()},
                {const_cast<void*>(t_.k), type, rowStrides(local().k)}, stream());
    enqueueRows(RowOp::Copy, vShape(local().seqKv), {valuesOf(plan_.kv[0], elem_), type, vStrides()},
                {const_cast<void*>(t_.v), type, rowStrides(local().v)}, stream());
  }

  // `base` moved `rows` rows of a tensor with N stride `rowStride` (elements of `elem` bytes).
  static const void* rowsAt(const void* base, int64_t rows, int64_t rowStride, size_t elem) {
    return static_cast<const unsigned char*>(base) + rows * rowStride * static_cast<int64_t>(elem);
  }
  static void* rowsAt(void* base, int64_t rows, int64_t rowStride, size_t elem) {
    return static_cast<unsigned char*>(base) + rows * rowStride * static_cast<int64_t>(elem);
  }

  void launch(const BlockCall& c, const TensorArgs& tensors) const {
    launchPlan(call_.context, call_.snapshot, c.problem, *c.plan, tensors, at(plan_.kernel));
  }

  const RingPlan& plan_;
  RingCall call_;
  TensorArgs t_;
  size_t elem_;
};

class ForwardProgram final : public ProgramBase {
 public:
  using ProgramBase::ProgramBase;
  int phases() const override { return ranks(); }

  void phase(int s) override {
    ScopedDevice device(call_.context.device().ordinal);
    if (s == 0) {
      fork();
      packKv();
      if (plan_.startsEmpty()) clear();
    } else {
      landed();
    }
    if (s + 1 < ranks()) {
      const Transfer next{at(plan_.kv[s % 2]), at(plan_.kv[(s + 1) % 2]), kvBytes()};
      exchange(&next, 1);
    }
    step(s);
    if (s + 1 == ranks()) {
      writeOut();
      join();
    }
  }

 private:
  // The blocks of step s against the K/V buffer it holds, each partial folded into the running
  // result (step 0, which covers every row unless the ring is sliced, starts it).
  void step(int s) const {
    const AttentionProblem& l = local();
    const size_t kv = plan_.kv[s % 2];
    const Strides& partial = plan_.dense.o;
    const Strides& lse = plan_.dense.lse;
    for (const BlockCall& c : plan_.calls[s]) {
      const Block& b = c.block;
      TensorArgs a;
      a.q = rowsAt(t_.q, b.queries.begin, l.q[2], elem_);
      a.k = rowsAt(keysOf(kv), b.keys.begin, c.problem.k[2], elem_);
      a.v = rowsAt(valuesOf(kv, elem_), b.keys.begin, c.problem.v[2], elem_);
      a.out = rowsAt(at(plan_.partialO), b.queries.begin, partial[2], elem_);
      a.lseOut = static_cast<float*>(rowsAt(at(plan_.partialLse), b.queries.begin, lse[2], sizeof(float)));
      launch(c, a);
      if (s > 0 || plan_.startsEmpty()) fold(b.queries, true);
    }
    if (s == 0 && !plan_.startsEmpty()) fold({0, l.seqQ}, false);
  }

  // An empty running result: a merge of no parts gives every row O = 0 and LSE = -infinity.
  void clear() const {
    MergeProblem m = mergeOfOne(local().seqQ, local().dtype, FFPA_DATA_TYPE_FLOAT32);
    m.count = 0;
    m.o = plan_.dense.o;
    m.lse = plan_.dense.lse;
    m.hasLse = true;
    MergeTensors t;
    t.o = at(plan_.runO);
    t.lse = at<float>(plan_.runLse);
    enqueueMerge(m, t, stream());
  }

  // Merges the partial rows `rows` into the running fp32 result (carry) or starts it.
  void fold(RowRange rows, bool carry) const {
    const Strides& o = plan_.dense.o;
    const Strides& lse = plan_.dense.lse;
    MergeProblem m = mergeOfOne(rows.size(), local().dtype, FFPA_DATA_TYPE_FLOAT32);
    m.o = o;
    m.lse = lse;
    m.hasLse = true;
    m.carry = carry;
    MergeTensors t;
    t.partialO[0] = rowsAt(at(plan_.partialO), rows.begin, o[2], elem_);
    t.partialLse[0] = static_cast<const float*>(rowsAt(at(plan_.partialLse), rows.begin, lse[2], sizeof(float)));
    t.o = rowsAt(at(plan_.runO), rows.begin, o[2], sizeof(float));
    t.lse = static_cast<float*>(rowsAt(at(plan_.runLse), rows.begin, lse[2], sizeof(float)));
    enqueueMerge(m, t, stream());
  }

  // The running result into the caller's O (its type and layout) and LSE.
  void writeOut() const {
    MergeProblem m = mergeOfOne(local().seqQ, FFPA_DATA_TYPE_FLOAT32, local().dtype);
    m.o = local().o;
    m.hasLse = t_.lseOut != nullptr;
    m.lse = local().lse;
    MergeTensors t;
    t.partialO[0] = at(plan_.runO);
    t.partialLse[0] = at<float>(plan_.runLse);
    t.o = t_.out;
    t.lse = t_.lseOut;
    enqueueMerge(m, t, stream());
  }

  // A merge of one part over `rows` query rows, the part in the dense layouts of the ring's
  // partial O and LSE; the caller sets the output.
  MergeProblem mergeOfOne(int64_t rows, ffpaDataType_t partialType, ffpaDataType_t outType) const {
    MergeProblem m;
    m.count = 1;
    m.partialType = partialType;
    m.outType = outType;
    m.batch = local().batch;
    m.heads = local().headsQ;
    m.seq = rows;
    m.headDim = local().headDimV;
    m.partialO = plan_.dense.o;
    m.partialLse = plan_.dense.lse;
    return m;
  }
};

class BackwardProgram final : public ProgramBase {
 public:
  using ProgramBase::ProgramBase;
  // Steps 0..P-1, one more phase to send the last block's dK/dV home, one to write them out.
  int phases() const override { return ranks() + 2; }

  void phase(int s) override {
    ScopedDevice device(call_.context.device().ordinal);
    const int p = ranks();
    if (s == 0) {
      fork();
      packKv();
      const AttentionProblem& l = local();
      const size_t dqBytes = static_cast<size_t>(l.batch * l.headsQ * l.seqQ * l.headDimQk) * sizeof(float);
      checkCuda(cudaMemsetAsync(at(plan_.dqSum), 0, dqBytes, stream()), "cudaMemsetAsync");
    } else {
      landed();
    }
    if (s >= 1 && s <= p) addBlockSum(s - 1);
    if (s == p + 1) {
      writeOut(plan_.kvSum[p % 2]);
      join();
      return;
    }
    Transfer transfers[2];
    int count = 0;
    if (s + 1 < p) transfers[count++] = {at(plan_.kv[s % 2]), at(plan_.kv[(s + 1) % 2]), kvBytes()};
    if (s >= 1) transfers[count++] = {at(plan_.kvSum[(s - 1) % 2]), at(plan_.kvSum[s % 2]), sumBytes()};
    exchange(transfers, count);
    if (s < p) step(s);
  }

 private:
  size_t sumBytes() const { return static_cast<size_t>(plan_.kvElements()) * sizeof(float); }
  RowShape flat(int64_t elements) const { return {1, 1, 1, elements}; }

  // dK/dV sum of the block of step `s`: this rank's part, plus (after step 0) what the ranks
  // before it added, which arrived in kvSum[s % 2].
  void addBlockSum(int s) const {
    const RowTensor sum{at(plan_.kvSum[s % 2]), FFPA_DATA_TYPE_FLOAT32, {0, 0, 0}};
    const RowTensor part{at(plan_.kvPartial), FFPA_DATA_TYPE_FLOAT32, {0, 0, 0}};
    enqueueRows(s == 0 ? RowOp::Copy : RowOp::Add, flat(plan_.kvElements()), sum, part, stream());
  }

  void step(int s) const {
    const AttentionProblem& l = local();
    checkCuda(cudaMemsetAsync(at(plan_.kvPartial), 0, sumBytes(), stream()), "cudaMemsetAsync");
    const size_t kv = plan_.kv[s % 2];
    const Strides& dq = plan_.dense.dq;
    const ffpaDataType_t type = l.dtype;
    constexpr ffpaDataType_t kF32 = FFPA_DATA_TYPE_FLOAT32;
    for (const BlockCall& c : plan_.calls[s]) {
      const Block& b = c.block;
      const int64_t q0 = b.queries.begin, k0 = b.keys.begin;
      TensorArgs a;
      a.q = rowsAt(t_.q, q0, l.q[2], elem_);
      a.o = rowsAt(t_.o, q0, l.o[2], elem_);
      a.dO = rowsAt(t_.dO, q0, l.dO[2], elem_);
      a.lse = static_cast<const float*>(rowsAt(t_.lse, q0, l.lse[2], sizeof(float)));
      a.k = rowsAt(keysOf(kv), k0, c.problem.k[2], elem_);
      a.v = rowsAt(valuesOf(kv, elem_), k0, c.problem.v[2], elem_);
      a.dq = rowsAt(at(plan_.dq), q0, dq[2], elem_);
      a.dk = rowsAt(keysOf(plan_.dkv), k0, c.problem.dk[2], elem_);
      a.dv = rowsAt(valuesOf(plan_.dkv, elem_), k0, c.problem.dv[2], elem_);
      launch(c, a);
      const int64_t rq = b.queries.size(), rk = b.keys.size();
      enqueueRows(RowOp::Add, {l.batch, l.headsQ, rq, l.headDimQk},
                  {rowsAt(at(plan_.dqSum), q0, dq[2], sizeof(float)), kF32, rowStrides(dq)},
                  {a.dq, type, rowStrides(dq)}, stream());
      enqueueRows(RowOp::Add, kShape(rk),
                  {rowsAt(keysOf(plan_.kvPartial), k0, c.problem.k[2], sizeof(float)), kF32, kStrides()},
                  {a.dk, type, kStrides()}, stream());
      enqueueRows(RowOp::Add, vShape(rk),
                  {rowsAt(valuesOf(plan_.kvPartial, sizeof(float)), k0, c.problem.v[2], sizeof(float)), kF32, vStrides()},
                  {a.dv, type, vStrides()}, stream());
    }
  }

  // The rank's own dK/dV (back home in `sum`) and its dQ into the caller's layouts.
  void writeOut(size_t sum) const {
    const AttentionProblem& l = local();
    const ffpaDataType_t type = l.dtype;
    constexpr ffpaDataType_t kF32 = FFPA_DATA_TYPE_FLOAT32;
    const Strides& dq = plan_.dense.dq;
    enqueueRows(RowOp::Copy, {l.batch, l.headsQ, l.seqQ, l.headDimQk}, {t_.dq, type, rowStrides(l.dq)},
                {at(plan_.dqSum), kF32, rowStrides(dq)}, stream());
    enqueueRows(RowOp::Copy, kShape(l.seqKv), {t_.dk, type, rowStrides(l.dk)},
                {keysOf(sum), kF32, kStrides()}, stream());
    enqueueRows(RowOp::Copy, vShape(l.seqKv), {t_.dv, type, rowStrides(l.dv)},
                {valuesOf(sum, sizeof(float)), kF32, vStrides()}, stream());
  }
};

}  // namespace

void runRank(const RingPlan& plan, const RingCall& call, const TensorArgs& tensors) {
  const auto run = [](RingProgram&& program) {
    RingProgram* const one = &program;
    runRing(&one, 1, [] {});
  };
  if (plan.direction == Direction::Forward) {
    run(ForwardProgram(plan, call, tensors));
  } else {
    run(BackwardProgram(plan, call, tensors));
  }
}

std::unique_ptr<RingProgram> ringForward(const RingPlan& plan, const RingCall& call, const TensorArgs& tensors) {
  return std::make_unique<ForwardProgram>(plan, call, tensors);
}

std::unique_ptr<RingProgram> ringBackward(const RingPlan& plan, const RingCall& call, const TensorArgs& tensors) {
  return std::make_unique<BackwardProgram>(plan, call, tensors);
}

}  // namespace ffpa::cp
