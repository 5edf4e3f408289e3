// Tensor and attention descriptors: validation, defaults, round trips. No device needed.
#include "test_support.h"

#include <cmath>
#include <limits>

using namespace ffpa_test;

TEST_CASE("a tensor descriptor defaults to packed strides and reads back what was set") {
  Tensor t(FFPA_DATA_TYPE_BFLOAT16, {2, 8, 100, 320});
  ffpaDataType_t dtype{};
  int32_t nbDims = 0;
  int64_t dims[4] = {}, strides[4] = {};
  REQUIRE_OK(ffpaGetTensorDescriptor(t, &dtype, 4, &nbDims, dims, strides));
  CHECK(dtype == FFPA_DATA_TYPE_BFLOAT16);
  CHECK(nbDims == 4);
  CHECK(dims[2] == 100);
  CHECK(strides[0] == 8 * 100 * 320);
  CHECK(strides[1] == 100 * 320);
  CHECK(strides[2] == 320);
  CHECK(strides[3] == 1);

  // Asking for fewer dims copies fewer; nothing is written past `requested`.
  int64_t two[3] = {-1, -1, -1};
  REQUIRE_OK(ffpaGetTensorDescriptor(t, nullptr, 2, nullptr, two, nullptr));
  CHECK(two[0] == 2);
  CHECK(two[1] == 8);
  CHECK(two[2] == -1);
}

TEST_CASE("BNHD strides, padded rows and a slice of a fused QKV buffer are accepted") {
  Tensor bnhd(FFPA_DATA_TYPE_FLOAT16, {2, 8, 100, 64}, {100 * 8 * 64, 64, 8 * 64, 1});
  Tensor padded(FFPA_DATA_TYPE_FLOAT16, {1, 4, 10, 40}, {4 * 10 * 48, 10 * 48, 48, 1});
  Tensor fusedSlice(FFPA_DATA_TYPE_FLOAT16, {1, 10, 4, 64}, {10 * 3 * 4 * 64, 3 * 4 * 64, 64, 1});
  Tensor lse(FFPA_DATA_TYPE_FLOAT32, {2, 8, 100});
  // Dimensions of extent 1 may carry any stride.
  Tensor ones(FFPA_DATA_TYPE_FLOAT16, {1, 1, 7, 16}, {0, -5, 16, 1});
}

TEST_CASE("bad tensor descriptors are refused with the argument named, leaving the descriptor as it was") {
  Tensor t(FFPA_DATA_TYPE_FLOAT16, {1, 2, 3, 4});
  const int64_t dims[4] = {1, 2, 3, 4};
  CHECK_FAILS_WITH(ffpaSetTensorDescriptor(nullptr, FFPA_DATA_TYPE_FLOAT16, 4, dims, nullptr),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "desc is NULL");
  CHECK_FAILS_WITH(ffpaSetTensorDescriptor(t, static_cast<ffpaDataType_t>(7), 4, dims, nullptr),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "dataType", "FFPA_DATA_TYPE_FLOAT16");
  CHECK_FAILS_WITH(ffpaSetTensorDescriptor(t, FFPA_DATA_TYPE_FLOAT16, 5, dims, nullptr),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "nbDims is 5", "3", "4");
  CHECK_FAILS_WITH(ffpaSetTensorDescriptor(t, FFPA_DATA_TYPE_FLOAT16, 4, nullptr, nullptr),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "dims");
  const int64_t zero[4] = {1, 2, 0, 4};
  CHECK_FAILS_WITH(ffpaSetTensorDescriptor(t, FFPA_DATA_TYPE_FLOAT16, 4, zero, nullptr),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "dims[2] is 0");
  const int64_t big[4] = {int64_t{1} << 31, 1, 1, 1};
  CHECK_FAILS_WITH(ffpaSetTensorDescriptor(t, FFPA_DATA_TYPE_FLOAT16, 4, big, nullptr),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "dims[0]");
  const int64_t overlap[4] = {24, 12, 2, 1};  // H stride 12 < N extent 3 * 2
  CHECK_FAILS_WITH(ffpaSetTensorDescriptor(t, FFPA_DATA_TYPE_FLOAT16, 4, dims, overlap),
                   FFPA_STATUS_BAD_PARAM_STRIDE, "overlap");
  const int64_t negative[4] = {24, 12, -4, 1};
  CHECK_FAILS_WITH(ffpaSetTensorDescriptor(t, FFPA_DATA_TYPE_FLOAT16, 4, dims, negative),
                   FFPA_STATUS_BAD_PARAM_STRIDE, "strides[2] is -4");
  const int64_t huge[4] = {(int64_t{1} << 31) - 1, (int64_t{1} << 31) - 1, 4, 1024};
  CHECK_FAILS_WITH(ffpaSetTensorDescriptor(t, FFPA_DATA_TYPE_FLOAT16, 4, huge, nullptr),
                   FFPA_STATUS_BAD_PARAM_STRIDE, "2^62");

  int64_t readBack[4] = {};
  REQUIRE_OK(ffpaGetTensorDescriptor(t, nullptr, 4, nullptr, readBack, nullptr));
  CHECK(readBack[3] == 4);  // unchanged by the failed calls
}

TEST_CASE("an unset tensor descriptor cannot be read; NULL may be destroyed") {
  Tensor t;
  int32_t nbDims = 0;
  CHECK_FAILS_WITH(ffpaGetTensorDescriptor(t, nullptr, 0, &nbDims, nullptr, nullptr),
                   FFPA_STATUS_BAD_PARAM_NOT_FINALIZED, "never set");
  CHECK_FAILS_WITH(ffpaGetTensorDescriptor(t, nullptr, -1, &nbDims, nullptr, nullptr),
                   FFPA_STATUS_BAD_PARAM_NOT_FINALIZED);
  CHECK(ffpaDestroyTensorDescriptor(nullptr) == FFPA_STATUS_SUCCESS);
  CHECK(ffpaDestroyAttentionDescriptor(nullptr) == FFPA_STATUS_SUCCESS);
  CHECK_FAILS_WITH(ffpaCreateAttentionDescriptor(nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "desc");
}

TEST_CASE("attention attributes: defaults, typed sizes, bounds") {
  Attention attn;
  float scale = -1.0f;
  size_t size = 0;
  REQUIRE_OK(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_SOFTMAX_SCALE, nullptr, 0, &size));
  CHECK(size == sizeof(float));
  REQUIRE_OK(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_SOFTMAX_SCALE, &scale, sizeof scale, nullptr));
  CHECK(scale == 0.0f);  // unset: 1/sqrt(d_qk) at planning

  scale = 0.125f;
  REQUIRE_OK(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_SOFTMAX_SCALE, &scale, sizeof scale));
  float readBack = 0.0f;
  REQUIRE_OK(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_SOFTMAX_SCALE, &readBack, sizeof readBack, nullptr));
  CHECK(readBack == 0.125f);

  for (const float bad : {0.0f, -2.0f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    CHECK_FAILS_WITH(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_SOFTMAX_SCALE, &bad, sizeof bad),
                     FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "FFPA_ATTENTION_SOFTMAX_SCALE", "finite value > 0");
  }
  const double wide = 0.5;
  CHECK_FAILS_WITH(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_SOFTMAX_SCALE, &wide, sizeof wide),
                   FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "size must be 4, got 8");

  int32_t mode = FFPA_CAUSAL_BOTTOM_RIGHT;
  REQUIRE_OK(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &mode, sizeof mode));
  int32_t readMode = -1;
  REQUIRE_OK(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &readMode, sizeof readMode, nullptr));
  CHECK(readMode == FFPA_CAUSAL_BOTTOM_RIGHT);
  mode = 3;
  CHECK_FAILS_WITH(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &mode, sizeof mode),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "FFPA_CAUSAL_BOTTOM_RIGHT");
  CHECK_FAILS_WITH(ffpaSetAttentionAttribute(attn, static_cast<ffpaAttentionAttribute_t>(100), &mode, sizeof mode),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "attr 100");
  CHECK_FAILS_WITH(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, nullptr, 4),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "value");
  CHECK_FAILS_WITH(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &readMode, 2, nullptr),
                   FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE);
}
