// Scaled dot-product attention in float64 on the CPU: the yardstick libffpa is measured against.
// Written for clarity, not speed: O(Nq * Nkv * (Dqk + Dv)) per head, every step spelled out; the
// (batch, head) units of the whole-tensor functions run on all cores, with results that do not
// depend on how many there are.
//
// Dense tensors are row-major std::vectors:
//   q  [B, Hq,  Nq,  Dqk]     k [B, Hkv, Nkv, Dqk]     v [B, Hkv, Nkv, Dv]
//   o  [B, Hq,  Nq,  Dv ]    dO [B, Hq,  Nq,  Dv ]   lse [B, Hq,  Nq]
// Query head h reads K/V head h / (Hq / Hkv) (grouped-query attention; Hkv = 1 is multi-query).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ffpa_tools {

enum class CausalMask {
  none,          // query i sees every key
  top_left,      // query i sees key j when j <= i
  bottom_right,  // query i sees key j when j <= i + Nkv - Nq (rows i < Nq - Nkv see none)
};

const char* causal_name(CausalMask mask);  // "none", "top-left", "bottom-right"
bool parse_causal(const std::string& name, CausalMask* mask);

// One attention slice (the `slices` group of ffpa/ffpa.h): queries [q0, q1) see keys [k0, k1)
// under `mask`, with i = row - q0, j = key - k0, nq = q1 - q0, nk = k1 - k0:
//   0 full (always), 1 causal (j <= i + nk - nq), 2 inverse-causal (j >= i), 3 bi-causal (both).
struct Slice {
  int64_t q0, q1, k0, k1;
  int mask;
};

struct AttentionProblem {
  int64_t batch = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  int64_t seq_q = 1;
  int64_t seq_kv = 1;
  int64_t dim_qk = 1;
  int64_t dim_v = 1;
  CausalMask causal = CausalMask::none;
  double scale = 1.0;  // multiplies Q.K^T before the softmax
  // Attention sinks: one logit per query head joining every softmax denominator of that head
  // with no value (ffpaAttentionApplySinks). Empty: no sinks.
  std::vector<double> sinks;

  // Attention slices: when not empty, the mask instead of `causal`; a row sees every key a slice
  // gives it (a key given twice counts twice, as the formula says: libffpa rejects such lists).
  std::vector<Slice> slices;

  // Per-batch key counts (FFPA_ATTENTION_KEY_LENGTHS): when not empty, batch entry b has keys
  // [0, keys_of(b)) only, and a bottom-right diagonal ends at its last key.
  std::vector<int64_t> key_lengths;

  // The sink logit of a query head; -inf (no sink) when there are none.
  double sink_of(int64_t query_head) const;

  int64_t kv_head_of(int64_t query_head) const { return query_head / (heads_q / heads_kv); }
  // The keys of batch entry `batch`: seq_kv, or its count of key_lengths clamped to [0, seq_kv].
  int64_t keys_of(int64_t batch) const;
  // Without slices, query `row` of batch entry `batch` sees keys [0, visible_keys(row, batch));
  // 0 means a fully masked row.
  int64_t visible_keys(int64_t row, int64_t batch = 0) const;
  // How many times query `row` sees `key` (0 or 1 but for doubled slices), any mask.
  int times_seen(int64_t row, int64_t key, int64_t batch = 0) const;
  bool sees_no_key(int64_t row, int64_t batch = 0) const;
  bool seen_by_no_query(int64_t key, int64_t batch = 0) const;
  std::string to_string() const;  // "B=1 Hq=4 Hkv=2 Nq=7 Nkv=100 Dqk=40 Dv=24 causal=none ..."
};

// A problem's shape and mask, with scale 1 (see default_scale()).
AttentionProblem attention_shape(int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t seq_q,
                                 int64_t seq_kv, int64_t dim_qk, int64_t dim_v, CausalMask mask);

// libffpa's default softmax scale, 1 / sqrt(Dqk).
inline double default_scale(int64_t dim_qk) {
  return 1.0 / std::sqrt(static_cast<double>(dim_qk));
}

// One query row against one K/V head.
//   q_row [Dqk], k_head [Nkv, Dqk], v_head [Nkv, Dv]  ->  o_row [Dv]
// Returns the log-sum-exp of the scaled scores; a fully masked row gets -inf and o_row = 0.
// With a finite `sink` logit, the sink joins the softmax denominator: O shrinks by the sink's
// share, and a fully masked row gets the sink as its log-sum-exp.
// `batch`: the row's batch entry (its key count, with key_lengths).
double attention_row(const AttentionProblem& problem, int64_t row, const double* q_row,
                     const double* k_head, const double* v_head, double* o_row,
                     double sink = -std::numeric_limits<double>::infinity(), int64_t batch = 0);

// The gradients of one query row, for the loss sum(O * dO).
//   q_row [Dqk], k_head [Nkv, Dqk], v_head [Nkv, Dv], do_row [Dv]  ->  dq_row [Dqk]
// The backward needs delta = dO . O. With `o_row` [Dv] null it is computed from the exact
// probabilities; otherwise from `o_row`, as an implementation does that is given O (rounded to
// its output type) by the forward. dk_head [Nkv, Dqk] and dv_head [Nkv, Dv] receive this row's
// contribution added to them; either may be null when not wanted. Returns the row's share of the
// gradient of its `sink` logit, -exp(sink - lse) * delta (0 without a sink).
double attention_row_backward(const AttentionProblem& problem, int64_t row, const double* q_row,
                              const double* k_head, const double* v_head, const double* do_row,
                              const double* o_row, double* dq_row, double* dk_head, double* dv_head,
                              double sink = -std::numeric_limits<double>::infinity(), int64_t batch = 0);

// Whole tensors, shapes as at the top of this file. `lse` may be null.
void attention_forward(const AttentionProblem& problem, const std::vector<double>& q,
                       const std::vector<double>& k, const std::vector<double>& v,
                       std::vector<double>* o, std::vector<double>* lse);

// dq, dk, dv are resized to the shapes of q, k, v. dK and dV of a K/V head sum over its group.
// `o` is null, or the O [B, Hq, Nq, Dv] that delta is computed from (see attention_row_backward).
// `d_sinks`, when not null, receives the gradient of each head's sink logit [Hq] (0 without sinks).
void attention_backward(const AttentionProblem& problem, const std::vector<double>& q,
                        const std::vector<double>& k, const std::vector<double>& v,
                        const std::vector<double>& d_o, const std::vector<double>* o,
                        std::vector<double>* dq, std::vector<double>* dk, std::vector<double>* dv,
                        std::vector<double>* d_sinks = nullptr);

}  // namespace ffpa_tools
