// Query heads as rows: a forward problem whose query heads share K and V (GQA, MQA) and whose
// heads have few query rows each (decode: one) is the same computation as a problem of the KV
// heads whose rows are the query rows of all the heads of a group. Same memory, other strides:
// a row tile then holds up to a tile of query rows that read the same K and V, instead of a
// handful of rows padded to the tile (at one query row, 1 of 64 or 128 rows did work).
//
//   [B, Hq = Hkv * G, Nq, D]  ->  [B, Hkv, G * Nq, D]
//
// Query head h = hkv * G + g, row i becomes row g * Nq + i of KV head hkv (head-major, where a
// head's stride is Nq times a row's, as in packed [B, H, N, D]) or row i * G + g (row-major,
// where a row's stride is G times a head's, as in [B, N, H, D] with one KV head). One query row
// merges either way. Q, O and the LSE must all merge the same way.
//
// The masks stay what they were only without a causal mask, or with one query row and a
// bottom-right causal mask (it sees every key); attention slices are not merged.
#pragma once

#include "core/plan.h"
#include "core/problem.h"

#include <cstdint>
#include <memory>
#include <optional>

namespace ffpa {

// Heads have "few" rows below this: the largest row tile of a forward kernel. Longer queries
// fill their tiles already and keep their plans.
constexpr int64_t kFewQueryRows = 128;

struct QueryHeadsAsRows {
  AttentionProblem problem;  // the merged problem: Hq' = Hkv, Nq' = G * Nq, group size 1
  int64_t group = 1;         // G
};

// The merged problem of `problem`, or nothing where it does not apply (backward, slices, one
// query head per KV head, Nq >= kFewQueryRows, a causal mask other than one bottom-right row,
// strides that do not merge). A function of the problem alone: planning and launching agree.
std::optional<QueryHeadsAsRows> queryHeadsAsRows(const AttentionProblem& problem);

// A plan's payload that launches `inner`, planned for the merged problem, with the call's
// problem merged again at each launch.
std::unique_ptr<const PlanPayload> launchingMergedRows(std::unique_ptr<const PlanPayload> inner);

}  // namespace ffpa
