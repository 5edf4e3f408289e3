// Context-parallel attention on one GPU. The ring itself: P = 2..8 ranks simulated in one process
// (each its own stream, exchange stream, buffers and workspace; the exchanges are device copies
// between the ranks' buffers, issued phase by phase as the schedule says), for both shardings,
// with and without a causal mask, forward and backward, gathered and checked against attention
// over the whole sequence: the library's plain call and float64 on the CPU, the ring's error
// within twice the plain call's (plus a little for the ring's extra roundings). Attention sinks
// on the ring (each rank adjusts its rows, the sinks' gradient is the sum of the ranks' shares),
// and the whole ring captured in one CUDA graph. Attention slices over the whole sequence (packed
// documents across the ranks' shards, a shared prefix, rows that see nothing), each step one
// sliced call. Then a real NCCL communicator of one rank through the public API, which must equal
// the plain call, with a causal mask and with slices.
#include "core/descriptors.h"
#include "core/handle.h"
#include "core/problem.h"
#include "core/slice_table.h"
#include "cp/context_parallel.h"
#include "cp/ring_attention.h"
#include "cp/ring_schedule.h"

#include "common/cpu_attention.h"
#include "common/host_tensor.h"
#include "common/random.h"

#include "ffpa_build_config.h"

#include <ffpa/ffpa.h>

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if FFPA_HAVE_NCCL
#include <nccl.h>
#endif

using namespace ffpa_tools;
namespace cp = ffpa::cp;
using ffpa::slices::SliceRange;

namespace {

#define REQUIRE_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)
#define REQUIRE_FFPA(call) REQUIRE_MESSAGE((call) == FFPA_STATUS_SUCCESS, #call)

// Ranks of one process: each rank's exchange posts its transfers; flush() pairs them, each copy
// on the receiver's exchange stream after the sender's, and the sender waits until its buffers
// were read before it reuses them.
class SimulatedWorld {
 public:
  explicit SimulatedWorld(int ranks) : posted_(ranks), ready_(ranks), pulled_(ranks) {
    for (int r = 0; r < ranks; ++r) {
      REQUIRE_CUDA(cudaEventCreateWithFlags(&ready_[r], cudaEventDisableTiming));
      REQUIRE_CUDA(cudaEventCreateWithFlags(&pulled_[r], cudaEventDisableTiming));
      ranks_.push_back(std::make_unique<Rank>(*this, r));
    }
  }
  ~SimulatedWorld() {
    for (cudaEvent_t e : ready_) cudaEventDestroy(e);
    for (cudaEvent_t e : pulled_) cudaEventDestroy(e);
  }
  cp::Transport& transport(int r) { return *ranks_[r]; }

  void flush() {
    const int p = static_cast<int>(posted_.size());
    if (posted_[0].stream == nullptr) {
      for (const Posted& x : posted_) REQUIRE(x.stream == nullptr);  // nobody exchanged
      return;
    }
    for (int r = 0; r < p; ++r) {
      REQUIRE(posted_[r].transfers.size() == posted_[0].transfers.size());
      REQUIRE_CUDA(cudaEventRecord(ready_[r], posted_[r].stream));
    }
    for (int r = 0; r < p; ++r) {
      const Posted& from = posted_[(r + p - 1) % p];
      REQUIRE_CUDA(cudaStreamWaitEvent(posted_[r].stream, ready_[(r + p - 1) % p], 0));
      for (size_t i = 0; i < from.transfers.size(); ++i) {
        const cp::Transfer& in = posted_[r].transfers[i];
        REQUIRE(in.bytes == from.transfers[i].bytes);
        REQUIRE_CUDA(cudaMemcpyAsync(in.recv, from.transfers[i].send, in.bytes, cudaMemcpyDeviceToDevice,
                                     posted_[r].stream));
      }
      REQUIRE_CUDA(cudaEventRecord(pulled_[r], posted_[r].stream));
    }
    for (int r = 0; r < p; ++r) REQUIRE_CUDA(cudaStreamWaitEvent(posted_[r].stream, pulled_[(r + 1) % p], 0));
    for (Posted& x : posted_) x = Posted{};
  }

 private:
  struct Posted {
    std::vector<cp::Transfer> transfers;
    cudaStream_t stream = nullptr;
  };
  class Rank final : public cp::Transport {
   public:
    Rank(SimulatedWorld& world, int rank) : world_(world), rank_(rank) {}
    int32_t ranks() const override { return static_cast<int32_t>(world_.posted_.size()); }
    int32_t rank() const override { return rank_; }
    void exchange(const cp::Transfer* transfers, int count, cudaStream_t stream) override {
      Posted& p = world_.posted_[rank_];
      p.transfers.assign(transfers, transfers + count);
      p.stream = stream;
    }

   private:
    SimulatedWorld& world_;
    int rank_;
  };
  std::vector<Posted> posted_;
  std::vector<cudaEvent_t> ready_, pulled_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { REQUIRE_CUDA(cudaMalloc(&data, bytes == 0 ? 1 : bytes)); }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data = nullptr;
};

struct Shape {
  int ranks;
  cp::Sharding sharding;
  bool causal;
  int64_t heads = 4, headsKv = 2, local = 32, dim = 128;
  std::vector<SliceRange> slices = {};  // over the whole sequence, the mask instead of `causal`

  std::string text() const {
    const char* mask = !slices.empty() ? " sliced" : causal ? " causal" : " full";
    return std::string(cp::shardingName(sharding)) + mask + " P=" + std::to_string(ranks) +
           " n=" + std::to_string(local) + " d=" + std::to_string(dim);
  }
};

// Slices over a sequence of `total` tokens: a shared prefix of 40 tokens (causal), then three
// documents (causal, inverse-causal, full) that each see the prefix whole, and 8 tokens at the end
// that no slice covers (rows that see nothing, keys nobody sees).
std::vector<SliceRange> documentSlices(int32_t total) {
  const int32_t prefix = 40, end = total - 8;
  std::vector<SliceRange> list{{0, prefix, 0, prefix, FFPA_SLICE_MASK_CAUSAL}};
  const int32_t cuts[] = {prefix, prefix + (end - prefix) * 3 / 10, prefix + (end - prefix) * 7 / 10, end};
  const int32_t masks[] = {FFPA_SLICE_MASK_CAUSAL, FFPA_SLICE_MASK_INVERSE_CAUSAL, FFPA_SLICE_MASK_FULL};
  for (int i = 0; i < 3; ++i) {
    list.push_back({cuts[i], cuts[i + 1], 0, prefix, FFPA_SLICE_MASK_FULL});
    list.push_back({cuts[i], cuts[i + 1], cuts[i], cuts[i + 1], masks[i]});
  }
  return list;
}

HostTensor randomTensor(Random& random, int64_t h, int64_t n, int64_t d) {
  HostTensor t(DType::bfloat16, attention_layout(LayoutKind::bhnd, 1, h, n, d));
  t.fill_uniform(random, -1.0, 1.0);
  return t;
}

// Rows of `global` that rank `rank` holds, as its dense local tensor.
HostTensor shardOf(const HostTensor& global, const Shape& s, int rank) {
  const TensorLayout& g = global.layout();
  HostTensor local(global.dtype(), attention_layout(LayoutKind::bhnd, 1, g.dims[1], s.local, g.dims[3]));
  for (int64_t h = 0; h < g.dims[1]; ++h)
    for (int64_t i = 0; i < s.local; ++i) {
      const int64_t row = cp::globalToken(s.sharding, s.ranks, rank, s.local, i);
      for (int64_t x = 0; x < g.dims[3]; ++x) local.set(0, h, i, x, global.get(0, h, row, x));
    }
  return local;
}

void unshard(std::vector<double>& global, const HostTensor& local, const Shape& s, int rank, int64_t globalRows) {
  const TensorLayout& l = local.layout();
  for (int64_t h = 0; h < l.dims[1]; ++h)
    for (int64_t i = 0; i < s.local; ++i) {
      const int64_t row = cp::globalToken(s.sharding, s.ranks, rank, s.local, i);
      for (int64_t x = 0; x < l.dims[3]; ++x) global[(h * globalRows + row) * l.dims[3] + x] = local.get(0, h, i, x);
    }
}

void* upload(const HostTensor& t, std::vector<std::unique_ptr<DeviceBuffer>>& keep) {
  keep.push_back(std::make_unique<DeviceBuffer>(t.size_bytes()));
  REQUIRE_CUDA(cudaMemcpy(keep.back()->data, t.data(), t.size_bytes(), cudaMemcpyHostToDevice));
  return keep.back()->data;
}
void* poisoned(size_t bytes, std::vector<std::unique_ptr<DeviceBuffer>>& keep) {
  keep.push_back(std::make_unique<DeviceBuffer>(bytes));
  REQUIRE_CUDA(cudaMemset(keep.back()->data, 0xFF, bytes));  // NaN in bf16 and fp32
  return keep.back()->data;
}
HostTensor download(const void* data, DType type, const TensorLayout& layout) {
  HostTensor t(type, layout);
  REQUIRE_CUDA(cudaMemcpy(t.data(), data, t.size_bytes(), cudaMemcpyDeviceToHost));
  return t;
}

double relativeError(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return INFINITY;
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

void checkAgainst(const std::string& what, const std::vector<double>& ring, const std::vector<double>& plain,
                  const std::vector<double>& exact) {
  const double ringError = relativeError(ring, exact);
  const double plainError = relativeError(plain, exact);
  CHECK_MESSAGE(ringError <= 2.0 * plainError + 2e-3, what, ": ring error ", ringError, " vs plain call ", plainError);
  CHECK_MESSAGE(relativeError(ring, plain) <= 2.0 * plainError + 2e-3, what);
}

ffpaTensorDescriptor_t descriptor(ffpaDataType_t type, std::vector<int64_t> dims) {
  ffpaTensorDescriptor_t d = nullptr;
  REQUIRE_FFPA(ffpaCreateTensorDescriptor(&d));
  REQUIRE_FFPA(ffpaSetTensorDescriptor(d, type, static_cast<int32_t>(dims.size()), dims.data(), nullptr));
  return d;
}

// O, LSE, dQ, dK, dV over the whole sequence ([1, H, N, D] and [1, H, N], dense), and the
// sinks' gradient [H] when there are sinks: of the plain call, of the ring gathered, of float64.
struct Outputs {
  std::vector<double> o, lse, dq, dk, dv, dSinks;
};

std::vector<double> downloadFloats(const void* data, size_t count) {
  std::vector<float> values(count);
  REQUIRE_CUDA(cudaMemcpy(values.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost));
  return {values.begin(), values.end()};
}

// Plain attention over the whole sequence through the public API; with sinks, O and LSE are
// adjusted by ffpaAttentionApplySinks before the backward; with slices, they are the mask.
Outputs plainAttention(ffpaHandle_t handle, bool causal, const HostTensor& q, const HostTensor& k,
                       const HostTensor& v, const HostTensor& dO, ffpaContextParallel_t ring = nullptr,
                       const float* sinks = nullptr, const std::vector<SliceRange>& slices = {}) {
  const TensorLayout& ql = q.layout();
  const TensorLayout& kl = k.layout();
  const int64_t h = ql.dims[1], hkv = kl.dims[1], n = ql.dims[2], nk = kl.dims[2], d = ql.dims[3];
  std::vector<std::unique_ptr<DeviceBuffer>> keep;
  void* dq_ = upload(q, keep);
  void* dk_ = upload(k, keep);
  void* dv_ = upload(v, keep);
  void* ddo = upload(dO, keep);
  const size_t oBytes = static_cast<size_t>(h * n * d) * 2;
  void* o = poisoned(oBytes, keep);
  auto* lse = static_cast<float*>(poisoned(static_cast<size_t>(h * n) * 4, keep));
  void* gq = poisoned(oBytes, keep);
  void* gk = poisoned(static_cast<size_t>(hkv * nk * d) * 2, keep);
  void* gv = poisoned(static_cast<size_t>(hkv * nk * d) * 2, keep);
  auto* gSinks = static_cast<float*>(poisoned(static_cast<size_t>(h) * 4, keep));
  ffpaTensorDescriptor_t qd = descriptor(FFPA_DATA_TYPE_BFLOAT16, {1, h, n, d});
  ffpaTensorDescriptor_t kd = descriptor(FFPA_DATA_TYPE_BFLOAT16, {1, hkv, nk, d});
  ffpaTensorDescriptor_t ld = descriptor(FFPA_DATA_TYPE_FLOAT32, {1, h, n});
  ffpaAttentionDescriptor_t attn = nullptr;
  REQUIRE_FFPA(ffpaCreateAttentionDescriptor(&attn));
  const int32_t mode = causal ? FFPA_CAUSAL_BOTTOM_RIGHT : FFPA_CAUSAL_NONE;
  REQUIRE_FFPA(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &mode, sizeof mode));
  REQUIRE_FFPA(ffpaSetAttentionDescriptorContextParallel(attn, ring));
  if (!slices.empty()) {
    std::vector<int32_t> queries, keys, masks;
    for (const SliceRange& x : slices) {
      queries.insert(queries.end(), {x.q0, x.q1});
      keys.insert(keys.end(), {x.k0, x.k1});
      masks.push_back(x.mask);
    }
    ffpaAttentionSlices_t list = nullptr;
    REQUIRE_FFPA(ffpaCreateAttentionSlices(handle, &list));
    REQUIRE_FFPA(ffpaSetAttentionSlices(list, static_cast<int32_t>(slices.size()), queries.data(), keys.data(),
                                        masks.data()));
    REQUIRE_FFPA(ffpaSetAttentionDescriptorSlices(attn, list));
    REQUIRE_FFPA(ffpaDestroyAttentionSlices(list));  // the descriptor keeps its copy
  }
  size_t fb = 0, bb = 0;
  REQUIRE_FFPA(ffpaGetAttentionForwardWorkspaceSize(handle, attn, qd, kd, kd, qd, ld, &fb));
  REQUIRE_FFPA(ffpaGetAttentionBackwardWorkspaceSize(handle, attn, qd, kd, kd, qd, qd, ld, qd, kd, kd, &bb));
  DeviceBuffer ws(std::max(fb, bb));
  REQUIRE_FFPA(ffpaAttentionForward(handle, attn, qd, dq_, kd, dk_, kd, dv_, qd, o, ld, lse, ws.data, fb));
  if (sinks != nullptr) REQUIRE_FFPA(ffpaAttentionApplySinks(handle, sinks, qd, o, ld, lse));
  REQUIRE_FFPA(ffpaAttentionBackward(handle, attn, qd, dq_, kd, dk_, kd, dv_, qd, o, qd, ddo, ld, lse, qd, gq, kd,
                                     gk, kd, gv, ws.data, bb));
  if (sinks != nullptr) REQUIRE_FFPA(ffpaAttentionSinksBackward(handle, sinks, qd, o, qd, ddo, ld, lse, gSinks));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  Outputs r;
  r.o = download(o, DType::bfloat16, ql).to_dense();
  r.lse = download(lse, DType::float32, lse_layout(LayoutKind::bhnd, 1, h, n)).to_dense();
  r.dq = download(gq, DType::bfloat16, ql).to_dense();
  r.dk = download(gk, DType::bfloat16, kl).to_dense();
  r.dv = download(gv, DType::bfloat16, kl).to_dense();
  if (sinks != nullptr) r.dSinks = downloadFloats(gSinks, static_cast<size_t>(h));
  ffpaDestroyAttentionDescriptor(attn);
  for (auto* t : {qd, kd, ld}) ffpaDestroyTensorDescriptor(t);
  return r;
}

struct HandleOwner {
  HandleOwner() { REQUIRE_FFPA(ffpaCreate(&handle)); }
  ~HandleOwner() { ffpaDestroy(handle); }
  ffpaHandle_t handle = nullptr;
};

// The whole sequence's inputs, [1, H, N, D] each.
struct Inputs {
  Inputs(const Shape& s, uint64_t seed) {
    Random random(seed);
    const int64_t total = s.local * s.ranks;
    q = randomTensor(random, s.heads, total, s.dim);
    k = randomTensor(random, s.headsKv, total, s.dim);
    v = randomTensor(random, s.headsKv, total, s.dim);
    dO = randomTensor(random, s.heads, total, s.dim);
  }
  HostTensor q, k, v, dO;
};

// P ranks in one process: each its stream, ring streams, plans, shards of the inputs, outputs and
// workspace, joined by a SimulatedWorld. forward() and backward() enqueue every rank's program
// phase by phase (nothing synchronizes: they can be captured in a CUDA graph).
class SimulatedRing {
 public:
  SimulatedRing(ffpaHandle_t handle, const Shape& s, const Inputs& in)
      : handle_(handle), context_(ffpa::contextOf(handle)), s_(s), world_(s.ranks), ranks_(s.ranks) {
    ffpa::AttentionSettings settings;
    settings.causal = s.causal ? FFPA_CAUSAL_BOTTOM_RIGHT : FFPA_CAUSAL_NONE;
    if (!s.slices.empty()) {
      // The global slices on the device, and a ring of P ranks on the settings (for the checks
      // of the slices' extent against the whole sequence).
      const int32_t ordinal = context_.device().ordinal;
      auto table = std::make_shared<ffpa::slices::SliceTable>(s.slices);
      table->upload(ordinal);
      settings.slices = std::move(table);
      settings.contextParallel = std::make_shared<cp::ContextParallel>(ordinal, s.ranks, 0, s.sharding, nullptr);
    }
    const int64_t qDims[4] = {1, s.heads, s.local, s.dim}, kDims[4] = {1, s.headsKv, s.local, s.dim};
    const int64_t lDims[3] = {1, s.heads, s.local};
    const auto qL = ffpa::makeTensorLayout(FFPA_DATA_TYPE_BFLOAT16, 4, qDims, nullptr);
    const auto kL = ffpa::makeTensorLayout(FFPA_DATA_TYPE_BFLOAT16, 4, kDims, nullptr);
    const auto lL = ffpa::makeTensorLayout(FFPA_DATA_TYPE_FLOAT32, 3, lDims, nullptr);
    const ffpa::AttentionProblem fwdLocal = ffpa::forwardProblem(settings, qL, kL, kL, qL, &lL);
    const ffpa::AttentionProblem bwdLocal =
        ffpa::backwardProblem(settings, {&qL, &kL, &kL, &qL, &qL, &lL, &qL, &kL, &kL});
    qDesc_ = descriptor(FFPA_DATA_TYPE_BFLOAT16, {1, s.heads, s.local, s.dim});
    lseDesc_ = descriptor(FFPA_DATA_TYPE_FLOAT32, {1, s.heads, s.local});
    for (int r = 0; r < s.ranks; ++r) {
      Rank& st = ranks_[r];
      REQUIRE_CUDA(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
      st.streams = std::make_unique<cp::RingStreams>(context_.device().ordinal);
      ffpa::CallSnapshot snapshot = context_.snapshot();
      st.forward = cp::planRing(context_, *snapshot.policy, true, fwdLocal, settings.slices, s.ranks, r, s.sharding);
      st.backward = cp::planRing(context_, *snapshot.policy, true, bwdLocal, settings.slices, s.ranks, r, s.sharding);
      st.q = upload(shardOf(in.q, s, r), keep_);
      st.k = upload(shardOf(in.k, s, r), keep_);
      st.v = upload(shardOf(in.v, s, r), keep_);
      st.dO = upload(shardOf(in.dO, s, r), keep_);
      st.o = poisoned(qBytes(), keep_);
      st.lse = static_cast<float*>(poisoned(lseBytes(), keep_));
      st.dq = poisoned(qBytes(), keep_);
      st.dk = poisoned(kBytes(), keep_);
      st.dv = poisoned(kBytes(), keep_);
      st.dSinks = static_cast<float*>(poisoned(static_cast<size_t>(s.heads) * 4, keep_));
      st.workspaceBytes = std::max(st.forward.workspaceBytes, st.backward.workspaceBytes);
      st.workspace = poisoned(st.workspaceBytes, keep_);
      snapshot.stream = st.stream;
      calls_.push_back({context_, snapshot, world_.transport(r), *st.streams, st.workspace});
    }
    // The uploads and poison fills above ran on the legacy stream, which the ranks' non-blocking
    // streams do not wait for: they must be done before the ring starts.
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  ~SimulatedRing() {
    for (Rank& st : ranks_) cudaStreamDestroy(st.stream);
    ffpaDestroyTensorDescriptor(qDesc_);
    ffpaDestroyTensorDescriptor(lseDesc_);
  }
  SimulatedRing(const SimulatedRing&) = delete;
  SimulatedRing& operator=(const SimulatedRing&) = delete;

  cudaStream_t stream(int r) const { return ranks_[r].stream; }

  void forward() {
    runAll([&](int r) {
      ffpa::TensorArgs t = inputsOf(ranks_[r]);
      t.out = ranks_[r].o;
      t.lseOut = ranks_[r].lse;
      return cp::ringForward(ranks_[r].forward, calls_[r], t);
    });
  }
  // With the ranks' O and LSE (sink-adjusted or not).
  void backward() {
    runAll([&](int r) {
      const Rank& st = ranks_[r];
      ffpa::TensorArgs t = inputsOf(st);
      t.o = st.o;
      t.dO = st.dO;
      t.lse = st.lse;
      t.dq = st.dq;
      t.dk = st.dk;
      t.dv = st.dv;
      return cp::ringBackward(st.backward, calls_[r], t);
    });
  }
  // Each rank folds the sinks into its own O and LSE (a row's sink needs nothing from the others).
  void applySinks(const float* sinks) {
    for (int r = 0; r < s_.ranks; ++r) {
      onRankStream(r, [&] {
        return ffpaAttentionApplySinks(handle_, sinks, qDesc_, ranks_[r].o, lseDesc_, ranks_[r].lse);
      });
    }
  }
  // The sinks' gradient: each rank's share from its own rows, then their sum over the ranks (what
  // an ncclAllReduce with ncclSum of the ranks' dSinks gives).
  std::vector<double> sinksGradient(const float* sinks) {
    for (int r = 0; r < s_.ranks; ++r) {
      const Rank& st = ranks_[r];
      onRankStream(r, [&] {
        return ffpaAttentionSinksBackward(handle_, sinks, qDesc_, st.o, qDesc_, st.dO, lseDesc_, st.lse, st.dSinks);
      });
    }
    REQUIRE_CUDA(cudaDeviceSynchronize());
    std::vector<double> sum(static_cast<size_t>(s_.heads), 0.0);
    for (const Rank& st : ranks_) {
      const std::vector<double> share = downloadFloats(st.dSinks, sum.size());
      for (size_t h = 0; h < sum.size(); ++h) sum[h] += share[h];
    }
    return sum;
  }

  // Every output and workspace back to NaN.
  void poison() {
    REQUIRE_CUDA(cudaDeviceSynchronize());
    for (Rank& st : ranks_) {
      for (void* p : {st.o, st.dq}) REQUIRE_CUDA(cudaMemset(p, 0xFF, qBytes()));
      for (void* p : {st.dk, st.dv}) REQUIRE_CUDA(cudaMemset(p, 0xFF, kBytes()));
      REQUIRE_CUDA(cudaMemset(st.lse, 0xFF, lseBytes()));
      REQUIRE_CUDA(cudaMemset(st.workspace, 0xFF, st.workspaceBytes));
    }
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }

  // What the ranks computed, in the whole sequence's order (no dSinks: see sinksGradient()).
  Outputs gather() {
    REQUIRE_CUDA(cudaDeviceSynchronize());
    const int64_t total = s_.local * s_.ranks;
    Outputs g;
    g.o.resize(static_cast<size_t>(s_.heads * total * s_.dim));
    g.lse.resize(static_cast<size_t>(s_.heads * total));
    g.dq.resize(g.o.size());
    g.dk.resize(static_cast<size_t>(s_.headsKv * total * s_.dim));
    g.dv.resize(g.dk.size());
    const TensorLayout qLocal = attention_layout(LayoutKind::bhnd, 1, s_.heads, s_.local, s_.dim);
    const TensorLayout kLocal = attention_layout(LayoutKind::bhnd, 1, s_.headsKv, s_.local, s_.dim);
    const TensorLayout lLocal = lse_layout(LayoutKind::bhnd, 1, s_.heads, s_.local);
    for (int r = 0; r < s_.ranks; ++r) {
      const Rank& st = ranks_[r];
      unshard(g.o, download(st.o, DType::bfloat16, qLocal), s_, r, total);
      unshard(g.lse, download(st.lse, DType::float32, lLocal), s_, r, total);
      unshard(g.dq, download(st.dq, DType::bfloat16, qLocal), s_, r, total);
      unshard(g.dk, download(st.dk, DType::bfloat16, kLocal), s_, r, total);
      unshard(g.dv, download(st.dv, DType::bfloat16, kLocal), s_, r, total);
    }
    return g;
  }

 private:
  struct Rank {
    cudaStream_t stream = nullptr;
    std::unique_ptr<cp::RingStreams> streams;
    cp::RingPlan forward, backward;
    void *q = nullptr, *k = nullptr, *v = nullptr, *dO = nullptr, *o = nullptr, *dq = nullptr, *dk = nullptr,
         *dv = nullptr, *workspace = nullptr;
    float *lse = nullptr, *dSinks = nullptr;
    size_t workspaceBytes = 0;
  };

  static ffpa::TensorArgs inputsOf(const Rank& st) {
    ffpa::TensorArgs t;
    t.q = st.q;
    t.k = st.k;
    t.v = st.v;
    return t;
  }
  size_t qBytes() const { return static_cast<size_t>(s_.heads * s_.local * s_.dim) * 2; }
  size_t kBytes() const { return static_cast<size_t>(s_.headsKv * s_.local * s_.dim) * 2; }
  size_t lseBytes() const { return static_cast<size_t>(s_.heads * s_.local) * 4; }

  // Every rank's program of one pass, run phase by phase with the exchanges in between.
  template <class MakeProgram>
  void runAll(MakeProgram makeProgram) {
    std::vector<std::unique_ptr<cp::RingProgram>> owned;
    std::vector<cp::RingProgram*> programs;
    for (int r = 0; r < s_.ranks; ++r) {
      owned.push_back(makeProgram(r));
      programs.push_back(owned.back().get());
    }
    cp::runRing(programs.data(), programs.size(), [&] { world_.flush(); });
  }
  // A public call on rank r's stream.
  template <class Call>
  void onRankStream(int r, Call call) {
    REQUIRE_FFPA(ffpaSetStream(handle_, ranks_[r].stream));
    const ffpaStatus_t status = call();
    REQUIRE_FFPA(ffpaSetStream(handle_, nullptr));
    char message[512] = "";
    ffpaGetLastErrorString(message, sizeof message);
    REQUIRE_MESSAGE(status == FFPA_STATUS_SUCCESS, "rank ", r, ": ", message);
  }

  ffpaHandle_t handle_;
  ffpa::Context& context_;
  Shape s_;
  SimulatedWorld world_;
  std::vector<Rank> ranks_;
  std::vector<cp::RingCall> calls_;
  std::vector<std::unique_ptr<DeviceBuffer>> keep_;
  ffpaTensorDescriptor_t qDesc_ = nullptr, lseDesc_ = nullptr;
};

// The whole sequence's problem for the float64 attention, with these sinks (none when empty).
AttentionProblem wholeProblem(const Shape& s, const std::vector<float>& sinks) {
  const int64_t total = s.local * s.ranks;
  AttentionProblem p = attention_shape(1, s.heads, s.headsKv, total, total, s.dim, s.dim,
                                       s.causal ? CausalMask::bottom_right : CausalMask::none);
  p.scale = default_scale(s.dim);
  p.sinks.assign(sinks.begin(), sinks.end());
  for (const SliceRange& x : s.slices) p.slices.push_back({x.q0, x.q1, x.k0, x.k1, x.mask});
  return p;
}

// Float64 attention over the whole sequence.
Outputs exactAttention(const Shape& s, const Inputs& in, const std::vector<float>& sinks) {
  const AttentionProblem p = wholeProblem(s, sinks);
  Outputs e;
  attention_forward(p, in.q.to_dense(), in.k.to_dense(), in.v.to_dense(), &e.o, &e.lse);
  attention_backward(p, in.q.to_dense(), in.k.to_dense(), in.v.to_dense(), in.dO.to_dense(), nullptr, &e.dq, &e.dk,
                     &e.dv, &e.dSinks);
  return e;
}

// Two log-sum-exps compared: the largest difference over the rows where both are finite, and the
// rows where one only is -infinity (a row that sees no key has LSE = -infinity) or either is NaN.
struct LseDifference {
  double worst = 0.0;
  int mismatched = 0;
};
LseDifference compareLse(const std::vector<double>& x, const std::vector<double>& ref) {
  LseDifference d;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(ref[i]) || std::isinf(x[i]) != std::isinf(ref[i])) {
      ++d.mismatched;
    } else if (!std::isinf(ref[i])) {
      d.worst = std::max(d.worst, std::fabs(x[i] - ref[i]));
    }
  }
  return d;
}

void checkRing(const Outputs& ring, const Outputs& plain, const Outputs& exact) {
  checkAgainst("O", ring.o, plain.o, exact.o);
  checkAgainst("dQ", ring.dq, plain.dq, exact.dq);
  checkAgainst("dK", ring.dk, plain.dk, exact.dk);
  checkAgainst("dV", ring.dv, plain.dv, exact.dv);
  const LseDifference lse = compareLse(ring.lse, exact.lse);
  CHECK_MESSAGE(lse.worst <= 1e-2, "largest LSE error ", lse.worst);
  CHECK_MESSAGE(lse.mismatched == 0, lse.mismatched, " rows with LSE NaN, or -infinity in one result only");
}

void runSimulatedRing(const Shape& s, uint64_t seed) {
  CAPTURE(s.text());
  HandleOwner owner;
  const Inputs in(s, seed);
  const Outputs plain = plainAttention(owner.handle, s.causal, in.q, in.k, in.v, in.dO, nullptr, nullptr, s.slices);
  SimulatedRing ring(owner.handle, s, in);
  ring.forward();
  ring.backward();  // with the ring's own O and LSE
  checkRing(ring.gather(), plain, exactAttention(s, in, {}));
}

// Logits a float holds exactly, from below to above the rows' log-sum-exps.
std::vector<float> randomSinks(Random& random, int64_t heads) {
  std::vector<float> sinks;
  for (int64_t h = 0; h < heads; ++h) sinks.push_back(static_cast<float>(random.uniform(-2.0, 5.0)));
  return sinks;
}

bool sameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

struct GraphOwner {
  ~GraphOwner() {
    // A check that failed during the capture left it open: end it, or every later CUDA call of
    // this thread fails and hides the real error.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (origin != nullptr && cudaStreamIsCapturing(origin, &capturing) == cudaSuccess &&
        capturing != cudaStreamCaptureStatusNone) {
      cudaGraph_t unfinished = nullptr;
      cudaStreamEndCapture(origin, &unfinished);
      if (unfinished != nullptr) cudaGraphDestroy(unfinished);
    }
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (origin != nullptr) cudaStreamDestroy(origin);
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
  cudaEvent_t event() {
    events.push_back(nullptr);
    REQUIRE_CUDA(cudaEventCreateWithFlags(&events.back(), cudaEventDisableTiming));
    return events.back();
  }
  cudaStream_t origin = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<cudaEvent_t> events;
};

}  // namespace

TEST_CASE("context parallel: the ring of P = 2..8 simulated ranks equals attention over the whole sequence") {
  uint64_t seed = 1;
  for (int p = 2; p <= 8; ++p)
    for (cp::Sharding sharding : {cp::Sharding::Contiguous, cp::Sharding::Zigzag})
      for (bool causal : {false, true}) runSimulatedRing({p, sharding, causal}, seed++);
}

TEST_CASE("context parallel: a large head dimension and grouped queries on the simulated ring") {
  runSimulatedRing({4, cp::Sharding::Zigzag, true, 8, 2, 64, 512}, 99);
  runSimulatedRing({3, cp::Sharding::Contiguous, false, 4, 1, 48, 576}, 100);
}

TEST_CASE("context parallel: attention slices over the simulated ring, cut into one sliced call per step") {
  // Documents cross the shards' borders, some steps see nothing, the last rows see no key.
  uint64_t seed = 500;
  for (int p = 2; p <= 4; ++p)
    for (cp::Sharding sharding : {cp::Sharding::Contiguous, cp::Sharding::Zigzag}) {
      Shape s{p, sharding, false, 4, 2, 96, 128};
      s.slices = documentSlices(static_cast<int32_t>(s.local * p));
      runSimulatedRing(s, seed++);
    }
  Shape large{3, cp::Sharding::Zigzag, false, 4, 1, 64, 512};
  large.slices = documentSlices(64 * 3);
  runSimulatedRing(large, seed);
}

TEST_CASE("context parallel: attention sinks on the ring, their gradient summed over the ranks") {
  // Each rank applies the (replicated) sinks to its own rows after the ring's forward, runs the
  // ring's backward with the adjusted O and LSE, and takes its rows' share of the sinks'
  // gradient; the shares' sum is the gradient of attention with sinks over the whole sequence.
  for (const Shape& s : {Shape{4, cp::Sharding::Zigzag, true}, Shape{3, cp::Sharding::Contiguous, false, 4, 2, 32, 512}}) {
    CAPTURE(s.text());
    HandleOwner owner;
    const Inputs in(s, 300 + s.ranks);
    Random random(77);
    const std::vector<float> sinkValues = randomSinks(random, s.heads);
    DeviceBuffer sinkBuffer(sinkValues.size() * sizeof(float));
    REQUIRE_CUDA(cudaMemcpy(sinkBuffer.data, sinkValues.data(), sinkValues.size() * sizeof(float),
                            cudaMemcpyHostToDevice));
    const auto* sinks = static_cast<const float*>(sinkBuffer.data);
    const Outputs plain = plainAttention(owner.handle, s.causal, in.q, in.k, in.v, in.dO, nullptr, sinks);
    SimulatedRing ring(owner.handle, s, in);
    ring.forward();
    ring.applySinks(sinks);
    ring.backward();
    const std::vector<double> dSinks = ring.sinksGradient(sinks);
    const Outputs gathered = ring.gather();
    const Outputs exact = exactAttention(s, in, sinkValues);
    checkRing(gathered, plain, exact);
    // The gradient float64 gives from the O' the ranks hold (the backward's delta), and from the
    // exact probabilities.
    const AttentionProblem p = wholeProblem(s, sinkValues);
    const int64_t total = s.local * s.ranks;
    const std::vector<double> dODense = in.dO.to_dense();
    std::vector<double> dq, dk, dv, fromRingO;
    attention_backward(p, in.q.to_dense(), in.k.to_dense(), in.v.to_dense(), dODense, &gathered.o, &dq,
                       &dk, &dv, &fromRingO);
    std::vector<double> termScale(static_cast<size_t>(s.heads), 0.0);
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t row = 0; row < total; ++row) {
        double o2 = 0.0, d2 = 0.0;
        for (int64_t x = 0; x < s.dim; ++x) {
          const size_t at = static_cast<size_t>((h * total + row) * s.dim + x);
          o2 += exact.o[at] * exact.o[at];
          d2 += dODense[at] * dODense[at];
        }
        termScale[h] += std::exp(sinkValues[h] - exact.lse[h * total + row]) * std::sqrt(o2 * d2);
      }
    for (int64_t h = 0; h < s.heads; ++h) {
      CAPTURE(h);
      REQUIRE(std::isfinite(dSinks[h]));
      CHECK_MESSAGE(std::fabs(dSinks[h] - fromRingO[h]) <= 2e-4 * (std::fabs(fromRingO[h]) + 1.0), "ring ",
                    dSinks[h], " float64 from the ring's O' ", fromRingO[h]);
      // Against the exact gradient the error comes from the rounded O' (bf16, and the ring's
      // partials); the terms of the sum cancel (dO is random), so the bound scales with their
      // size, sum_rows exp(s - LSE') * |O'_row| * |dO_row| (Cauchy-Schwarz), not with the sum.
      CHECK_MESSAGE(std::fabs(dSinks[h] - exact.dSinks[h]) <= 1e-2 * termScale[h] + 1e-4, "ring ", dSinks[h],
                    " plain call ", plain.dSinks[h], " float64 ", exact.dSinks[h], " terms ", termScale[h]);
    }
  }
}

namespace {

// Every rank's stream joins the capture from one origin stream; their exchange streams join
// through the ring's own events. The graph, launched twice on poisoned outputs and workspaces,
// gives the bits of the direct run (the kernels are deterministic).
void checkCapturedRing(const Shape& s) {
  CAPTURE(s.text());
  HandleOwner owner;
  const int32_t on = 1;
  REQUIRE_FFPA(ffpaSetPolicy(owner.handle, FFPA_POLICY_DETERMINISTIC, &on, sizeof on));
  const Inputs in(s, 4242);
  SimulatedRing ring(owner.handle, s, in);
  ring.forward();
  ring.backward();
  const Outputs direct = ring.gather();
  const Outputs plain = plainAttention(owner.handle, s.causal, in.q, in.k, in.v, in.dO, nullptr, nullptr, s.slices);
  checkRing(direct, plain, exactAttention(s, in, {}));

  ring.poison();
  GraphOwner g;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&g.origin, cudaStreamNonBlocking));
  const cudaEvent_t start = g.event();
  std::vector<cudaEvent_t> ends;
  for (int r = 0; r < s.ranks; ++r) ends.push_back(g.event());
  REQUIRE_CUDA(cudaStreamBeginCapture(g.origin, cudaStreamCaptureModeThreadLocal));
  REQUIRE_CUDA(cudaEventRecord(start, g.origin));
  for (int r = 0; r < s.ranks; ++r) REQUIRE_CUDA(cudaStreamWaitEvent(ring.stream(r), start, 0));
  ring.forward();
  ring.backward();
  for (int r = 0; r < s.ranks; ++r) {
    REQUIRE_CUDA(cudaEventRecord(ends[r], ring.stream(r)));
    REQUIRE_CUDA(cudaStreamWaitEvent(g.origin, ends[r], 0));
  }
  REQUIRE_CUDA(cudaStreamEndCapture(g.origin, &g.graph));
  // The graph holds every exchange of the schedule, each a device copy of the simulated world:
  // per rank, P - 1 K/V blocks forward, then P - 1 K/V blocks and P dK/dV sums backward.
  size_t count = 0;
  REQUIRE_CUDA(cudaGraphGetNodes(g.graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  REQUIRE_CUDA(cudaGraphGetNodes(g.graph, nodes.data(), &count));
  int copies = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    REQUIRE_CUDA(cudaGraphNodeGetType(node, &type));
    copies += type == cudaGraphNodeTypeMemcpy ? 1 : 0;
  }
  CHECK(copies == s.ranks * (3 * s.ranks - 2));
  REQUIRE_CUDA(cudaGraphInstantiate(&g.exec, g.graph, 0));
  const Outputs captured = ring.gather();
  CHECK_MESSAGE(std::isnan(captured.o[0]), "the capture ran work instead of recording it");
  for (int launch = 0; launch < 2; ++launch) {
    CAPTURE(launch);
    ring.poison();
    REQUIRE_CUDA(cudaGraphLaunch(g.exec, g.origin));
    REQUIRE_CUDA(cudaStreamSynchronize(g.origin));
    const Outputs replayed = ring.gather();
    CHECK(sameBits(replayed.o, direct.o));
    CHECK(sameBits(replayed.lse, direct.lse));
    CHECK(sameBits(replayed.dq, direct.dq));
    CHECK(sameBits(replayed.dk, direct.dk));
    CHECK(sameBits(replayed.dv, direct.dv));
  }
}

}  // namespace

TEST_CASE("context parallel: the simulated ring's forward and backward captured in one CUDA graph") {
  checkCapturedRing({4, cp::Sharding::Zigzag, true, 4, 2, 32, 256});
  // Sliced: the steps' cut slices, made when the ring was planned, are what the graph reads.
  Shape sliced{3, cp::Sharding::Zigzag, false, 4, 2, 64, 256};
  sliced.slices = documentSlices(64 * 3);
  checkCapturedRing(sliced);
}

#if FFPA_HAVE_NCCL
TEST_CASE("context parallel: an NCCL communicator of one rank equals the plain call") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
  HandleOwner owner;
  Random random(5);
  const int64_t n = 96, h = 4, d = 256;
  const HostTensor q = randomTensor(random, h, n, d);
  const HostTensor k = randomTensor(random, h, n, d);
  const HostTensor v = randomTensor(random, h, n, d);
  const HostTensor dO = randomTensor(random, h, n, d);
  for (ffpaSharding_t sharding : {FFPA_SHARDING_CONTIGUOUS, FFPA_SHARDING_ZIGZAG}) {
    CAPTURE(sharding);
    ffpaContextParallel_t ring = nullptr;
    REQUIRE_FFPA(ffpaCreateContextParallel(owner.handle, &ring, comm, sharding));
    int32_t ranks = 0, rank = -1;
    REQUIRE_FFPA(ffpaGetContextParallelInfo(ring, &ranks, &rank, nullptr));
    CHECK(ranks == 1);
    CHECK(rank == 0);
    // Slices through the ring of one rank: one sliced call, its result merged into an empty one.
    const std::vector<SliceRange> documents = documentSlices(static_cast<int32_t>(n));
    const Outputs plainSliced = plainAttention(owner.handle, false, q, k, v, dO, nullptr, nullptr, documents);
    const Outputs slicedRing = plainAttention(owner.handle, false, q, k, v, dO, ring, nullptr, documents);
    CHECK(relativeError(slicedRing.o, plainSliced.o) < 1e-2);
    const LseDifference lse = compareLse(slicedRing.lse, plainSliced.lse);
    CHECK(lse.worst <= 1e-4);
    CHECK(lse.mismatched == 0);  // -infinity on the same rows: those that see nothing
    CHECK(relativeError(slicedRing.dq, plainSliced.dq) < 2e-2);
    CHECK(relativeError(slicedRing.dk, plainSliced.dk) < 2e-2);
    CHECK(relativeError(slicedRing.dv, plainSliced.dv) < 2e-2);
    const Outputs plain = plainAttention(owner.handle, true, q, k, v, dO);
    const Outputs viaRing = plainAttention(owner.handle, true, q, k, v, dO, ring);
    if (sharding == FFPA_SHARDING_CONTIGUOUS) {
      // One block, the plain call's problem: the same bits (a merge of one part is exact).
      CHECK(viaRing.o == plain.o);
      CHECK(viaRing.lse == plain.lse);
      CHECK(viaRing.dq == plain.dq);
      CHECK(viaRing.dk == plain.dk);
      CHECK(viaRing.dv == plain.dv);
    } else {
      CHECK(relativeError(viaRing.o, plain.o) < 1e-2);
      CHECK(relativeError(viaRing.dq, plain.dq) < 2e-2);
      CHECK(relativeError(viaRing.dk, plain.dk) < 2e-2);
    }
    REQUIRE_FFPA(ffpaDestroyContextParallel(ring));
  }
  ncclCommDestroy(comm);
}
#endif
