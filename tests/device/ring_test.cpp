// Context-parallel attention on one GPU. The ring itself: P = 2..8 ranks simulated in one process
// (each its own stream, exchange stream, buffers and workspace; the exchanges are device copies
// between the ranks' buffers, issued phase by phase as the schedule says), for both shardings,
// with and without a causal mask, forward and backward, gathered and checked against attention
// over the whole sequence: the library's plain call and float64 on the CPU, the ring's error
// within twice the plain call's (plus a little for the ring's extra roundings). Then a real NCCL
// communicator of one rank through the public API, which must equal the plain call.
#include "core/descriptors.h"
#include "core/handle.h"
#include "core/problem.h"
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

  std::string text() const {
    return std::string(cp::shardingName(sharding)) + (causal ? " causal" : " full") + " P=" +
           std::to_string(ranks) + " n=" + std::to_string(local) + " d=" + std::to_string(dim);
  }
};

// [1, H, N, D] bf16 on the host with float64 values (rounded to bf16), dense.
struct Host {
  Host(int64_t h, int64_t n, int64_t d)
      : h(h), n(n), d(d), tensor(DType::bfloat16, attention_layout(LayoutKind::bhnd, 1, h, n, d)) {}
  int64_t h, n, d;
  HostTensor tensor;
};

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

// Plain attention over the whole sequence through the public API: O, LSE, dQ, dK, dV.
struct PlainResult {
  std::vector<double> o, lse, dq, dk, dv;
};

PlainResult plainAttention(ffpaHandle_t handle, bool causal, const HostTensor& q, const HostTensor& k,
                           const HostTensor& v, const HostTensor& dO, ffpaContextParallel_t ring = nullptr) {
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
  ffpaTensorDescriptor_t qd = descriptor(FFPA_DATA_TYPE_BFLOAT16, {1, h, n, d});
  ffpaTensorDescriptor_t kd = descriptor(FFPA_DATA_TYPE_BFLOAT16, {1, hkv, nk, d});
  ffpaTensorDescriptor_t ld = descriptor(FFPA_DATA_TYPE_FLOAT32, {1, h, n});
  ffpaAttentionDescriptor_t attn = nullptr;
  REQUIRE_FFPA(ffpaCreateAttentionDescriptor(&attn));
  const int32_t mode = causal ? FFPA_CAUSAL_BOTTOM_RIGHT : FFPA_CAUSAL_NONE;
  REQUIRE_FFPA(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &mode, sizeof mode));
  REQUIRE_FFPA(ffpaSetAttentionDescriptorContextParallel(attn, ring));
  size_t fb = 0, bb = 0;
  REQUIRE_FFPA(ffpaGetAttentionForwardWorkspaceSize(handle, attn, qd, kd, kd, qd, ld, &fb));
  REQUIRE_FFPA(ffpaGetAttentionBackwardWorkspaceSize(handle, attn, qd, kd, kd, qd, qd, ld, qd, kd, kd, &bb));
  DeviceBuffer ws(std::max(fb, bb));
  REQUIRE_FFPA(ffpaAttentionForward(handle, attn, qd, dq_, kd, dk_, kd, dv_, qd, o, ld, lse, ws.data, fb));
  REQUIRE_FFPA(ffpaAttentionBackward(handle, attn, qd, dq_, kd, dk_, kd, dv_, qd, o, qd, ddo, ld, lse, qd, gq, kd,
                                     gk, kd, gv, ws.data, bb));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  PlainResult r;
  r.o = download(o, DType::bfloat16, ql).to_dense();
  r.lse = download(lse, DType::float32, lse_layout(LayoutKind::bhnd, 1, h, n)).to_dense();
  r.dq = download(gq, DType::bfloat16, ql).to_dense();
  r.dk = download(gk, DType::bfloat16, kl).to_dense();
  r.dv = download(gv, DType::bfloat16, kl).to_dense();
  ffpaDestroyAttentionDescriptor(attn);
  for (auto* t : {qd, kd, ld}) ffpaDestroyTensorDescriptor(t);
  return r;
}

struct HandleOwner {
  HandleOwner() { REQUIRE_FFPA(ffpaCreate(&handle)); }
  ~HandleOwner() { ffpaDestroy(handle); }
  ffpaHandle_t handle = nullptr;
};

void runSimulatedRing(const Shape& s, uint64_t seed) {
  CAPTURE(s.text());
  HandleOwner owner;
  ffpa::Context& context = ffpa::contextOf(owner.handle);
  const int64_t total = s.local * s.ranks;
  Random random(seed);
  const HostTensor q = randomTensor(random, s.heads, total, s.dim);
  const HostTensor k = randomTensor(random, s.headsKv, total, s.dim);
  const HostTensor v = randomTensor(random, s.headsKv, total, s.dim);
  const HostTensor dO = randomTensor(random, s.heads, total, s.dim);
  const PlainResult plain = plainAttention(owner.handle, s.causal, q, k, v, dO);

  AttentionProblem exactProblem = attention_shape(1, s.heads, s.headsKv, total, total, s.dim, s.dim,
                                                  s.causal ? CausalMask::bottom_right : CausalMask::none);
  exactProblem.scale = default_scale(s.dim);
  std::vector<double> exactO, exactLse, exactDq, exactDk, exactDv;
  attention_forward(exactProblem, q.to_dense(), k.to_dense(), v.to_dense(), &exactO, &exactLse);
  attention_backward(exactProblem, q.to_dense(), k.to_dense(), v.to_dense(), dO.to_dense(), nullptr, &exactDq,
                     &exactDk, &exactDv);

  ffpa::AttentionSettings settings;
  settings.causal = s.causal ? FFPA_CAUSAL_BOTTOM_RIGHT : FFPA_CAUSAL_NONE;
  const int64_t qDims[4] = {1, s.heads, s.local, s.dim}, kDims[4] = {1, s.headsKv, s.local, s.dim};
  const int64_t lDims[3] = {1, s.heads, s.local};
  const auto qL = ffpa::makeTensorLayout(FFPA_DATA_TYPE_BFLOAT16, 4, qDims, nullptr);
  const auto kL = ffpa::makeTensorLayout(FFPA_DATA_TYPE_BFLOAT16, 4, kDims, nullptr);
  const auto lL = ffpa::makeTensorLayout(FFPA_DATA_TYPE_FLOAT32, 3, lDims, nullptr);
  const ffpa::AttentionProblem fwdLocal = ffpa::forwardProblem(settings, qL, kL, kL, qL, &lL);
  const ffpa::AttentionProblem bwdLocal =
      ffpa::backwardProblem(settings, {&qL, &kL, &kL, &qL, &qL, &lL, &qL, &kL, &kL});

  SimulatedWorld world(s.ranks);
  std::vector<std::unique_ptr<DeviceBuffer>> keep;
  struct RankState {
    cudaStream_t stream = nullptr;
    std::unique_ptr<cp::RingStreams> streams;
    cp::RingPlan forward, backward;
    void *q, *k, *v, *dO, *o, *dq, *dk, *dv, *workspace;
    float* lse;
  };
  std::vector<RankState> ranks(s.ranks);
  const size_t qBytes = static_cast<size_t>(s.heads * s.local * s.dim) * 2;
  const size_t kBytes = static_cast<size_t>(s.headsKv * s.local * s.dim) * 2;
  for (int r = 0; r < s.ranks; ++r) {
    RankState& st = ranks[r];
    REQUIRE_CUDA(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
    st.streams = std::make_unique<cp::RingStreams>(context.device().ordinal);
    const ffpa::CallSnapshot snapshot = context.snapshot();
    st.forward = cp::planRing(context, *snapshot.policy, true, fwdLocal, s.ranks, r, s.sharding);
    st.backward = cp::planRing(context, *snapshot.policy, true, bwdLocal, s.ranks, r, s.sharding);
    st.q = upload(shardOf(q, s, r), keep);
    st.k = upload(shardOf(k, s, r), keep);
    st.v = upload(shardOf(v, s, r), keep);
    st.dO = upload(shardOf(dO, s, r), keep);
    st.o = poisoned(qBytes, keep);
    st.lse = static_cast<float*>(poisoned(static_cast<size_t>(s.heads * s.local) * 4, keep));
    st.dq = poisoned(qBytes, keep);
    st.dk = poisoned(kBytes, keep);
    st.dv = poisoned(kBytes, keep);
    st.workspace = poisoned(std::max(st.forward.workspaceBytes, st.backward.workspaceBytes), keep);
  }
  std::vector<cp::RingCall> calls;
  for (int r = 0; r < s.ranks; ++r) {
    ffpa::CallSnapshot snapshot = context.snapshot();
    snapshot.stream = ranks[r].stream;
    calls.push_back({context, snapshot, world.transport(r), *ranks[r].streams, ranks[r].workspace});
  }
  // Every rank's program of one pass, run phase by phase with the exchanges in between.
  const auto runAll = [&](auto makeProgram) {
    std::vector<std::unique_ptr<cp::RingProgram>> owned;
    std::vector<cp::RingProgram*> programs;
    for (int r = 0; r < s.ranks; ++r) {
      owned.push_back(makeProgram(r));
      programs.push_back(owned.back().get());
    }
    cp::runRing(programs.data(), programs.size(), [&] { world.flush(); });
  };
  // Forward, then backward with the ring's own O and LSE.
  runAll([&](int r) {
    ffpa::TensorArgs t;
    t.q = ranks[r].q;
    t.k = ranks[r].k;
    t.v = ranks[r].v;
    t.out = ranks[r].o;
    t.lseOut = ranks[r].lse;
    return cp::ringForward(ranks[r].forward, calls[r], t);
  });
  runAll([&](int r) {
    ffpa::TensorArgs t;
    t.q = ranks[r].q;
    t.k = ranks[r].k;
    t.v = ranks[r].v;
    t.o = ranks[r].o;
    t.dO = ranks[r].dO;
    t.lse = ranks[r].lse;
    t.dq = ranks[r].dq;
    t.dk = ranks[r].dk;
    t.dv = ranks[r].dv;
    return cp::ringBackward(ranks[r].backward, calls[r], t);
  });
  REQUIRE_CUDA(cudaDeviceSynchronize());

  std::vector<double> o(plain.o.size()), lse(plain.lse.size()), dq(plain.dq.size()), dk(plain.dk.size()),
      dv(plain.dv.size());
  const TensorLayout qLocal = attention_layout(LayoutKind::bhnd, 1, s.heads, s.local, s.dim);
  const TensorLayout kLocal = attention_layout(LayoutKind::bhnd, 1, s.headsKv, s.local, s.dim);
  const TensorLayout lLocal = lse_layout(LayoutKind::bhnd, 1, s.heads, s.local);
  for (int r = 0; r < s.ranks; ++r) {
    unshard(o, download(ranks[r].o, DType::bfloat16, qLocal), s, r, total);
    unshard(lse, download(ranks[r].lse, DType::float32, lLocal), s, r, total);
    unshard(dq, download(ranks[r].dq, DType::bfloat16, qLocal), s, r, total);
    unshard(dk, download(ranks[r].dk, DType::bfloat16, kLocal), s, r, total);
    unshard(dv, download(ranks[r].dv, DType::bfloat16, kLocal), s, r, total);
    cudaStreamDestroy(ranks[r].stream);
  }
  checkAgainst("O", o, plain.o, exactO);
  checkAgainst("dQ", dq, plain.dq, exactDq);
  checkAgainst("dK", dk, plain.dk, exactDk);
  checkAgainst("dV", dv, plain.dv, exactDv);
  double worst = 0.0;
  for (size_t i = 0; i < lse.size(); ++i) worst = std::max(worst, std::fabs(lse[i] - exactLse[i]));
  CHECK_MESSAGE(worst <= 1e-2, "largest LSE error ", worst);
}

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
    const PlainResult plain = plainAttention(owner.handle, true, q, k, v, dO);
    const PlainResult viaRing = plainAttention(owner.handle, true, q, k, v, dO, ring);
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
