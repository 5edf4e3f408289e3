#include "common/cpu_attention.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ffpa_tools {
namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// Runs work(unit) for every unit in [0, units) on up to one thread per core. Each unit is done by
// one thread alone and writes only its own outputs, so the results do not depend on the number
// of threads (the large problems of the device tests would otherwise take minutes on one core).
template <class Work>
void for_each_unit(int64_t units, const Work& work) {
  const int64_t threads = std::min<int64_t>(units, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_lock;
  const auto worker = [&] {
    try {
      for (int64_t unit = next++; unit < units; unit = next++) work(unit);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_lock);
      if (!failure) failure = std::current_exception();
      next = units;  // the others stop after their current unit
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

double dot(const double* a, const double* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// out += factor * x, over n elements.
void add_scaled(double* out, double factor, const double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += factor * x[i];
}

// The softmax of one query row over the keys it sees (and the sink, when finite):
//   p[j] = times_seen(row, j) * exp(scale * q . k_j - lse), 0 for the masked keys.
// p has Nkv entries. Returns lse, or -inf (and p all 0) for a fully masked row without a sink.
double row_probabilities(const AttentionProblem& problem, int64_t batch, int64_t row, const double* q_row,
                         const double* k_head, std::vector<double>& p, double sink) {
  p.assign(static_cast<size_t>(problem.seq_kv), 0.0);
  std::vector<int> seen(static_cast<size_t>(problem.seq_kv));
  bool any = false;
  for (int64_t j = 0; j < problem.seq_kv; ++j) {
    seen[j] = problem.times_seen(row, j, batch);
    any = any || seen[j] > 0;
  }
  if (!any) return sink;
  double max_score = sink;
  for (int64_t j = 0; j < problem.seq_kv; ++j) {
    if (seen[j] == 0) continue;
    p[j] = problem.scale * dot(q_row, k_head + j * problem.dim_qk, problem.dim_qk);
    max_score = std::max(max_score, p[j]);
  }
  double sum = sink == kMinusInfinity ? 0.0 : std::exp(sink - max_score);
  for (int64_t j = 0; j < problem.seq_kv; ++j) {
    if (seen[j] == 0) continue;
    p[j] = seen[j] * std::exp(p[j] - max_score);
    sum += p[j];
  }
  for (double& value : p) value /= sum;
  return max_score + std::log(sum);
}

bool slice_sees(const Slice& s, int64_t row, int64_t key) {
  if (row < s.q0 || row >= s.q1 || key < s.k0 || key >= s.k1) return false;
  const int64_t i = row - s.q0;
  const int64_t j = key - s.k0;
  const bool causal = j <= i + (s.k1 - s.k0) - (s.q1 - s.q0);
  const bool inverse = j >= i;
  switch (s.mask) {
    case 0: return true;
    case 1: return causal;
    case 2: return inverse;
    case 3: return causal && inverse;
    default: throw std::invalid_argument("cpu attention: slice mask must be 0..3");
  }
}

// Offset of the [N, D] block of (batch, head) in a dense [B, H, N, D] tensor.
size_t head_offset(int64_t batch, int64_t head, int64_t heads, int64_t seq, int64_t dim) {
  return static_cast<size_t>(((batch * heads + head) * seq) * dim);
}

void require_size(const std::vector<double>& tensor, int64_t expected, const char* name) {
  if (static_cast<int64_t>(tensor.size()) != expected) {
    throw std::invalid_argument(std::string("cpu attention: tensor ") + name +
                                " has the wrong number of elements");
  }
}

void require_shapes(const AttentionProblem& p, const std::vector<double>& q,
                    const std::vector<double>& k, const std::vector<double>& v) {
  if (p.heads_kv < 1 || p.heads_q % p.heads_kv != 0) {
    throw std::invalid_argument("cpu attention: Hq must be a multiple of Hkv");
  }
  require_size(q, p.batch * p.heads_q * p.seq_q * p.dim_qk, "q");
  require_size(k, p.batch * p.heads_kv * p.seq_kv * p.dim_qk, "k");
  require_size(v, p.batch * p.heads_kv * p.seq_kv * p.dim_v, "v");
}

}  // namespace

const char* causal_name(CausalMask mask) {
  switch (mask) {
    case CausalMask::none: return "none";
    case CausalMask::top_left: return "top-left";
    case CausalMask::bottom_right: return "bottom-right";
  }
  return "?";
}

bool parse_causal(const std::string& name, CausalMask* mask) {
  for (CausalMask candidate : {CausalMask::none, CausalMask::top_left, CausalMask::bottom_right}) {
    if (name == causal_name(candidate)) {
      *mask = candidate;
      return true;
    }
  }
  return false;
}

AttentionProblem attention_shape(int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t seq_q,
                                 int64_t seq_kv, int64_t dim_qk, int64_t dim_v, CausalMask mask) {
  AttentionProblem p;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seq_q = seq_q;
  p.seq_kv = seq_kv;
  p.dim_qk = dim_qk;
  p.dim_v = dim_v;
  p.causal = mask;
  return p;
}

double AttentionProblem::sink_of(int64_t query_head) const {
  return sinks.empty() ? kMinusInfinity : sinks.at(static_cast<size_t>(query_head));
}

int64_t AttentionProblem::keys_of(int64_t batch) const {
  if (key_lengths.empty()) return seq_kv;
  return std::clamp<int64_t>(key_lengths.at(static_cast<size_t>(batch)), 0, seq_kv);
}

int64_t AttentionProblem::visible_keys(int64_t row, int64_t batch) const {
  const int64_t keys = keys_of(batch);
  int64_t last_visible = keys - 1;  // the index of the last key query `row` sees
  if (causal == CausalMask::top_left) last_visible = row;
  if (causal == CausalMask::bottom_right) last_visible = row + keys - seq_q;
  return std::clamp<int64_t>(last_visible + 1, 0, keys);
}

int AttentionProblem::times_seen(int64_t row, int64_t key, int64_t batch) const {
  if (slices.empty()) return key < visible_keys(row, batch) ? 1 : 0;
  int times = 0;
  for (const Slice& s : slices) times += slice_sees(s, row, key) ? 1 : 0;
  return times;
}

bool AttentionProblem::sees_no_key(int64_t row, int64_t batch) const {
  for (int64_t key = 0; key < seq_kv; ++key) {
    if (times_seen(row, key, batch) > 0) return false;
  }
  return true;
}

bool AttentionProblem::seen_by_no_query(int64_t key, int64_t batch) const {
  for (int64_t row = 0; row < seq_q; ++row) {
    if (times_seen(row, key, batch) > 0) return false;
  }
  return true;
}

std::string AttentionProblem::to_string() const {
  std::ostringstream text;
  text << "B=" << batch << " Hq=" << heads_q << " Hkv=" << heads_kv << " Nq=" << seq_q
       << " Nkv=" << seq_kv << " Dqk=" << dim_qk << " Dv=" << dim_v
       << " causal=" << causal_name(causal) << " scale=" << scale;
  if (!slices.empty()) text << " slices=" << slices.size();
  if (!key_lengths.empty()) {
    text << " key_lengths=";
    for (size_t b = 0; b < key_lengths.size(); ++b) text << (b ? "," : "") << key_lengths[b];
  }
  return text.str();
}

double attention_row(const AttentionProblem& problem, int64_t row, const double* q_row,
                     const double* k_head, const double* v_head, double* o_row, double sink, int64_t batch) {
  std::vector<double> p;
  const double lse = row_probabilities(problem, batch, row, q_row, k_head, p, sink);
  std::fill(o_row, o_row + problem.dim_v, 0.0);
  for (int64_t j = 0; j < problem.seq_kv; ++j) {
    if (p[j] != 0.0) add_scaled(o_row, p[j], v_head + j * problem.dim_v, problem.dim_v);
  }
  return lse;
}

double attention_row_backward(const AttentionProblem& problem, int64_t row, const double* q_row,
                              const double* k_head, const double* v_head, const double* do_row,
                              const double* o_row, double* dq_row, double* dk_head, double* dv_head,
                              double sink, int64_t batch) {
  // With s = scale * q . k_j, p = softmax(s) and O = sum_j p_j v_j:
  //   dV_j += p_j dO            dP_j = dO . v_j           delta = sum_j p_j dP_j  (= dO . O)
  //   dS_j = p_j (dP_j - delta) dQ = scale sum_j dS_j k_j  dK_j += scale dS_j q
  // A sink is one more score with a value of 0: its dP is 0, so dS_sink = -p_sink delta.
  std::vector<double> p;
  const double lse = row_probabilities(problem, batch, row, q_row, k_head, p, sink);
  std::vector<double> dp(static_cast<size_t>(problem.seq_kv), 0.0);
  double delta = 0.0;
  for (int64_t j = 0; j < problem.seq_kv; ++j) {
    if (p[j] == 0.0) continue;
    dp[j] = dot(do_row, v_head + j * problem.dim_v, problem.dim_v);
    delta += p[j] * dp[j];
  }
  if (o_row) delta = dot(do_row, o_row, problem.dim_v);
  std::fill(dq_row, dq_row + problem.dim_qk, 0.0);
  for (int64_t j = 0; j < problem.seq_kv; ++j) {
    if (p[j] == 0.0) continue;  // masked (an underflowed probability adds nothing either)
    const double ds = p[j] * (dp[j] - delta);
    add_scaled(dq_row, problem.scale * ds, k_head + j * problem.dim_qk, problem.dim_qk);
    if (dk_head)
      add_scaled(dk_head + j * problem.dim_qk, problem.scale * ds, q_row, problem.dim_qk);
    if (dv_head) add_scaled(dv_head + j * problem.dim_v, p[j], do_row, problem.dim_v);
  }
  return sink == kMinusInfinity ? 0.0 : -std::exp(sink - lse) * delta;
}

void attention_forward(const AttentionProblem& problem, const std::vector<double>& q,
                       const std::vector<double>& k, const std::vector<double>& v,
                       std::vector<double>* o, std::vector<double>* lse) {
  const AttentionProblem& p = problem;
  require_shapes(p, q, k, v);
  o->assign(static_cast<size_t>(p.batch * p.heads_q * p.seq_q * p.dim_v), 0.0);
  if (lse) lse->assign(static_cast<size_t>(p.batch * p.heads_q * p.seq_q), 0.0);
  // A unit per (batch, query head): its rows of O and LSE.
  for_each_unit(p.batch * p.heads_q, [&](int64_t unit) {
    const int64_t b = unit / p.heads_q;
    const int64_t h = unit % p.heads_q;
    const int64_t kv = p.kv_head_of(h);
    const double* k_head = k.data() + head_offset(b, kv, p.heads_kv, p.seq_kv, p.dim_qk);
    const double* v_head = v.data() + head_offset(b, kv, p.heads_kv, p.seq_kv, p.dim_v);
    for (int64_t i = 0; i < p.seq_q; ++i) {
      const double* q_row = q.data() + head_offset(b, h, p.heads_q, p.seq_q, p.dim_qk) + i * p.dim_qk;
      double* o_row = o->data() + head_offset(b, h, p.heads_q, p.seq_q, p.dim_v) + i * p.dim_v;
      const double row_lse = attention_row(p, i, q_row, k_head, v_head, o_row, p.sink_of(h), b);
      if (lse) (*lse)[head_offset(b, h, p.heads_q, p.seq_q, 1) + i] = row_lse;
    }
  });
}

void attention_backward(const AttentionProblem& problem, const std::vector<double>& q,
                        const std::vector<double>& k, const std::vector<double>& v,
                        const std::vector<double>& d_o, const std::vector<double>* o,
                        std::vector<double>* dq, std::vector<double>* dk, std::vector<double>* dv,
                        std::vector<double>* d_sinks) {
  const AttentionProblem& p = problem;
  require_shapes(p, q, k, v);
  require_size(d_o, p.batch * p.heads_q * p.seq_q * p.dim_v, "dO");
  if (o) require_size(*o, p.batch * p.heads_q * p.seq_q * p.dim_v, "o");
  dq->assign(q.size(), 0.0);
  dk->assign(k.size(), 0.0);
  dv->assign(v.size(), 0.0);
  // A unit per (batch, K/V head): the dQ rows of its query heads, and its dK and dV, which sum
  // over them in a fixed order (head, then row). The sinks' gradients are summed per (batch,
  // query head) first, then over the batch in order.
  const int64_t group = p.heads_q / p.heads_kv;
  std::vector<double> sink_parts(static_cast<size_t>(p.batch * p.heads_q), 0.0);
  for_each_unit(p.batch * p.heads_kv, [&](int64_t unit) {
    const int64_t b = unit / p.heads_kv;
    const int64_t kv = unit % p.heads_kv;
    const size_t k_at = head_offset(b, kv, p.heads_kv, p.seq_kv, p.dim_qk);
    const size_t v_at = head_offset(b, kv, p.heads_kv, p.seq_kv, p.dim_v);
    for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
      double& sink_part = sink_parts[static_cast<size_t>(b * p.heads_q + h)];
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const size_t q_at = head_offset(b, h, p.heads_q, p.seq_q, p.dim_qk) + i * p.dim_qk;
        const size_t o_at = head_offset(b, h, p.heads_q, p.seq_q, p.dim_v) + i * p.dim_v;
        sink_part += attention_row_backward(p, i, q.data() + q_at, k.data() + k_at, v.data() + v_at,
                                            d_o.data() + o_at, o ? o->data() + o_at : nullptr,
                                            dq->data() + q_at, dk->data() + k_at, dv->data() + v_at,
                                            p.sink_of(h), b);
      }
    }
  });
  if (d_sinks) {
    d_sinks->assign(static_cast<size_t>(p.heads_q), 0.0);
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t h = 0; h < p.heads_q; ++h) (*d_sinks)[h] += sink_parts[b * p.heads_q + h];
    }
  }
}

}  // namespace ffpa_tools
