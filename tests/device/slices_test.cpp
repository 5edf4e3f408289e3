// Attention slices on a GPU: packed variable-length batches, shared prefixes, sliding windows and
// overlapping, uncovered and inverse-causal slices, forward and backward, against float64
// attention with the same slices (outputs poisoned first; rows no slice covers must come out
// O = 0, LSE = -inf, and keys no row sees dK = dV = 0); a packed batch against its sequences run
// one by one, forward and backward.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "attention_checks.h"
#include "common/plan_text.h"

using namespace ffpa_tools;
using namespace device_tests;

namespace {

// One slice per sequence of a packed batch with these lengths, all under `mask`.
std::vector<Slice> packed(const std::vector<int64_t>& lengths, int mask) {
  std::vector<Slice> slices;
  int64_t offset = 0;
  for (const int64_t length : lengths) {
    slices.push_back({offset, offset + length, offset, offset + length, mask});
    offset += length;
  }
  return slices;
}

struct SliceCase {
  const char* what;
  AttentionProblem shape;
  DType dtype;
  LayoutKind layout;
  std::vector<Slice> slices;
};

constexpr int kFull = FFPA_SLICE_MASK_FULL;
constexpr int kCausal = FFPA_SLICE_MASK_CAUSAL;
constexpr int kInverse = FFPA_SLICE_MASK_INVERSE_CAUSAL;
constexpr int kBicausal = FFPA_SLICE_MASK_BICAUSAL;

std::vector<SliceCase> slice_cases() {
  const CausalMask none = CausalMask::none;
  // The sliding window of 24 keys (query i sees [i - 23, i]) over 160 tokens: causal for the
  // first 23 rows, then a bi-causal band whose slice starts 23 rows down.
  const std::vector<Slice> window{{0, 23, 0, 23, kCausal}, {23, 160, 0, 160, kBicausal}};
  // Two documents sharing a 40-token prefix: each sees the prefix in full and itself causally.
  const std::vector<Slice> prefix{{40, 100, 0, 40, kFull}, {40, 100, 40, 100, kCausal},
                                  {100, 200, 0, 40, kFull}, {100, 200, 100, 200, kCausal},
                                  {0, 40, 0, 40, kCausal}};
  // Overlapping query ranges over disjoint keys, an inverse-causal slice, rows 90.. no slice
  // covers and keys 90.. no row sees.
  const std::vector<Slice> sparse{{0, 50, 0, 30, kFull}, {20, 80, 30, 90, kInverse}, {60, 90, 0, 10, kCausal}};
  return {
      {"packed causal batch, GQA, d 512", attention_shape(1, 4, 2, 300, 300, 512, 512, none), DType::bfloat16,
       LayoutKind::bnhd, packed({1, 63, 100, 136}, kCausal)},
      {"packed full batch, MLA-like dims", attention_shape(1, 2, 1, 129, 129, 576, 512, none), DType::float16,
       LayoutKind::bnhd, packed({17, 80, 32}, kFull)},
      {"shared prefix", attention_shape(1, 2, 2, 200, 200, 256, 256, none), DType::bfloat16, LayoutKind::bhnd, prefix},
      {"sliding window", attention_shape(2, 2, 2, 160, 160, 128, 128, none), DType::float16, LayoutKind::padded_aligned,
       window},
      {"overlapping and uncovered slices, fp32", attention_shape(1, 3, 1, 100, 100, 64, 48, none), DType::float32,
       LayoutKind::padded, sparse},
      {"cross attention, more keys than queries", attention_shape(1, 2, 2, 50, 170, 1024, 1024, none),
       DType::bfloat16, LayoutKind::bhnd,
       {{0, 20, 0, 70, kCausal}, {20, 50, 70, 170, kInverse}}},
  };
}

}  // namespace

TEST_CASE("slices: forward and backward against float64 attention with the same slices") {
  Handle handle;
  handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 0);  // the mma.sync kernels; the next case: Hopper's
  Workspace workspace;
  uint64_t start = 7600;
  for (const SliceCase& c : slice_cases()) {
    AttentionProblem shape = c.shape;
    shape.slices = c.slices;
    TestCase test{make_config(shape, c.dtype, c.layout, 0.0), true, ++start};
    INFO(c.what);
    run_and_check(handle, workspace, test, Checked::both);
  }
}

namespace {

// The "kernel: " lines of the forward and backward plans of `p` (slices attached) on `handle`.
std::pair<std::string, std::string> planned_kernels(const Handle& handle, const DeviceProblem& p) {
  size_t length = 0;
  check(ffpaDescribeAttentionForwardPlan(handle.get(), p.attention.get(), p.q.desc.get(), p.k.desc.get(),
                                         p.v.desc.get(), p.o.desc.get(), p.lse.desc.get(), nullptr, 0, &length),
        "ffpaDescribeAttentionForwardPlan");
  std::string forward(length + 1, '\0');
  check(ffpaDescribeAttentionForwardPlan(handle.get(), p.attention.get(), p.q.desc.get(), p.k.desc.get(),
                                         p.v.desc.get(), p.o.desc.get(), p.lse.desc.get(), forward.data(),
                                         forward.size(), nullptr),
        "ffpaDescribeAttentionForwardPlan");
  check(ffpaDescribeAttentionBackwardPlan(handle.get(), p.attention.get(), p.q.desc.get(), p.k.desc.get(),
                                          p.v.desc.get(), p.o.desc.get(), p.d_o.desc.get(), p.lse.desc.get(),
                                          p.dq.desc.get(), p.dk.desc.get(), p.dv.desc.get(), nullptr, 0, &length),
        "ffpaDescribeAttentionBackwardPlan");
  std::string backward(length + 1, '\0');
  check(ffpaDescribeAttentionBackwardPlan(handle.get(), p.attention.get(), p.q.desc.get(), p.k.desc.get(),
                                          p.v.desc.get(), p.o.desc.get(), p.d_o.desc.get(), p.lse.desc.get(),
                                          p.dq.desc.get(), p.dk.desc.get(), p.dv.desc.get(), backward.data(),
                                          backward.size(), nullptr),
        "ffpaDescribeAttentionBackwardPlan");
  return {parsePlanText(forward).kernel, parsePlanText(backward).kernel};
}

}  // namespace

TEST_CASE("slices: the Hopper forward and gradient kernels against float64 attention with the same slices") {
  if (!hopper_runs_here()) return;
  Handle handle;
  handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 1);
  Workspace workspace;
  uint64_t start = 7650;
  int run = 0;
  for (const SliceCase& c : slice_cases()) {
    if (c.shape.dim_v <= 64 || c.dtype == DType::float32) continue;  // the sm90 forward's range
    AttentionProblem shape = c.shape;
    shape.slices = c.slices;
    TestCase test{make_config(shape, c.dtype, c.layout, 0.0), true, ++start};
    INFO(c.what);
    DeviceProblem problem(test.config);
    problem.attach_slices(handle);
    const auto [forward, backward] = planned_kernels(handle, problem);
    CHECK_MESSAGE(forward.rfind("sm90.forward", 0) == 0, forward);
    // The gradient kernels serve d 128..640 here (one CTA up to 256, clusters above); the
    // mma.sync backward may serve the 1024 case.
    if (shape.dim_v <= 640) CHECK_MESSAGE(backward.rfind("sm90.backward", 0) == 0, backward);
    run_and_check(handle, workspace, test, Checked::both);
    ++run;
  }
  CHECK(run == 5);
}

namespace {

// Relative L2 distance of rows [offset, offset + n) of `packed` from rows [0, n) of `alone`
// (both [1, H, *, D]).
double rows_distance(const HostTensor& alone, const HostTensor& packed, int64_t offset, int64_t n) {
  const auto& dims = alone.layout().dims;
  double difference = 0.0, norm = 0.0;
  for (int64_t h = 0; h < dims[1]; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t d = 0; d < dims[3]; ++d) {
        const double x = alone.get(0, h, i, d);
        const double y = packed.get(0, h, offset + i, d);
        difference += (x - y) * (x - y);
        norm += x * x;
      }
    }
  }
  return std::sqrt(difference / (norm > 0.0 ? norm : 1.0));
}

}  // namespace

TEST_CASE("slices: a packed batch equals its sequences run one by one") {
  // The same tokens, packed ([1, H, T, D] over [T, H, D] memory) and per sequence
  // ([1, H, n, D] each, bottom-right causal): the packed forward must give each sequence's rows
  // what the sequence alone gives, to the last bit of bf16 (GEMMs of other shapes may sum in
  // another order) and LSE to 1e-5; the packed backward each sequence's gradients within 1e-2 in
  // relative L2 (its Q tiles start where a sequence's rows start, not at multiples of the tile,
  // so the sums run in another order, and it is given the packed forward's O).
  const std::vector<int64_t> lengths{7, 64, 33};
  const int64_t total = 104, heads = 2, dim = 128;
  AttentionProblem packed_shape = attention_shape(1, heads, heads, total, total, dim, dim, CausalMask::none);
  packed_shape.slices = packed(lengths, kCausal);
  Handle handle;
  Workspace workspace;
  DeviceProblem whole(make_config(packed_shape, DType::bfloat16, LayoutKind::bnhd, 0.0));
  whole.attach_slices(handle);
  whole.fill_inputs(7700);
  whole.forward(handle, workspace, true);
  whole.backward(handle, workspace);
  int64_t offset = 0;
  for (const int64_t n : lengths) {
    DeviceProblem one(make_config(attention_shape(1, heads, heads, n, n, dim, dim, CausalMask::bottom_right),
                                  DType::bfloat16, LayoutKind::bnhd, 0.0));
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t d = 0; d < dim; ++d) {
          one.q.host.set(0, h, i, d, whole.q.host.get(0, h, offset + i, d));
          one.k.host.set(0, h, i, d, whole.k.host.get(0, h, offset + i, d));
          one.v.host.set(0, h, i, d, whole.v.host.get(0, h, offset + i, d));
          one.d_o.host.set(0, h, i, d, whole.d_o.host.get(0, h, offset + i, d));
        }
      }
    }
    for (DeviceTensor* input : {&one.q, &one.k, &one.v, &one.d_o}) input->upload();
    one.forward(handle, workspace, true);
    int64_t differing = 0;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        differing += !(std::fabs(one.lse.host.get(0, h, i) - whole.lse.host.get(0, h, offset + i)) <= 1e-5);
        for (int64_t d = 0; d < dim; ++d) {
          const double alone = one.o.host.get(0, h, i, d);
          differing += !(std::fabs(alone - whole.o.host.get(0, h, offset + i, d)) <= std::fabs(alone) / 128 + 1e-30);
        }
      }
    }
    CHECK_MESSAGE(differing == 0, "sequence at ", offset, " of length ", n, ": ", differing, " values differ");
    one.backward(handle, workspace);
    const std::pair<const char*, double> gradients[] = {
        {"dQ", rows_distance(one.dq.host, whole.dq.host, offset, n)},
        {"dK", rows_distance(one.dk.host, whole.dk.host, offset, n)},
        {"dV", rows_distance(one.dv.host, whole.dv.host, offset, n)}};
    for (const auto& [name, distance] : gradients) {
      CHECK_MESSAGE(distance <= 1e-2, "sequence at ", offset, " of length ", n, ": ", name, " differs by ", distance,
                    " in relative L2");  // NaN fails
    }
    offset += n;
  }
}
