#include "core/query_rows.h"

#include "core/error.h"

#include <utility>

namespace ffpa {
namespace {

// How the (head of a group, row) pairs of a tensor line up as one row dimension.
enum class Order { HeadMajor, RowMajor };

// The strides [B, Hkv, G * Nq, D] of a tensor whose strides `s` are [B, Hq, Nq, D], or nothing
// where its heads and rows do not form one stride in that order.
std::optional<Strides> mergedStrides(const Strides& s, int64_t group, int64_t rows, int64_t headsKv, Order order) {
  int64_t rowStride = s[1];  // one row: the heads' stride (stridesOf made the rows' 0)
  if (rows > 1) {
    if (order == Order::HeadMajor) {
      if (s[1] != rows * s[2]) return std::nullopt;
      rowStride = s[2];
    } else if (s[2] != group * s[1]) {
      return std::nullopt;
    }
  }
  // A KV head dimension of extent 1 has stride 0, as stridesOf() normalizes it.
  return Strides{s[0], headsKv == 1 ? 0 : group * s[1], rowStride, s[3]};
}

class MergedRowsPayload final : public PlanPayload {
 public:
  explicit MergedRowsPayload(std::unique_ptr<const PlanPayload> inner) : inner_(std::move(inner)) {}

  void launch(const LaunchArgs& args) const override {
    const std::optional<QueryHeadsAsRows> rows = queryHeadsAsRows(args.problem);
    // (The message is built only on failure: this runs on every execute call.)
    if (!rows) {
      fail(FFPA_STATUS_INTERNAL_ERROR, cat("a plan for query heads as rows launched for ", describe(args.problem),
                                           ", whose query heads do not merge"));
    }
    inner_->launch({rows->problem, args.tensors, args.workspace, args.workspaceBytes, args.stream, args.runtime});
  }

 private:
  std::unique_ptr<const PlanPayload> inner_;
};

}  // namespace

std::optional<QueryHeadsAsRows> queryHeadsAsRows(const AttentionProblem& problem) {
  const AttentionProblem& p = problem;
  if (p.direction != Direction::Forward || p.slices != nullptr || p.headsKv <= 0) return std::nullopt;
  const int64_t group = p.groupSize();
  if (group <= 1 || p.seqQ < 1 || p.seqQ >= kFewQueryRows) return std::nullopt;
  // Row i of every head sees the same keys only without a causal mask, or with one row aligned
  // to the last key (bottom-right: it sees them all).
  const bool unmasked =
      p.causal == FFPA_CAUSAL_NONE || (p.seqQ == 1 && p.causal == FFPA_CAUSAL_BOTTOM_RIGHT);
  if (!unmasked) return std::nullopt;
  for (const Order order : {Order::HeadMajor, Order::RowMajor}) {
    const std::optional<Strides> q = mergedStrides(p.q, group, p.seqQ, p.headsKv, order);
    const std::optional<Strides> o = mergedStrides(p.o, group, p.seqQ, p.headsKv, order);
    const std::optional<Strides> lse = mergedStrides(p.lse, group, p.seqQ, p.headsKv, order);
    if (!q || !o || (p.hasLse && !lse)) continue;
    QueryHeadsAsRows merged{p, group};
    AttentionProblem& m = merged.problem;
    m.headsQ = p.headsKv;
    m.seqQ = group * p.seqQ;
    m.causal = FFPA_CAUSAL_NONE;
    m.q = *q;
    m.o = *o;
    if (p.hasLse) m.lse = *lse;
    return merged;
  }
  return std::nullopt;
}

std::unique_ptr<const PlanPayload> launchingMergedRows(std::unique_ptr<const PlanPayload> inner) {
  return std::make_unique<MergedRowsPayload>(std::move(inner));
}

}  // namespace ffpa
