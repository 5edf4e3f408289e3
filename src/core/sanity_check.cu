#include "core/sanity_check.h"

#include "core/element_values.cuh"
#include "core/kernel_launch.h"
#include "core/logging.h"
#include "core/planner.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

namespace ffpa {
namespace {

// Counts elements that are NaN or infinite (-infinity allowed for log-sum-exp rows that see no
// key) in a strided [d0, d1, d2, d3] tensor; with `rowLimits` (d0 counts, clamped to [0, d2])
// only the first rows of each entry of d0: K and V past per-batch key lengths may hold anything.
template <class T>
__global__ void countNonFinite(const T* data, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                               int64_t s0, int64_t s1, int64_t s2, int64_t s3, bool allowNegInf,
                               const int32_t* rowLimits, unsigned long long* counter) {
  const int64_t total = d0 * d1 * d2 * d3;
  unsigned long long bad = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t rest = i;
    const int64_t x3 = rest % d3; rest /= d3;
    const int64_t x2 = rest % d2; rest /= d2;
    const int64_t x1 = rest % d1;
    const int64_t x0 = rest / d1;
    if (rowLimits != nullptr && x2 >= rowLimits[x0]) continue;  // a negative count skips every row
    const float value = toFloat(data[x0 * s0 + x1 * s1 + x2 * s2 + x3 * s3]);
    const bool negInf = isinf(value) && value < 0.0f;
    if (!isfinite(value) && !(allowNegInf && negInf)) ++bad;
  }
  if (bad != 0) atomicAdd(counter, bad);
}

struct Checked {
  const char* name;
  const void* data;
  ffpaDataType_t dtype;
  std::array<int64_t, 4> dims;
  Strides strides;
  bool allowNegInf;
  bool isOutput;
  const int32_t* rowLimits = nullptr;  // FFPA_ATTENTION_KEY_LENGTHS for K and V: rows past them unchecked
};

void enqueueCount(const Checked& t, unsigned long long* counter, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t total = t.dims[0] * t.dims[1] * t.dims[2] * t.dims[3];
  const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 4096));
  const auto& d = t.dims;
  const auto& s = t.strides;
  const auto launch = [&](auto* typed) {
    launchKernel("countNonFinite", countNonFinite<std::remove_const_t<std::remove_pointer_t<decltype(typed)>>>,
                 blocks, kThreads, stream, typed, d[0], d[1], d[2], d[3], s[0], s[1], s[2], s[3],
                 t.allowNegInf, t.rowLimits, counter);
  };
  switch (t.dtype) {
    case FFPA_DATA_TYPE_FLOAT16: launch(static_cast<const __half*>(t.data)); break;
    case FFPA_DATA_TYPE_BFLOAT16: launch(static_cast<const __nv_bfloat16*>(t.data)); break;
    default: launch(static_cast<const float*>(t.data)); break;
  }
}

std::vector<Checked> tensorsOf(const AttentionProblem& p, const TensorArgs& a) {
  const auto dt = p.dtype;
  const std::array<int64_t, 4> qDims{p.batch, p.headsQ, p.seqQ, p.headDimQk};
  const std::array<int64_t, 4> kDims{p.batch, p.headsKv, p.seqKv, p.headDimQk};
  const std::array<int64_t, 4> vDims{p.batch, p.headsKv, p.seqKv, p.headDimV};
  const std::array<int64_t, 4> oDims{p.batch, p.headsQ, p.seqQ, p.headDimV};
  const std::array<int64_t, 4> lseDims{p.batch, p.headsQ, p.seqQ, 1};
  // K and V past per-batch key lengths never reach a result: they may hold NaN.
  std::vector<Checked> list = {{"q", a.q, dt, qDims, p.q, false, false},
                               {"k", a.k, dt, kDims, p.k, false, false, p.keyLengths},
                               {"v", a.v, dt, vDims, p.v, false, false, p.keyLengths}};
  if (p.direction == Direction::Forward) {
    list.push_back({"o", a.out, dt, oDims, p.o, false, true});
    if (p.hasLse) list.push_back({"lse", a.lseOut, FFPA_DATA_TYPE_FLOAT32, lseDims, p.lse, true, true});
  } else {
    list.push_back({"o", a.o, dt, oDims, p.o, false, false});
    list.push_back({"dO", a.dO, dt, oDims, p.dO, false, false});
    list.push_back({"lse", a.lse, FFPA_DATA_TYPE_FLOAT32, lseDims, p.lse, true, false});
    list.push_back({"dq", a.dq, dt, qDims, p.dq, false, true});
    list.push_back({"dk", a.dk, dt, kDims, p.dk, false, true});
    list.push_back({"dv", a.dv, dt, vDims, p.dv, false, true});
  }
  return list;
}

}  // namespace

void runSanityCheck(const AttentionProblem& problem, const TensorArgs& tensors, void* scratch,
                    ffpaStream_t stream, ffpaLogLevel_t logLevel) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  checkCuda(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone) {
    logMessage(logLevel, FFPA_LOG_LEVEL_WARNING,
               "FFPA_POLICY_SANITY_CHECK: skipped while the stream is captured into a CUDA graph");
    return;
  }
  checkCuda(cudaStreamSynchronize(stream), "the attention kernels (reported at synchronization)");

  const std::vector<Checked> list = tensorsOf(problem, tensors);
  static_assert(kSanityScratchBytes >= 10 * sizeof(unsigned long long), "one counter per tensor");
  auto* counters = static_cast<unsigned long long*>(scratch);
  checkCuda(cudaMemsetAsync(counters, 0, list.size() * sizeof *counters, stream), "cudaMemsetAsync");
  for (size_t i = 0; i < list.size(); ++i) enqueueCount(list[i], counters + i, stream);
  std::vector<unsigned long long> found(list.size());
  checkCuda(cudaMemcpyAsync(found.data(), counters, list.size() * sizeof *counters,
                            cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

  // Inputs first: a NaN in an input explains the NaN in the outputs.
  for (const bool outputs : {false, true}) {
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].isOutput != outputs || found[i] == 0) continue;
      fail(FFPA_STATUS_EXECUTION_FAILED_NON_FINITE,
           cat("sanity check: ", outputs ? "output " : "input ", list[i].name, " holds ", found[i],
               " NaN or infinite value(s) after ", describe(problem)));
    }
  }
}

}  // namespace ffpa
