// Tensor and attention descriptors: plain host data, usable without a device.
#pragma once

#include <ffpa/ffpa.h>

#include <array>
#include <cstdint>
#include <memory>

namespace ffpa {

namespace slices {
class SliceTable;
}
namespace cp {
class ContextParallel;
}

// A checked strided tensor: dims and strides in elements, nbDims of them (3 or 4).
struct TensorLayout {
  ffpaDataType_t dtype = FFPA_DATA_TYPE_FLOAT16;
  int32_t nbDims = 0;
  std::array<int64_t, FFPA_MAX_TENSOR_DIMS> dims{};
  std::array<int64_t, FFPA_MAX_TENSOR_DIMS> strides{};

  // One past the largest element offset: the tensor touches [0, spanElements()).
  int64_t spanElements() const;
  int64_t spanBytes() const;
};

size_t elementBytes(ffpaDataType_t dtype);
const char* dataTypeName(ffpaDataType_t dtype);

// Whether two copies of `layout`, the second starting `shift` elements after the first, have an
// element in common. Exact, not a range test: interleaved slices of one buffer (dQ, dK, dV in a
// packed [B, N, 3, H, D] gradient) do not overlap although their ranges do.
bool copiesShareAnElement(const TensorLayout& layout, int64_t shift);

// Validates and builds a layout (ffpaSetTensorDescriptor semantics); throws ffpa::Error.
TensorLayout makeTensorLayout(ffpaDataType_t dtype, int32_t nbDims, const int64_t* dims,
                              const int64_t* strides);

// The settings of an attention descriptor. scale == 0 means "1 / sqrt(d_qk)".
struct AttentionSettings {
  float scale = 0.0f;
  ffpaCausalMode_t causal = FFPA_CAUSAL_NONE;
  std::shared_ptr<const slices::SliceTable> slices;  // the mask instead of `causal`, when set
  const int32_t* keyLengths = nullptr;  // FFPA_ATTENTION_KEY_LENGTHS: B key counts, on the device
  // When set, calls are those of one rank of a context-parallel ring.
  std::shared_ptr<cp::ContextParallel> contextParallel;
};

void setAttentionAttribute(AttentionSettings& settings, ffpaAttentionAttribute_t attr,
                           const void* value, size_t size);
void getAttentionAttribute(const AttentionSettings& settings, ffpaAttentionAttribute_t attr,
                           void* value, size_t size, size_t* sizeWritten);

const char* causalModeName(ffpaCausalMode_t mode);

}  // namespace ffpa

// The opaque types of the public header. The magic numbers catch use of a destroyed or foreign
// pointer with a clear status instead of undefined behaviour in the common cases.
struct ffpaTensorStruct {
  static constexpr uint64_t kMagic = 0x46465041'54454e53ull;  // "FFPATENS"
  uint64_t magic = kMagic;
  bool isSet = false;
  ffpa::TensorLayout layout;
};

struct ffpaAttentionStruct {
  static constexpr uint64_t kMagic = 0x46465041'4154544eull;  // "FFPAATTN"
  uint64_t magic = kMagic;
  ffpa::AttentionSettings settings;
};

struct ffpaSlicesStruct {
  static constexpr uint64_t kMagic = 0x46465041'534c4943ull;  // "FFPASLIC"
  uint64_t magic = kMagic;
  int32_t deviceOrdinal = 0;
  bool onDevice = false;  // made with a handle that executes: tables are copied to the device
  std::shared_ptr<const ffpa::slices::SliceTable> table;  // null until set
};

namespace ffpa {
// Resolve a descriptor argument, or throw naming `argument` (NULL, not live, never set).
const TensorLayout& tensorLayout(ffpaTensorDescriptor_t desc, const char* argument);
const AttentionSettings& attentionSettings(ffpaAttentionDescriptor_t desc, const char* argument);
}  // namespace ffpa
