#include "core/descriptors.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ffpa {
namespace {

constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxSpanBytes = int64_t{1} << 62;

std::string listText(const int64_t* values, int32_t count) {
  std::string text = "[";
  for (int32_t i = 0; i < count; ++i) text += cat(i ? ", " : "", values[i]);
  return text + "]";
}

__int128 floorDiv(__int128 a, __int128 b) {
  const __int128 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Is `delta` = sum of t[i] * stride[i] with |t[i]| < extent[i], for levels i.. of `levels`
// (strides in decreasing order, each larger than the span `rest[i + 1]` of all smaller ones)?
// The bound leaves at most two candidates for t[i] per level: at most 2^4 paths.
bool reachable(const std::array<std::pair<int64_t, int64_t>, FFPA_MAX_TENSOR_DIMS>& levels,
               const std::array<__int128, FFPA_MAX_TENSOR_DIMS + 1>& rest, int count, int i,
               __int128 delta) {
  if (i == count) return delta == 0;
  const auto [stride, extent] = levels[i];
  const __int128 lo = std::max<__int128>(-floorDiv(-(delta - rest[i + 1]), stride), -(extent - 1));
  const __int128 hi = std::min<__int128>(floorDiv(delta + rest[i + 1], stride), extent - 1);
  for (__int128 t = lo; t <= hi; ++t) {
    if (reachable(levels, rest, count, i + 1, delta - t * stride)) return true;
  }
  return false;
}

}  // namespace

bool copiesShareAnElement(const TensorLayout& layout, int64_t shift) {
  std::array<std::pair<int64_t, int64_t>, FFPA_MAX_TENSOR_DIMS> levels{};
  int count = 0;
  for (int32_t i = 0; i < layout.nbDims; ++i) {
    if (layout.dims[i] > 1) levels[count++] = {layout.strides[i], layout.dims[i]};
  }
  for (int i = 1; i < count; ++i) {  // largest stride first; insertion sort of at most four
    for (int k = i; k > 0 && levels[k - 1].first < levels[k].first; --k) std::swap(levels[k - 1], levels[k]);
  }
  std::array<__int128, FFPA_MAX_TENSOR_DIMS + 1> rest{};
  for (int i = count - 1; i >= 0; --i) rest[i] = rest[i + 1] + __int128{levels[i].first} * (levels[i].second - 1);
  return reachable(levels, rest, count, 0, shift);
}

size_t elementBytes(ffpaDataType_t dtype) { return dtype == FFPA_DATA_TYPE_FLOAT32 ? 4 : 2; }

const char* dataTypeName(ffpaDataType_t dtype) {
  switch (dtype) {
    case FFPA_DATA_TYPE_FLOAT16: return "fp16";
    case FFPA_DATA_TYPE_BFLOAT16: return "bf16";
    case FFPA_DATA_TYPE_FLOAT32: return "fp32";
    default: return "unknown";
  }
}

const char* causalModeName(ffpaCausalMode_t mode) {
  switch (mode) {
    case FFPA_CAUSAL_NONE: return "none";
    case FFPA_CAUSAL_TOP_LEFT: return "top-left";
    case FFPA_CAUSAL_BOTTOM_RIGHT: return "bottom-right";
    default: return "unknown";
  }
}

int64_t TensorLayout::spanElements() const {
  int64_t last = 0;
  for (int32_t i = 0; i < nbDims; ++i) last += (dims[i] - 1) * strides[i];
  return last + 1;
}

int64_t TensorLayout::spanBytes() const {
  return spanElements() * static_cast<int64_t>(elementBytes(dtype));
}

TensorLayout makeTensorLayout(ffpaDataType_t dtype, int32_t nbDims, const int64_t* dims,
                              const int64_t* strides) {
  require(dtype == FFPA_DATA_TYPE_FLOAT16 || dtype == FFPA_DATA_TYPE_BFLOAT16 ||
              dtype == FFPA_DATA_TYPE_FLOAT32,
          FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "dataType ", static_cast<int64_t>(dtype),
          " is not an ffpaDataType_t; allowed: FFPA_DATA_TYPE_FLOAT16 (0), FFPA_DATA_TYPE_BFLOAT16 (1), "
          "FFPA_DATA_TYPE_FLOAT32 (2)");
  require(nbDims == 3 || nbDims == 4, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "nbDims is ", nbDims,
          "; allowed: 3 ([B, H, N] log-sum-exp) or 4 ([B, H, N, D])");
  requireNotNull(dims, "dims");
  for (int32_t i = 0; i < nbDims; ++i) {
    require(dims[i] >= 1 && dims[i] <= kMaxDim, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "dims[", i,
            "] is ", dims[i], " in ", listText(dims, nbDims), "; allowed: 1 to ", kMaxDim);
  }

  TensorLayout layout;
  layout.dtype = dtype;
  layout.nbDims = nbDims;
  std::copy(dims, dims + nbDims, layout.dims.begin());
  if (strides == nullptr) {
    __int128 running = 1;  // 128 bits: four extents of 2^31 overflow 64
    for (int32_t i = nbDims - 1; i >= 0; --i) {
      require(running <= kMaxSpanBytes, FFPA_STATUS_BAD_PARAM_STRIDE, "dims ", listText(dims, nbDims),
              " describe a tensor larger than 2^62 bytes");
      layout.strides[i] = static_cast<int64_t>(running);
      running *= dims[i];
    }
  } else {
    std::copy(strides, strides + nbDims, layout.strides.begin());
  }

  // Non-overlap: visiting the dimensions of extent > 1 from the smallest stride up, each stride
  // must step over everything the smaller ones span. Sufficient, and what real layouts satisfy.
  std::array<int32_t, FFPA_MAX_TENSOR_DIMS> order{};
  for (int32_t i = 0; i < nbDims; ++i) {  // insertion sort by stride: at most four entries
    int32_t k = i;
    for (; k > 0 && layout.strides[order[k - 1]] > layout.strides[i]; --k) order[k] = order[k - 1];
    order[k] = i;
  }
  __int128 covered = 0;  // elements spanned by the dimensions visited so far, minus one
  for (int32_t k = 0; k < nbDims; ++k) {
    const int32_t i = order[k];
    if (layout.dims[i] == 1) continue;
    const int64_t stride = layout.strides[i];
    require(stride >= 1, FFPA_STATUS_BAD_PARAM_STRIDE, "strides[", i, "] is ", stride, " in ",
            listText(layout.strides.data(), nbDims), "; strides of dimensions longer than 1 must be >= 1");
    require(stride > covered, FFPA_STATUS_BAD_PARAM_STRIDE, "strides ",
            listText(layout.strides.data(), nbDims), " make elements of dims ",
            listText(dims, nbDims), " overlap or interleave (strides[", i, "] = ", stride,
            " must exceed ", static_cast<int64_t>(covered), ", the span of the smaller strides)");
    covered += static_cast<__int128>(stride) * (layout.dims[i] - 1);
    require(covered * static_cast<__int128>(elementBytes(dtype)) < kMaxSpanBytes,
            FFPA_STATUS_BAD_PARAM_STRIDE, "strides ", listText(layout.strides.data(), nbDims),
            " describe a tensor spanning more than 2^62 bytes");
  }
  return layout;
}

namespace {

constexpr const char* kNotAnAttribute =
    " is not an ffpaAttentionAttribute_t; allowed: FFPA_ATTENTION_SOFTMAX_SCALE (0), FFPA_ATTENTION_CAUSAL_MODE (1), "
    "FFPA_ATTENTION_KEY_LENGTHS (2)";

}  // namespace

void setAttentionAttribute(AttentionSettings& settings, ffpaAttentionAttribute_t attr,
                           const void* value, size_t size) {
  requireNotNull(value, "value");
  switch (attr) {
    case FFPA_ATTENTION_SOFTMAX_SCALE: {
      require(size == sizeof(float), FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
              "FFPA_ATTENTION_SOFTMAX_SCALE is a float: size must be 4, got ", size);
      float scale;
      std::memcpy(&scale, value, sizeof scale);
      require(std::isfinite(scale) && scale > 0.0f, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND,
              "FFPA_ATTENTION_SOFTMAX_SCALE is ", scale, "; allowed: a finite value > 0");
      settings.scale = scale;
      return;
    }
    case FFPA_ATTENTION_CAUSAL_MODE: {
      require(size == sizeof(int32_t), FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
              "FFPA_ATTENTION_CAUSAL_MODE is an int32_t: size must be 4, got ", size);
      int32_t mode;
      std::memcpy(&mode, value, sizeof mode);
      require(mode >= FFPA_CAUSAL_NONE && mode <= FFPA_CAUSAL_BOTTOM_RIGHT,
              FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "FFPA_ATTENTION_CAUSAL_MODE is ", mode,
              "; allowed: FFPA_CAUSAL_NONE (0), FFPA_CAUSAL_TOP_LEFT (1), FFPA_CAUSAL_BOTTOM_RIGHT (2)");
      settings.causal = static_cast<ffpaCausalMode_t>(mode);
      return;
    }
    case FFPA_ATTENTION_KEY_LENGTHS: {
      require(size == sizeof(const int32_t*), FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
              "FFPA_ATTENTION_KEY_LENGTHS is a const int32_t* (value the address of the pointer): size must be ",
              sizeof(const int32_t*), ", got ", size);
      std::memcpy(&settings.keyLengths, value, sizeof settings.keyLengths);
      return;
    }
    default:
      fail(FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, cat("attr ", static_cast<int64_t>(attr), kNotAnAttribute));
  }
}

void getAttentionAttribute(const AttentionSettings& settings, ffpaAttentionAttribute_t attr,
                           void* value, size_t size, size_t* sizeWritten) {
  const void* source = nullptr;
  const char* name = nullptr;
  size_t bytes = 4;
  const int32_t causal = settings.causal;
  switch (attr) {
    case FFPA_ATTENTION_SOFTMAX_SCALE:
      source = &settings.scale;
      name = "FFPA_ATTENTION_SOFTMAX_SCALE is a float";
      break;
    case FFPA_ATTENTION_CAUSAL_MODE:
      source = &causal;
      name = "FFPA_ATTENTION_CAUSAL_MODE is an int32_t";
      break;
    case FFPA_ATTENTION_KEY_LENGTHS:
      source = &settings.keyLengths;
      name = "FFPA_ATTENTION_KEY_LENGTHS is a const int32_t*";
      bytes = sizeof settings.keyLengths;
      break;
    default:
      fail(FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, cat("attr ", static_cast<int64_t>(attr), kNotAnAttribute));
  }
  if (sizeWritten != nullptr) *sizeWritten = bytes;
  if (size == 0) return;
  requireNotNull(value, "value");
  require(size == bytes, FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, name, ": size must be ", bytes, ", got ", size);
  std::memcpy(value, source, bytes);
}

const TensorLayout& tensorLayout(ffpaTensorDescriptor_t desc, const char* argument) {
  requireNotNull(desc, argument);
  require(desc->magic == ffpaTensorStruct::kMagic, FFPA_STATUS_BAD_PARAM_INVALID_HANDLE, argument,
          " is not a live tensor descriptor (destroyed, or not from ffpaCreateTensorDescriptor)");
  require(desc->isSet, FFPA_STATUS_BAD_PARAM_NOT_FINALIZED, argument,
          " was never set (call ffpaSetTensorDescriptor first)");
  return desc->layout;
}

const AttentionSettings& attentionSettings(ffpaAttentionDescriptor_t desc, const char* argument) {
  requireNotNull(desc, argument);
  require(desc->magic == ffpaAttentionStruct::kMagic, FFPA_STATUS_BAD_PARAM_INVALID_HANDLE, argument,
          " is not a live attention descriptor (destroyed, or not from ffpaCreateAttentionDescriptor)");
  return desc->settings;
}

}  // namespace ffpa
