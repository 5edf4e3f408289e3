// The problems the device tests run and the checks applied to every result: closeness to float64
// attention with a tolerance derived from the output type, NaN failing always, exact zeros and
// -inf for fully masked rows, and gaps of padded layouts left untouched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/device_attention.h"
#include "common/error_metrics.h"

namespace device_tests {

struct TestCase {
  ffpa_tools::ProblemConfig config;
  bool with_lse = true;
  uint64_t start = 0;  // where the random inputs start; printed so a failure can be replayed

  std::string to_string() const;
};

// One row of a table of shapes: a problem with libffpa's default scale.
struct ShapeRow {
  int64_t b, hq, hkv, nq, nkv, dqk, dv;
  ffpa_tools::CausalMask mask;
  ffpa_tools::DType dtype;
  ffpa_tools::LayoutKind layout;

  ffpa_tools::ProblemConfig config() const;
};

// 27 random shapes that together cover every feature: each dtype with each mask and each relation
// of Nq to Nkv (equal, fewer queries, more queries); MHA, GQA and MQA; head dims from 1 to 1024,
// with Dqk != Dv; BHND, BNHD and padded layouts; LSE wanted or not; default and explicit scale;
// lengths 1, 7, 100, 257. For the backward pass every case keeps some query seeing two keys, so
// that no gradient is identically zero.
std::vector<TestCase> feature_matrix(ffpa_tools::Pass pass);

// The fast kernels' shape matrix, a covering design rather than the cross product: each head dim
// the kernels serve (by tile shape: d_v <= 128, <= 512, > 512, and d_qk != d_v as in multi-head
// latent attention) runs three cases, one per mask, and the other factors follow from
// (s, c) = (head dim index, mask index):
//   mask c, lengths (s + c) % 3, heads (s + 2c) % 3 and layout s % 3 are the four columns of the
//   orthogonal array L9 over every three consecutive head dims: every pair of their values
//   appears; dtype (s + c) % 2 gives every (dtype, mask, tile shape) triple, since each tile shape
//   has consecutive head dims; bottom-right masking with Nq > Nkv (fully masked rows) falls on
//   d = 128, 384, 576 and 1024; top-left masking takes an explicit scale 1.5 / sqrt(d_qk).
// B, H <= 4 and N <= 257 keep the float64 attention quick. Every case keeps some query seeing two
// keys, and asks for the LSE; its inputs start at `start` + 3s + c.
struct MatrixCase {
  size_t s, c;
  TestCase test;
};
std::vector<MatrixCase> head_dim_matrix(uint64_t start);

// float64 attention on the inputs held in `problem`'s host tensors. `o`, when not null, is the O
// the backward computes delta = dO . O from (see ffpa_tools::attention_row_backward).
struct CpuForward {
  std::vector<double> o, lse;
};
struct CpuBackward {
  std::vector<double> dq, dk, dv;
};
CpuForward cpu_forward(const ffpa_tools::DeviceProblem& problem);
CpuBackward cpu_backward(const ffpa_tools::DeviceProblem& problem, const std::vector<double>* o);

// CHECKs that `actual` is within allowed_relative_error(`rounding_baseline`) of `expected`.
void check_close(const std::string& context, const std::string& name,
                 const ffpa_tools::HostTensor& actual, const std::vector<double>& expected,
                 ffpa_tools::Pass pass, double rounding_baseline);

// The parts of check_forward_outputs() that need no tolerance, for checks with their own:
// CHECKs that the downloaded O of every query that sees no key is exactly 0 (and its LSE -inf,
// or its head's sink with attention sinks, when `with_lse`),
void check_masked_rows(const std::string& context, const ffpa_tools::DeviceProblem& problem,
                       bool with_lse);
// and that the gaps of the O (and LSE) layouts still hold the poison written before the call.
void check_forward_gaps(const std::string& context, const ffpa_tools::DeviceProblem& problem,
                        bool with_lse);

// CHECKs the downloaded O (and LSE when `with_lse`) of `problem` against float64 attention:
// tolerance; fully masked rows with O exactly 0 and LSE -inf; gaps untouched.
void check_forward_outputs(const std::string& context, const ffpa_tools::DeviceProblem& problem,
                           bool with_lse);
// CHECKs the downloaded dQ, dK, dV against float64 attention: tolerance (which counts the effect
// of the rounded O the backward is given); exact zeros for queries that see no key and for keys
// no query sees; gaps untouched.
void check_backward_outputs(const std::string& context, const ffpa_tools::DeviceProblem& problem);

// True when every byte of `tensor` is still 0xFF, as DeviceTensor::poison() left it.
bool all_poison(const ffpa_tools::HostTensor& tensor);

// NaN in every element of K and V past each batch entry's key count (the problem's key_lengths;
// nothing without counts), uploaded: a kernel that lets a key past its count reach a result fails
// the checks.
void nan_past_key_lengths(ffpa_tools::DeviceProblem& problem);

// Which passes run_and_check() runs and checks.
enum class Checked { forward, backward, both };

// Runs `test` on `handle` with fresh random inputs and poisoned outputs: the forward, then the
// backward unless only the forward is `checked`; CHECKs the results of the passes `checked` says.
void run_and_check(const ffpa_tools::Handle& handle, ffpa_tools::Workspace& workspace,
                   const TestCase& test, Checked checked);

// CHECKs that two results are the same to within rounding noise (a few last-bit differences).
void check_nearly_identical(const std::string& context, const std::string& name,
                            const ffpa_tools::HostTensor& actual,
                            const ffpa_tools::HostTensor& expected);

// The items of the list `key` of ffpaGetBuildInfo() ("...; head dims 128,256,320; ..."); empty
// when the text has no such list.
std::vector<std::string> build_info_list(const std::string& key);

// Whether the build compiled sm_90a code and the GPU is of compute capability 9.0 (the sm_90a
// kernels' only target); when not, a MESSAGE saying which is missing.
bool hopper_runs_here();

}  // namespace device_tests
