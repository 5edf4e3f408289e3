// libffpa's backward against central finite differences of the float64 forward: an answer that
// does not lean on the CPU backward (which is itself checked here the same way).
#include <doctest/doctest.h>

#include <vector>

#include "attention_checks.h"

using namespace ffpa_tools;
using namespace device_tests;

namespace {

// The loss whose gradient the backward computes: sum(O * dO).
double loss(const AttentionProblem& problem, const std::vector<double>& q,
            const std::vector<double>& k, const std::vector<double>& v,
            const std::vector<double>& d_o) {
  std::vector<double> o;
  attention_forward(problem, q, k, v, &o, nullptr);
  double sum = 0.0;
  for (size_t i = 0; i < o.size(); ++i) sum += o[i] * d_o[i];
  return sum;
}

struct Inputs {
  std::vector<double> q, k, v, d_o;
};

// d loss / d x for every element x of `variable` (one of inputs.q, .k, .v), by central differences.
std::vector<double> numeric_gradient(const AttentionProblem& problem, Inputs& inputs,
                                     std::vector<double>& variable) {
  const double step = 1e-5;  // truncation error ~step^2, cancellation ~1e-16/step: both ~1e-10
  std::vector<double> gradient(variable.size());
  for (size_t i = 0; i < variable.size(); ++i) {
    const double original = variable[i];
    variable[i] = original + step;
    const double up = loss(problem, inputs.q, inputs.k, inputs.v, inputs.d_o);
    variable[i] = original - step;
    const double down = loss(problem, inputs.q, inputs.k, inputs.v, inputs.d_o);
    variable[i] = original;
    gradient[i] = (up - down) / (2.0 * step);
  }
  return gradient;
}

}  // namespace

TEST_SUITE_BEGIN("device");

TEST_CASE("backward matches finite differences of float64 attention") {
  Handle handle;
  Workspace workspace;
  for (CausalMask mask : {CausalMask::none, CausalMask::top_left, CausalMask::bottom_right}) {
    // Tiny, GQA, Dqk != Dv, Nq > Nkv (bottom-right masks query 0).
    const AttentionProblem shape = attention_shape(1, 2, 1, 5, 4, 6, 3, mask);
    const TestCase test{make_config(shape, DType::float32, LayoutKind::bhnd, 0.8), true,
                        4000 + static_cast<uint64_t>(mask)};
    const std::string context = test.to_string();
    INFO(context);

    DeviceProblem problem(test.config);
    problem.fill_inputs(test.start);
    problem.forward(handle, workspace, true);
    problem.backward(handle, workspace);

    const AttentionProblem& p = test.config.problem;
    Inputs inputs{problem.q.host.to_dense(), problem.k.host.to_dense(), problem.v.host.to_dense(),
                  problem.d_o.host.to_dense()};
    const std::vector<double> numeric_dq = numeric_gradient(p, inputs, inputs.q);
    const std::vector<double> numeric_dk = numeric_gradient(p, inputs, inputs.k);
    const std::vector<double> numeric_dv = numeric_gradient(p, inputs, inputs.v);

    // The float64 backward agrees with the differences to ~1e-10.
    const CpuBackward cpu = cpu_backward(problem, nullptr);
    CHECK_MESSAGE(compare(cpu.dq, numeric_dq).rel_l2 <= 1e-7, context << ": CPU dQ");
    CHECK_MESSAGE(compare(cpu.dk, numeric_dk).rel_l2 <= 1e-7, context << ": CPU dK");
    CHECK_MESSAGE(compare(cpu.dv, numeric_dv).rel_l2 <= 1e-7, context << ": CPU dV");

    // libffpa in fp32: close to fp32 accuracy.
    const ErrorStats dq = compare(problem.dq.host.to_dense(), numeric_dq);
    const ErrorStats dk = compare(problem.dk.host.to_dense(), numeric_dk);
    const ErrorStats dv = compare(problem.dv.host.to_dense(), numeric_dv);
    CHECK_MESSAGE(dq.rel_l2 <= 1e-4, context << ": dQ vs finite differences: " << dq.to_string());
    CHECK_MESSAGE(dk.rel_l2 <= 1e-4, context << ": dK vs finite differences: " << dk.to_string());
    CHECK_MESSAGE(dv.rel_l2 <= 1e-4, context << ": dV vs finite differences: " << dv.to_string());
  }
}

TEST_SUITE_END();
