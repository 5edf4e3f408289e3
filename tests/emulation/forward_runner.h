// Runs one forward problem the way the library would on a GPU, but on the CPU warp emulator: the
// planner's resolveForward() picks the instance and computes its parameters under the case's
// knobs; the emulated twin of that instance runs on host tensors with poisoned outputs; the result
// is checked against float64 attention.
#pragma once

#include "attention_case.h"
#include "core/key_splits.h"

#include <functional>
#include <string>
#include <vector>

namespace emulation_test {

struct ForwardOutcome {
  std::string kernel;  // the instance's plan name, e.g. "sm80.forward.f16.d512.acc_f32"
  std::string config;  // its launch configuration, as plan descriptions print it
  ffpa_tools::HostTensor o, lse;
  std::vector<double> expectedO, expectedLse;  // float64 attention on the same inputs
};

// The tensors of one forward run of `c`: random inputs, poisoned outputs, and the library's
// description of the problem with their strides.
struct ForwardTensors {
  ffpa_tools::HostTensor q, k, v, o, lse;
  ffpa::AttentionProblem problem;
  // FFPA_ATTENTION_KEY_LENGTHS: the case's counts in a buffer of their own, as on the device
  // (problem.keyLengths points into it; a move keeps the buffer), or empty.
  std::vector<int32_t> keyLengths;
};
ForwardTensors forwardTensors(const AttentionCase& c);

// Moves the outputs of `t` into `out`, with float64 attention on its inputs as the expectation.
void finishOutcome(const AttentionCase& c, ForwardTensors& t, ForwardOutcome& out);

// The problem the library plans and launches for `problem`: with FFPA_POLICY_QUERY_HEADS_AS_ROWS
// (on unless the case turns it off), the query heads of a group as rows where they merge
// (core/query_rows.h), else `problem` itself. `merged` (if given) says which.
ffpa::AttentionProblem plannedProblem(const AttentionCase& c, const ffpa::AttentionProblem& problem,
                                      bool* merged = nullptr);

// A forward problem for query heads as rows (the shape, its layout, with or without an LSE) and
// whether the library merges it.
struct MergeCase {
  int64_t batch, headsQ, headsKv, seqQ, seqKv, dimQk, dimV;
  ffpa_tools::CausalMask mask;
  ffpa_tools::LayoutKind layout;
  bool withLse;
  bool merges;
};

// Runs `c` with `run` and CHECKs its result, and that its outcome's config names `part` exactly
// when `named` (a failure to run is a failed CHECK).
void runNaming(const AttentionCase& c, const std::string& part, bool named,
               const std::function<ForwardOutcome(const AttentionCase&)>& run);

// Runs the case of `m` with `run` (inputs from `start`, dtypes alternating with it), with
// FFPA_POLICY_QUERY_HEADS_AS_ROWS on or off, and CHECKs its result and that it merged exactly
// where it should (`m.merges` with the knob on).
void runMergeCase(const MergeCase& m, uint64_t start, bool knobOn,
                  const std::function<ForwardOutcome(const AttentionCase&)>& run);

// Split-KV: the call's O and LSE (`withLse`) from the fp32 partial results a launch of `planned`
// left in `workspace`: the merge the library enqueues (ffpa::keySplitMerge), each row by the merge
// kernel's arithmetic (merge/row_merge.h) on the host, through `planned`'s strides into `o` and
// `lse` (the tensors `planned` describes).
void mergeKeySplits(const ffpa::KeySplitPlan& split, const ffpa::AttentionProblem& planned, void* workspace,
                    ffpa_tools::HostTensor& o, ffpa_tools::HostTensor& lse, bool withLse);

// Changes the random inputs of a run before the kernel sees them (the float64 expectation is
// computed from the changed inputs).
using InputEdit = std::function<void(ForwardTensors&)>;

// Plans and runs `c`, its inputs changed by `edit` if given. Throws std::runtime_error when the
// planner refuses the problem and ffpa::emulation::KernelError when the emulator finds a bug in
// the kernel.
ForwardOutcome runForward(const AttentionCase& c, const InputEdit& edit = {});

// CHECKs the outcome: O within the bound of the case's dtype and accumulator (FlashAttention's
// criterion with fp32 accumulators; the device tests' documented bound with fp16 ones), LSE, rows
// that see no key (O exactly 0, LSE -inf), and the gaps of padded layouts untouched.
void checkForward(const AttentionCase& c, const ForwardOutcome& outcome);

// A NaN in one element of query row `row` of (batch 0, head `head`); that row's O and LSE are
// set to 7 first, so that a kernel that does not write them fails checkNanRow().
InputEdit nanInQueryRow(int64_t head, int64_t row);

// NaN in every element of K and V past each batch entry's key count (FFPA_ATTENTION_KEY_LENGTHS,
// `shape.key_lengths`): a kernel that lets a key past the count reach O or LSE fails the checks.
InputEdit nanPastKeyLengths(const ffpa_tools::AttentionProblem& shape);

// CHECKs that the NaN of nanInQueryRow() reached every element of that row's O and its LSE, and
// no other row: every other O element and LSE is finite.
void checkNanRow(const AttentionCase& c, const ForwardOutcome& outcome, int64_t head, int64_t row);

// runForward() and checkForward(), with a failure to run reported as a failed CHECK.
void runAndCheckForward(const AttentionCase& c);

}  // namespace emulation_test
