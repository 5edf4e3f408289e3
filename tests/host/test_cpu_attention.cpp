// The float64 CPU attention's whole-tensor functions (which split the work over threads, one
// (batch, head) unit each) against its row functions called one row at a time in a fixed order:
// the same bits for O, LSE, dQ, dK and dV, with grouped queries, a mask and sinks; and per-batch
// key lengths against each batch entry computed with its keys alone.
#include "common/cpu_attention.h"
#include "common/random.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace ffpa_tools;

namespace {

std::vector<double> randomValues(Random& random, int64_t count) {
  std::vector<double> values(static_cast<size_t>(count));
  for (double& x : values) x = random.uniform(-1.0, 1.0);
  return values;
}

bool sameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

TEST_CASE("cpu attention: whole tensors on threads equal the rows one by one") {
  // 3 batches x 2 K/V heads of 3 query heads: more units than most machines have cores, and
  // rows that see no key (bottom-right, Nq > Nkv).
  AttentionProblem p = attention_shape(3, 6, 2, 9, 7, 5, 4, CausalMask::bottom_right);
  p.scale = 0.4;
  p.sinks = {0.5, -1.0, 2.0, 0.0, -0.25, 1.5};
  Random random(2024);
  const std::vector<double> q = randomValues(random, p.batch * p.heads_q * p.seq_q * p.dim_qk);
  const std::vector<double> k = randomValues(random, p.batch * p.heads_kv * p.seq_kv * p.dim_qk);
  const std::vector<double> v = randomValues(random, p.batch * p.heads_kv * p.seq_kv * p.dim_v);
  const std::vector<double> d_o = randomValues(random, p.batch * p.heads_q * p.seq_q * p.dim_v);

  std::vector<double> o, lse, dq, dk, dv, d_sinks;
  attention_forward(p, q, k, v, &o, &lse);
  attention_backward(p, q, k, v, d_o, &o, &dq, &dk, &dv, &d_sinks);

  std::vector<double> row_o(o.size()), row_lse(lse.size()), row_dq(q.size()), row_dk(k.size(), 0.0),
      row_dv(v.size(), 0.0), row_d_sinks(p.sinks.size(), 0.0);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t kv = b * p.heads_kv + p.kv_head_of(h);  // (batch, K/V head)
      const double* k_head = k.data() + kv * p.seq_kv * p.dim_qk;
      const double* v_head = v.data() + kv * p.seq_kv * p.dim_v;
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const int64_t row = (b * p.heads_q + h) * p.seq_q + i;
        row_lse[row] = attention_row(p, i, q.data() + row * p.dim_qk, k_head, v_head,
                                     row_o.data() + row * p.dim_v, p.sinks[h]);
      }
    }
  }
  CHECK(sameBits(o, row_o));
  CHECK(sameBits(lse, row_lse));

  // dK and dV of a K/V head sum over its query heads, then rows, in order; the sinks' gradients
  // over rows, then batches.
  std::vector<double> per_batch(static_cast<size_t>(p.batch * p.heads_q), 0.0);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t kv = b * p.heads_kv + p.kv_head_of(h);
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const int64_t row = (b * p.heads_q + h) * p.seq_q + i;
        per_batch[b * p.heads_q + h] += attention_row_backward(
            p, i, q.data() + row * p.dim_qk, k.data() + kv * p.seq_kv * p.dim_qk,
            v.data() + kv * p.seq_kv * p.dim_v, d_o.data() + row * p.dim_v, o.data() + row * p.dim_v,
            row_dq.data() + row * p.dim_qk, row_dk.data() + kv * p.seq_kv * p.dim_qk,
            row_dv.data() + kv * p.seq_kv * p.dim_v, p.sinks[h]);
      }
    }
  }
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) row_d_sinks[h] += per_batch[b * p.heads_q + h];
  }
  CHECK(sameBits(dq, row_dq));
  CHECK(sameBits(dk, row_dk));
  CHECK(sameBits(dv, row_dv));
  CHECK(sameBits(d_sinks, row_d_sinks));
  // The problem is not degenerate: a row sees no key, the others do, and the sinks have gradients.
  CHECK(p.sees_no_key(0));
  CHECK_FALSE(p.sees_no_key(p.seq_q - 1));
  for (const double g : d_sinks) CHECK(g != 0.0);
}

TEST_CASE("cpu attention: per-batch key lengths equal each batch entry computed with its keys alone") {
  // Entries of 0, 3 and all 7 keys under a bottom-right diagonal (which ends at each entry's last
  // key) and top-left, and a count past Nkv (clamped); NaN in K and V past each entry's keys.
  for (const CausalMask mask : {CausalMask::bottom_right, CausalMask::top_left, CausalMask::none}) {
    AttentionProblem p = attention_shape(4, 4, 2, 5, 7, 6, 3, mask);
    p.scale = 0.3;
    p.key_lengths = {0, 3, 7, 99};
    Random random(77);
    std::vector<double> q = randomValues(random, p.batch * p.heads_q * p.seq_q * p.dim_qk);
    std::vector<double> k = randomValues(random, p.batch * p.heads_kv * p.seq_kv * p.dim_qk);
    std::vector<double> v = randomValues(random, p.batch * p.heads_kv * p.seq_kv * p.dim_v);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads_kv; ++h)
        for (int64_t key = p.keys_of(b); key < p.seq_kv; ++key) {
          k[static_cast<size_t>(((b * p.heads_kv + h) * p.seq_kv + key) * p.dim_qk)] = std::nan("");
          v[static_cast<size_t>(((b * p.heads_kv + h) * p.seq_kv + key) * p.dim_v)] = std::nan("");
        }
    CHECK(p.keys_of(0) == 0);
    CHECK(p.keys_of(3) == 7);
    std::vector<double> o, lse;
    attention_forward(p, q, k, v, &o, &lse);
    for (int64_t b = 0; b < p.batch; ++b) {
      // Entry b alone, with its keys only.
      AttentionProblem one = p;
      one.batch = 1;
      one.seq_kv = p.keys_of(b);
      one.key_lengths.clear();
      const auto slice = [&](const std::vector<double>& x, int64_t heads, int64_t seq, int64_t keep, int64_t dim) {
        std::vector<double> out;
        for (int64_t h = 0; h < heads; ++h) {
          const auto first = x.begin() + ((b * heads + h) * seq) * dim;
          out.insert(out.end(), first, first + keep * dim);
        }
        return out;
      };
      std::vector<double> oneO, oneLse;
      attention_forward(one, slice(q, p.heads_q, p.seq_q, p.seq_q, p.dim_qk),
                        slice(k, p.heads_kv, p.seq_kv, one.seq_kv, p.dim_qk),
                        slice(v, p.heads_kv, p.seq_kv, one.seq_kv, p.dim_v), &oneO, &oneLse);
      const std::vector<double> entryO(o.begin() + b * p.heads_q * p.seq_q * p.dim_v,
                                       o.begin() + (b + 1) * p.heads_q * p.seq_q * p.dim_v);
      const std::vector<double> entryLse(lse.begin() + b * p.heads_q * p.seq_q,
                                         lse.begin() + (b + 1) * p.heads_q * p.seq_q);
      CHECK_MESSAGE(sameBits(entryO, oneO), causal_name(mask) << " entry " << b);
      CHECK_MESSAGE(sameBits(entryLse, oneLse), causal_name(mask) << " entry " << b);
      for (int64_t row = 0; row < p.seq_q; ++row) CHECK(p.sees_no_key(row, b) == one.sees_no_key(row));
    }
  }
}
