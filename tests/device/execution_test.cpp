// How calls execute: bit-reproducible results under FFPA_POLICY_DETERMINISTIC, and a forward
// that can be captured in a CUDA graph (it only enqueues work on the handle's stream).
#include <doctest/doctest.h>

#include <cstring>

#include "attention_checks.h"

using namespace ffpa_tools;
using namespace device_tests;

namespace {

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.size_bytes() == b.size_bytes() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Owners of the CUDA objects the graph test creates, released even when a check throws.
struct Stream {
  Stream() {
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags");
  }
  ~Stream() { cudaStreamDestroy(stream); }
  cudaStream_t stream = nullptr;
};
struct Graph {
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

}  // namespace

TEST_SUITE_BEGIN("device");

TEST_CASE("forward and backward are bit-reproducible with FFPA_POLICY_DETERMINISTIC") {
  // GQA (dK, dV sum over a group) and Nq > Nkv with bottom-right masking.
  const TestCase test{
      make_config(attention_shape(1, 6, 2, 300, 200, 128, 128, CausalMask::bottom_right),
                  DType::bfloat16, LayoutKind::bhnd, 0.0),
      true, 6001};
  const std::string context = test.to_string();
  INFO(context);
  Handle handle;
  handle.set_policy(FFPA_POLICY_DETERMINISTIC, 1);
  Workspace workspace;
  DeviceProblem problem(test.config);
  problem.fill_inputs(test.start);

  problem.forward(handle, workspace, true);
  const HostTensor first_o = problem.o.host;
  const HostTensor first_lse = problem.lse.host;
  problem.backward(handle, workspace);
  const HostTensor first_dq = problem.dq.host;
  const HostTensor first_dk = problem.dk.host;
  const HostTensor first_dv = problem.dv.host;
  // Identical NaNs would also be bit-identical: the first results must be right.
  check_forward_outputs(context, problem, true);
  check_backward_outputs(context, problem);

  problem.forward(handle, workspace, true);  // poisons the outputs first
  CHECK_MESSAGE(same_bytes(problem.o.host, first_o), context << ": O differs between two runs");
  CHECK_MESSAGE(same_bytes(problem.lse.host, first_lse),
                context << ": LSE differs between two runs");
  problem.backward(handle, workspace);
  CHECK_MESSAGE(same_bytes(problem.dq.host, first_dq), context << ": dQ differs between two runs");
  CHECK_MESSAGE(same_bytes(problem.dk.host, first_dk), context << ": dK differs between two runs");
  CHECK_MESSAGE(same_bytes(problem.dv.host, first_dv), context << ": dV differs between two runs");
}

TEST_CASE("forward captured in a CUDA graph equals a direct call") {
  const TestCase test{make_config(attention_shape(2, 4, 2, 200, 333, 80, 80, CausalMask::top_left),
                                  DType::float16, LayoutKind::padded, 0.0),
                      true, 7001};
  const std::string context = test.to_string();
  INFO(context);
  Stream stream;
  Handle handle;
  handle.set_stream(stream.stream);
  handle.set_policy(FFPA_POLICY_DETERMINISTIC, 1);
  DeviceProblem problem(test.config);
  problem.fill_inputs(test.start);

  Workspace workspace;
  problem.forward(handle, workspace, true);
  const HostTensor direct_o = problem.o.host;
  const HostTensor direct_lse = problem.lse.host;

  // Everything that allocates or plans happens before the capture.
  const size_t bytes = problem.forward_workspace_size(handle, true);
  void* const scratch = workspace.reserve(bytes);
  problem.poison_forward_outputs();

  Graph graph;
  check_cuda(cudaStreamBeginCapture(stream.stream, cudaStreamCaptureModeGlobal),
             "cudaStreamBeginCapture");
  const ffpaStatus_t status = problem.call_forward(handle, scratch, bytes, true);
  const std::string message = status == FFPA_STATUS_SUCCESS ? "" : status_report(status);
  // End the capture whatever happened, so the stream is usable again.
  const cudaError_t end = cudaStreamEndCapture(stream.stream, &graph.graph);
  REQUIRE_MESSAGE(status == FFPA_STATUS_SUCCESS, "ffpaAttentionForward under capture: " << message);
  check_cuda(end, "cudaStreamEndCapture");

  // Captured work does not run: the outputs must still be poison.
  problem.o.download();
  CHECK_MESSAGE(all_poison(problem.o.host), "O was written while the call was being captured");

  check_cuda(cudaGraphInstantiate(&graph.exec, graph.graph, 0), "cudaGraphInstantiate");
  check_cuda(cudaGraphLaunch(graph.exec, stream.stream), "cudaGraphLaunch");
  check_cuda(cudaStreamSynchronize(stream.stream), "cudaStreamSynchronize");
  problem.o.download();
  problem.lse.download();
  CHECK_MESSAGE(same_bytes(problem.o.host, direct_o), context << ": O from the graph differs");
  CHECK_MESSAGE(same_bytes(problem.lse.host, direct_lse),
                context << ": LSE from the graph differs");
  check_forward_outputs(context, problem, true);

  // The graph reads the buffers when it runs: new inputs give the new answer.
  problem.fill_inputs(test.start + 1);
  problem.poison_forward_outputs();
  check_cuda(cudaGraphLaunch(graph.exec, stream.stream), "cudaGraphLaunch");
  check_cuda(cudaStreamSynchronize(stream.stream), "cudaStreamSynchronize");
  problem.o.download();
  problem.lse.download();
  check_forward_outputs(context + " (graph replayed on new inputs)", problem, true);
}

TEST_SUITE_END();
