/*
 * Attention forward with libffpa from C: random fp16 Q, K, V of head dimension 512 on the GPU,
 * one forward pass with a causal mask, and a plausibility check of the output.
 *
 * Build (installed libffpa):
 *   cc -std=c11 attention_forward.c $(pkg-config --cflags --libs ffpa) \
 *      -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart
 *
 * Exit status: 0 on success, 77 when there is no usable GPU, 1 on any other failure.
 */
#include <ffpa/ffpa.h>

#include <cuda_runtime_api.h>

#include <math.h> /* isfinite */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_NO_GPU = 77 };

/* Problem size: batch, heads, sequence length, head dimension (packed [B, H, N, D] tensors). */
enum { BATCH = 2, HEADS = 4, SEQ_LEN = 256, HEAD_DIM = 512 };
#define ELEMENTS ((size_t)BATCH * HEADS * SEQ_LEN * HEAD_DIM)

/* Prints a failed libffpa call with the status name and the library's detailed message. */
static int ffpa_failed(ffpaStatus_t status, const char* call, int line) {
  if (status == FFPA_STATUS_SUCCESS) return 0;
  char detail[1024];
  ffpaGetLastErrorString(detail, sizeof detail); /* truncated to fit, always terminated */
  fprintf(stderr, "line %d: %s failed: %s: %s\n", line, call, ffpaGetErrorString(status), detail);
  return 1;
}

static int cuda_failed(cudaError_t error, const char* call, int line) {
  if (error == cudaSuccess) return 0;
  fprintf(stderr, "line %d: %s failed: %s: %s\n", line, call, cudaGetErrorName(error),
          cudaGetErrorString(error));
  return 1;
}

/* On failure, report and jump to the cleanup code that frees whatever was created. */
#define CHECK(call)                                                 \
  do {                                                              \
    if (ffpa_failed((call), #call, __LINE__)) goto cleanup;         \
  } while (0)
#define CUDA_CHECK(call)                                            \
  do {                                                              \
    if (cuda_failed((call), #call, __LINE__)) goto cleanup;         \
  } while (0)

/* IEEE half precision from single precision, rounding to nearest even. Done on the host so that
 * the example needs no CUDA C++ header. */
static uint16_t half_from_float(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  const int32_t exponent = (int32_t)((bits >> 23) & 0xffu) - 127 + 15;
  uint32_t mantissa = (bits & 0x7fffffu) | 0x800000u; /* with the implicit leading 1 */
  if (exponent >= 31) return (uint16_t)(sign | 0x7c00u); /* too large: infinity */
  if (exponent < -10) return sign;                        /* too small: zero */
  /* Normal results keep 11 of the 24 mantissa bits; subnormal ones fewer. */
  const int shift = exponent > 0 ? 13 : 14 - exponent;
  uint32_t half = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half; /* may carry into the exponent */
  /* A normal result still holds the implicit 1 at bit 10, which adds 1 to the exponent field. */
  if (exponent > 0) half += (uint32_t)(exponent - 1) << 10;
  return (uint16_t)(sign | half);
}

static float float_from_half(uint16_t half) {
  const uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24, exact in single precision */
    const float magnitude = (float)mantissa / 16777216.0f;
    return sign ? -magnitude : magnitude;
  }
  const uint32_t bits = exponent == 31 ? sign | 0x7f800000u | (mantissa << 13)
                                       : sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

/* Uniform values in [-1, 1) from a xorshift generator started at a fixed non-zero state, so
 * every run sees the same data. */
static void fill_random_halves(uint16_t* values, size_t count, uint32_t state) {
  for (size_t i = 0; i < count; ++i) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    values[i] = half_from_float((float)(state >> 8) / 8388608.0f - 1.0f);
  }
}

/* Each output element is a convex combination of values of V (softmax weights are positive and
 * sum to 1), so it must be finite and no larger in magnitude than the largest |V|. */
static float magnitude(float x) { return x < 0.0f ? -x : x; }

static int output_is_plausible(const uint16_t* o, const uint16_t* v, size_t count) {
  float v_max = 0.0f;
  for (size_t i = 0; i < count; ++i) {
    const float x = magnitude(float_from_half(v[i]));
    if (x > v_max) v_max = x;
  }
  const float bound = v_max * 1.01f; /* allowance for rounding, also with fp16 accumulation */
  for (size_t i = 0; i < count; ++i) {
    const float x = float_from_half(o[i]);
    if (!isfinite(x) || magnitude(x) > bound) {
      fprintf(stderr, "output element %zu is %g, outside [-%g, %g]\n", i, x, bound, bound);
      return 0;
    }
  }
  return 1;
}

int main(void) {
  const int64_t dims[4] = {BATCH, HEADS, SEQ_LEN, HEAD_DIM};
  const int32_t causal = FFPA_CAUSAL_TOP_LEFT;
  const size_t bytes = ELEMENTS * sizeof(uint16_t);
  int exit_code = 1;

  /* Everything that cleanup releases starts out empty: destroying NULL is a no-op. */
  ffpaHandle_t handle = NULL;
  ffpaTensorDescriptor_t tensor = NULL;
  ffpaAttentionDescriptor_t attention = NULL;
  cudaStream_t stream = NULL;
  uint16_t *host_q = NULL, *host_k = NULL, *host_v = NULL, *host_o = NULL;
  void *q = NULL, *k = NULL, *v = NULL, *o = NULL, *workspace = NULL;
  size_t workspace_bytes = 0;

  if (!FFPA_VERSION_IS_COMPATIBLE(ffpaGetVersion())) {
    fprintf(stderr, "libffpa %u is older than the header this program was built with (%u)\n",
            (unsigned)ffpaGetVersion(), (unsigned)FFPA_VERSION);
    return 1;
  }

  /* The handle comes first: it is also how a machine without a usable GPU is recognized. */
  const ffpaStatus_t created = ffpaCreate(&handle);
  if (created == FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE ||
      created == FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH) {
    char detail[1024];
    ffpaGetLastErrorString(detail, sizeof detail);
    printf("skipped: no GPU libffpa can use (%s: %s)\n", ffpaGetErrorString(created), detail);
    return EXIT_NO_GPU;
  }
  if (ffpa_failed(created, "ffpaCreate", __LINE__)) return 1;

  CUDA_CHECK(cudaStreamCreate(&stream));
  CHECK(ffpaSetStream(handle, stream));

  /* Q, K, V and O have the same shape, type and packed layout: one descriptor serves all four. */
  CHECK(ffpaCreateTensorDescriptor(&tensor));
  CHECK(ffpaSetTensorDescriptor(tensor, FFPA_DATA_TYPE_FLOAT16, 4, dims, NULL));
  CHECK(ffpaCreateAttentionDescriptor(&attention)); /* softmax scale 1/sqrt(HEAD_DIM) */
  CHECK(ffpaSetAttentionAttribute(attention, FFPA_ATTENTION_CAUSAL_MODE, &causal, sizeof causal));

  host_q = malloc(bytes);
  host_k = malloc(bytes);
  host_v = malloc(bytes);
  host_o = malloc(bytes);
  if (!host_q || !host_k || !host_v || !host_o) {
    fprintf(stderr, "out of host memory\n");
    goto cleanup;
  }
  fill_random_halves(host_q, ELEMENTS, 1u);
  fill_random_halves(host_k, ELEMENTS, 2u);
  fill_random_halves(host_v, ELEMENTS, 3u);

  /* cudaMalloc aligns to at least 256 bytes, enough for tensors (16) and the workspace (256). */
  CUDA_CHECK(cudaMalloc(&q, bytes));
  CUDA_CHECK(cudaMalloc(&k, bytes));
  CUDA_CHECK(cudaMalloc(&v, bytes));
  CUDA_CHECK(cudaMalloc(&o, bytes));
  CUDA_CHECK(cudaMemcpyAsync(q, host_q, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(k, host_k, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(v, host_v, bytes, cudaMemcpyHostToDevice, stream));

  /* Asking for the workspace plans the problem, so the forward call below only launches. */
  CHECK(ffpaGetAttentionForwardWorkspaceSize(handle, attention, tensor, tensor, tensor, tensor,
                                             NULL, &workspace_bytes));
  if (workspace_bytes > 0) CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));

  CHECK(ffpaAttentionForward(handle, attention, tensor, q, tensor, k, tensor, v, tensor, o,
                             NULL, NULL, workspace, workspace_bytes));

  CUDA_CHECK(cudaMemcpyAsync(host_o, o, bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));

  if (output_is_plausible(host_o, host_v, ELEMENTS)) {
    printf("forward [B=%d, H=%d, N=%d, D=%d] fp16, causal: ok (workspace %zu bytes)\n", BATCH,
           HEADS, SEQ_LEN, HEAD_DIM, workspace_bytes);
    exit_code = 0;
  }

cleanup:
  /* Statuses of the teardown calls are reported too, but cannot change a failure into success. */
  if (stream != NULL && cuda_failed(cudaStreamSynchronize(stream), "cudaStreamSynchronize",
                                    __LINE__))
    exit_code = 1;
  cudaFree(workspace);
  cudaFree(o);
  cudaFree(v);
  cudaFree(k);
  cudaFree(q);
  free(host_o);
  free(host_v);
  free(host_k);
  free(host_q);
  if (ffpa_failed(ffpaDestroyAttentionDescriptor(attention), "ffpaDestroyAttentionDescriptor",
                  __LINE__))
    exit_code = 1;
  if (ffpa_failed(ffpaDestroyTensorDescriptor(tensor), "ffpaDestroyTensorDescriptor", __LINE__))
    exit_code = 1;
  if (ffpa_failed(ffpaDestroy(handle), "ffpaDestroy", __LINE__)) exit_code = 1;
  if (stream != NULL) cudaStreamDestroy(stream);
  return exit_code;
}
