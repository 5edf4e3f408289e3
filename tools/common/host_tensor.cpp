#include "common/host_tensor.h"

#include <cstring>
#include <stdexcept>

#include "common/half_precision.h"
#include "common/random.h"

namespace ffpa_tools {

size_t dtype_bytes(DType type) {
  return type == DType::float32 ? 4 : 2;
}

const char* dtype_name(DType type) {
  switch (type) {
    case DType::float16: return "fp16";
    case DType::bfloat16: return "bf16";
    case DType::float32: return "fp32";
  }
  return "?";
}

bool parse_dtype(const std::string& name, DType* type) {
  for (DType candidate : {DType::float16, DType::bfloat16, DType::float32}) {
    if (name == dtype_name(candidate)) {
      *type = candidate;
      return true;
    }
  }
  return false;
}

double round_to(DType type, double value) {
  const float single = static_cast<float>(value);
  switch (type) {
    case DType::float16: return half_bits_to_float(float_to_half_bits(single));
    case DType::bfloat16: return bfloat16_bits_to_float(float_to_bfloat16_bits(single));
    case DType::float32: return single;
  }
  return single;
}

double unit_roundoff(DType type) {
  switch (type) {
    case DType::float16: return 1.0 / 2048.0;
    case DType::bfloat16: return 1.0 / 256.0;
    case DType::float32: return 1.0 / 16777216.0;
  }
  return 0.0;
}

const char* layout_name(LayoutKind kind) {
  switch (kind) {
    case LayoutKind::bhnd: return "BHND";
    case LayoutKind::bnhd: return "BNHD";
    case LayoutKind::padded: return "padded";
    case LayoutKind::padded_aligned: return "padded-aligned";
  }
  return "?";
}

int64_t TensorLayout::element_count() const {
  return dims[0] * dims[1] * dims[2] * dims[3];
}

int64_t TensorLayout::span() const {
  return offset(dims[0] - 1, dims[1] - 1, dims[2] - 1, dims[3] - 1) + 1;
}

namespace {

// Gaps of the padded layout, in elements. Odd on purpose: a strided tensor need not keep rows
// aligned, and an implementation that assumes it would read the wrong elements.
constexpr int64_t kRowGap = 3;
constexpr int64_t kHeadGap = 5;
constexpr int64_t kBatchGap = 7;
// Gaps of the aligned padded layout: multiples of 8 elements, 16 bytes of a 16-bit type.
constexpr int64_t kAlignedRowGap = 8;
constexpr int64_t kAlignedHeadGap = 16;
constexpr int64_t kAlignedBatchGap = 24;

}  // namespace

TensorLayout attention_layout(LayoutKind kind, int64_t batch, int64_t heads, int64_t seq,
                              int64_t dim) {
  TensorLayout layout;
  layout.nb_dims = 4;
  layout.dims[0] = batch;
  layout.dims[1] = heads;
  layout.dims[2] = seq;
  layout.dims[3] = dim;
  layout.strides[3] = 1;
  switch (kind) {
    case LayoutKind::bhnd:
      layout.strides[2] = dim;
      layout.strides[1] = seq * dim;
      layout.strides[0] = heads * seq * dim;
      break;
    case LayoutKind::bnhd:
      layout.strides[1] = dim;
      layout.strides[2] = heads * dim;
      layout.strides[0] = seq * heads * dim;
      break;
    case LayoutKind::padded:
      layout.strides[2] = dim + kRowGap;
      layout.strides[1] = seq * layout.strides[2] + kHeadGap;
      layout.strides[0] = heads * layout.strides[1] + kBatchGap;
      break;
    case LayoutKind::padded_aligned:
      layout.strides[2] = dim + kAlignedRowGap;
      layout.strides[1] = seq * layout.strides[2] + kAlignedHeadGap;
      layout.strides[0] = heads * layout.strides[1] + kAlignedBatchGap;
      break;
  }
  return layout;
}

TensorLayout lse_layout(LayoutKind kind, int64_t batch, int64_t heads, int64_t seq) {
  TensorLayout layout;
  layout.nb_dims = 3;
  layout.dims[0] = batch;
  layout.dims[1] = heads;
  layout.dims[2] = seq;
  layout.strides[2] = 1;
  const bool padded = kind == LayoutKind::padded || kind == LayoutKind::padded_aligned;
  layout.strides[1] = seq + (padded ? kHeadGap : 0);
  layout.strides[0] = heads * layout.strides[1] + (padded ? kBatchGap : 0);
  return layout;
}

HostTensor::HostTensor(DType type, const TensorLayout& layout)
    : dtype_(type),
      layout_(layout),
      bytes_(static_cast<size_t>(layout.span()) * dtype_bytes(type), 0) {}

double HostTensor::load(int64_t offset) const {
  const uint8_t* at = bytes_.data() + static_cast<size_t>(offset) * dtype_bytes(dtype_);
  if (dtype_ == DType::float32) {
    float value;
    std::memcpy(&value, at, sizeof value);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, at, sizeof bits);
  return dtype_ == DType::float16 ? half_bits_to_float(bits) : bfloat16_bits_to_float(bits);
}

void HostTensor::store(int64_t offset, double value) {
  uint8_t* at = bytes_.data() + static_cast<size_t>(offset) * dtype_bytes(dtype_);
  const float single = static_cast<float>(value);
  if (dtype_ == DType::float32) {
    std::memcpy(at, &single, sizeof single);
    return;
  }
  const uint16_t bits =
      dtype_ == DType::float16 ? float_to_half_bits(single) : float_to_bfloat16_bits(single);
  std::memcpy(at, &bits, sizeof bits);
}

template <typename Visit>
void HostTensor::for_each_offset(Visit&& visit) const {
  const int64_t* d = layout_.dims;
  for (int64_t i0 = 0; i0 < d[0]; ++i0)
    for (int64_t i1 = 0; i1 < d[1]; ++i1)
      for (int64_t i2 = 0; i2 < d[2]; ++i2)
        for (int64_t i3 = 0; i3 < d[3]; ++i3) visit(layout_.offset(i0, i1, i2, i3));
}

std::vector<double> HostTensor::to_dense() const {
  std::vector<double> values;
  values.reserve(static_cast<size_t>(layout_.element_count()));
  for_each_offset([&](int64_t offset) { values.push_back(load(offset)); });
  return values;
}

void HostTensor::from_dense(const std::vector<double>& values) {
  if (static_cast<int64_t>(values.size()) != layout_.element_count()) {
    throw std::invalid_argument("HostTensor::from_dense: element count differs");
  }
  size_t next = 0;
  for_each_offset([&](int64_t offset) { store(offset, values[next++]); });
}

std::vector<double> HostTensor::head_matrix(int64_t batch, int64_t head) const {
  const int64_t rows = layout_.dims[2];
  const int64_t cols = layout_.dims[3];
  std::vector<double> matrix(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      matrix[static_cast<size_t>(r * cols + c)] = get(batch, head, r, c);
  return matrix;
}

void HostTensor::fill_uniform(Random& random, double low, double high) {
  for_each_offset([&](int64_t offset) { store(offset, random.uniform(low, high)); });
}

void HostTensor::poison() {
  std::memset(bytes_.data(), 0xff, bytes_.size());
}

bool HostTensor::gaps_untouched() const {
  const size_t element = dtype_bytes(dtype_);
  std::vector<bool> is_element(static_cast<size_t>(layout_.span()), false);
  for_each_offset([&](int64_t offset) { is_element[static_cast<size_t>(offset)] = true; });
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (!is_element[i / element] && bytes_[i] != 0xff) return false;
  }
  return true;
}

}  // namespace ffpa_tools
