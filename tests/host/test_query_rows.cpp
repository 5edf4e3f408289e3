// Query heads as rows (core/query_rows.h): which forward problems merge the query heads of a group
// into rows of one problem per KV head, with which strides; that the planner plans the merged
// problem, says so in the config and launches the kernel with the call's problem merged again;
// and that FFPA_POLICY_QUERY_HEADS_AS_ROWS = 0 leaves every problem as it is.
#include "core/kernel_registry.h"
#include "core/planner.h"
#include "core/query_rows.h"

#include "core_device.h"

#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <string>

using namespace ffpa;
using ffpa_test::hopper;

namespace {

enum class Layout { Bhnd, Bnhd };

// A forward of B = 2, Hq query heads on Hkv KV heads, Nq rows of d = 64, keys 300, with packed
// Q and O in `layout` and a packed [B, H, N] LSE.
AttentionProblem forward(int64_t headsQ, int64_t headsKv, int64_t seqQ, Layout layout,
                         ffpaCausalMode_t causal = FFPA_CAUSAL_NONE) {
  AttentionProblem p;
  p.dtype = FFPA_DATA_TYPE_BFLOAT16;
  p.batch = 2;
  p.headsQ = headsQ;
  p.headsKv = headsKv;
  p.seqQ = seqQ;
  p.seqKv = 300;
  p.headDimQk = p.headDimV = 64;
  p.causal = causal;
  p.hasLse = true;
  const int64_t d = 64;
  // Strides of dimensions of extent 1 are 0, as stridesOf() gives them.
  const int64_t row = seqQ == 1 ? 0 : layout == Layout::Bhnd ? d : headsQ * d;
  const int64_t head = layout == Layout::Bhnd ? seqQ * d : d;
  p.q = p.o = {headsQ * seqQ * d, head, row, 1};
  p.k = p.v = {headsKv * 300 * d, 300 * d, d, 1};
  p.lse = {headsQ * seqQ, seqQ, seqQ == 1 ? 0 : 1, 0};
  return p;
}

// A payload that records the problem each launch hands it.
class RecordingPayload final : public PlanPayload {
 public:
  explicit RecordingPayload(std::shared_ptr<std::optional<AttentionProblem>> seen) : seen_(std::move(seen)) {}
  void launch(const LaunchArgs& args) const override { *seen_ = args.problem; }

 private:
  std::shared_ptr<std::optional<AttentionProblem>> seen_;
};

// One forward variant that serves everything and records what it plans and launches.
KernelRegistry recordingRegistry(std::shared_ptr<std::optional<AttentionProblem>> planned,
                                 std::shared_ptr<std::optional<AttentionProblem>> launched) {
  KernelRegistry r;
  r.add({"test.any", Direction::Forward, 10, false, [](const PlanRequest&) { return Support::applies(); },
         [planned, launched](const PlanRequest& q) {
           *planned = q.problem;
           Plan plan;
           plan.config = "any";
           plan.payload = std::make_unique<RecordingPayload>(launched);
           return plan;
         },
         {}});
  return r;
}

}  // namespace

TEST_CASE("query heads as rows: one query row merges in any layout, heads one row stride apart") {
  for (const Layout layout : {Layout::Bhnd, Layout::Bnhd}) {
    const AttentionProblem p = forward(16, 2, 1, layout);
    const std::optional<QueryHeadsAsRows> rows = queryHeadsAsRows(p);
    REQUIRE(rows.has_value());
    CHECK(rows->group == 8);
    const AttentionProblem& m = rows->problem;
    CHECK(m.headsQ == 2);
    CHECK(m.headsKv == 2);
    CHECK(m.seqQ == 8);
    CHECK(m.groupSize() == 1);
    const int64_t head = p.q[1];
    CHECK(m.q == Strides{p.q[0], 8 * head, head, 1});
    CHECK(m.o == m.q);
    CHECK(m.lse == Strides{p.lse[0], 8, 1, 0});
    // K, V, sizes and settings are the call's.
    CHECK(m.k == p.k);
    CHECK(m.v == p.v);
    CHECK(m.seqKv == p.seqKv);
    CHECK(m.batch == p.batch);
    CHECK(m.hasLse);
  }
  // One KV head: its stride is 0, as for any dimension of extent 1.
  const std::optional<QueryHeadsAsRows> mqa = queryHeadsAsRows(forward(16, 1, 1, Layout::Bhnd));
  REQUIRE(mqa.has_value());
  CHECK(mqa->problem.q[1] == 0);
  CHECK(mqa->problem.seqQ == 16);
}

TEST_CASE("query heads as rows: short queries merge where Q, O and the LSE form one stride the same way") {
  // Packed [B, H, N, D]: head h's rows follow head h - 1's (head-major), and so do the LSE's.
  const AttentionProblem packed = forward(8, 2, 5, Layout::Bhnd);
  const std::optional<QueryHeadsAsRows> rows = queryHeadsAsRows(packed);
  REQUIRE(rows.has_value());
  CHECK(rows->problem.seqQ == 20);
  CHECK(rows->problem.q == Strides{packed.q[0], 4 * 5 * 64, 64, 1});
  CHECK(rows->problem.lse == Strides{packed.lse[0], 20, 1, 0});
  // [B, N, H, D] with one KV head: row i of head g is row i * G + g (row-major), but the packed
  // LSE is head-major: no merge, unless there is no LSE.
  AttentionProblem mqa = forward(8, 1, 3, Layout::Bnhd);
  CHECK_FALSE(queryHeadsAsRows(mqa).has_value());
  mqa.hasLse = false;
  const std::optional<QueryHeadsAsRows> noLse = queryHeadsAsRows(mqa);
  REQUIRE(noLse.has_value());
  CHECK(noLse->problem.q == Strides{mqa.q[0], 0, 64, 1});
  // [B, N, H, D] of GQA: a row is H heads further, not G: no stride serves both.
  AttentionProblem gqa = forward(8, 2, 3, Layout::Bnhd);
  gqa.hasLse = false;
  CHECK_FALSE(queryHeadsAsRows(gqa).has_value());
  // Padding between heads breaks the head-major stride.
  AttentionProblem padded = packed;
  padded.q[1] += 8;
  CHECK_FALSE(queryHeadsAsRows(padded).has_value());
}

TEST_CASE("query heads as rows: only where every row of a head sees the same keys, and rows are few") {
  CHECK(queryHeadsAsRows(forward(8, 1, 1, Layout::Bhnd, FFPA_CAUSAL_BOTTOM_RIGHT)).has_value());
  CHECK(queryHeadsAsRows(forward(8, 1, 1, Layout::Bhnd, FFPA_CAUSAL_BOTTOM_RIGHT))->problem.causal ==
        FFPA_CAUSAL_NONE);
  // One top-left row sees key 0 only; causal rows see different keys.
  CHECK_FALSE(queryHeadsAsRows(forward(8, 1, 1, Layout::Bhnd, FFPA_CAUSAL_TOP_LEFT)).has_value());
  CHECK_FALSE(queryHeadsAsRows(forward(8, 1, 4, Layout::Bhnd, FFPA_CAUSAL_BOTTOM_RIGHT)).has_value());
  // Heads that do not share K and V, rows that fill a tile, the backward, slices.
  CHECK_FALSE(queryHeadsAsRows(forward(8, 8, 1, Layout::Bhnd)).has_value());
  CHECK(queryHeadsAsRows(forward(8, 1, kFewQueryRows - 1, Layout::Bhnd)).has_value());
  CHECK_FALSE(queryHeadsAsRows(forward(8, 1, kFewQueryRows, Layout::Bhnd)).has_value());
  AttentionProblem backward = forward(8, 1, 1, Layout::Bhnd);
  backward.direction = Direction::Backward;
  CHECK_FALSE(queryHeadsAsRows(backward).has_value());
  AttentionProblem sliced = forward(8, 1, 1, Layout::Bhnd);
  sliced.slices = reinterpret_cast<const slices::SliceTable*>(&sliced);  // present; never read
  CHECK_FALSE(queryHeadsAsRows(sliced).has_value());
}

TEST_CASE("the planner plans the merged problem and launches it with the call's problem merged") {
  auto planned = std::make_shared<std::optional<AttentionProblem>>();
  auto launched = std::make_shared<std::optional<AttentionProblem>>();
  const KernelRegistry registry = recordingRegistry(planned, launched);
  const Planner planner(registry);
  Policy policy;
  const DeviceInfo device = hopper();
  AttentionProblem call = forward(16, 2, 1, Layout::Bnhd);
  const Plan plan = planner.plan({call, policy, device, nullptr});
  CHECK(plan.config == "any query_heads_as_rows=8");
  REQUIRE(planned->has_value());
  CHECK((*planned)->headsQ == 2);
  CHECK((*planned)->seqQ == 8);
  // The call's scale travels with the launch.
  call.scale = 0.25f;
  const DeviceRuntime runtime;
  plan.payload->launch({call, {}, nullptr, 0, nullptr, runtime});
  REQUIRE(launched->has_value());
  CHECK((*launched)->seqQ == 8);
  CHECK((*launched)->q == (*planned)->q);
  CHECK((*launched)->scale == 0.25f);

  // Off: the problem as it is.
  policy.setValue(FFPA_POLICY_QUERY_HEADS_AS_ROWS, 0);
  const Plan plain = planner.plan({call, policy, device, nullptr});
  CHECK(plain.config == "any");
  CHECK((*planned)->seqQ == 1);
  CHECK((*planned)->headsQ == 16);
}

TEST_CASE("with the built-in kernels, MLA decode on an H100 runs the merged problem") {
  const Planner planner(builtinKernels());
  Policy policy;
  policy.setValue(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, 1);
  const DeviceInfo device = hopper();
  // 128 query heads on one KV head of 576 / 512 columns, one query row each.
  AttentionProblem p = forward(128, 1, 1, Layout::Bhnd);
  p.headDimQk = 576;
  p.headDimV = 512;
  p.q = {128 * 576, 576, 0, 1};
  p.k = {4096 * 576, 0, 576, 1};
  p.v = {4096 * 512, 0, 512, 1};
  p.o = {128 * 512, 512, 0, 1};
  p.seqKv = 4096;
  const Plan plan = planner.plan({p, policy, device, nullptr});
  CHECK_MESSAGE(plan.config.find("query_heads_as_rows=128") != std::string::npos, plan.config);
}
