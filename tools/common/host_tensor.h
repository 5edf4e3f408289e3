// Host copies of the tensors libffpa reads and writes: element types, strided layouts, and the
// conversion between a tensor's bytes and float64 values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ffpa_tools {

class Random;

// Element types of attention tensors (libffpa's fp16, bf16 and fp32).
enum class DType { float16, bfloat16, float32 };

size_t dtype_bytes(DType type);
const char* dtype_name(DType type);  // "fp16", "bf16", "fp32"
bool parse_dtype(const std::string& name, DType* type);
// The value of `type` nearest to `value` (through float, then round to nearest even).
double round_to(DType type, double value);
// The largest relative error of rounding to `type`: 2^-11 for fp16, 2^-8 for bf16, 2^-24 for fp32.
double unit_roundoff(DType type);

// Memory orders of a [B, H, N, D] attention tensor; all keep D contiguous, as libffpa requires.
enum class LayoutKind {
  bhnd,    // packed; each head's [N, D] block is contiguous
  bnhd,    // packed; each position holds all heads: stride(H) = D, stride(N) = H * D
  padded,  // BHND with a gap after each row, each head and each batch (odd sizes on purpose)
  // BHND with gaps of whole 16-byte units (for 16-bit elements), as kernels that load rows with
  // 16-byte copies require: gaps they serve, where an out-of-bounds write shows.
  padded_aligned,
};
const char* layout_name(LayoutKind kind);

// Extents and strides (in elements) of a tensor of 3 or 4 dimensions. A 3-dimensional tensor
// keeps dims[3] = 1, so that every tensor can be walked as [d0, d1, d2, d3].
struct TensorLayout {
  int nb_dims = 4;
  int64_t dims[4] = {1, 1, 1, 1};
  int64_t strides[4] = {1, 1, 1, 1};

  int64_t element_count() const;
  // Elements from the first to one past the last, gaps included: the size of the allocation.
  int64_t span() const;
  int64_t offset(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
    return i0 * strides[0] + i1 * strides[1] + i2 * strides[2] + i3 * strides[3];
  }
};

// Q, K, V, O and their gradients: [B, H, N, D].
TensorLayout attention_layout(LayoutKind kind, int64_t batch, int64_t heads, int64_t seq,
                              int64_t dim);
// The log-sum-exp: [B, H, N]; `padded` and `padded_aligned` leave a gap after each head and each
// batch.
TensorLayout lse_layout(LayoutKind kind, int64_t batch, int64_t heads, int64_t seq);

// A tensor's bytes on the host, in the element type and layout the device uses.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType type, const TensorLayout& layout);

  DType dtype() const { return dtype_; }
  const TensorLayout& layout() const { return layout_; }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  size_t size_bytes() const { return bytes_.size(); }

  double get(int64_t i0, int64_t i1, int64_t i2, int64_t i3 = 0) const {
    return load(layout_.offset(i0, i1, i2, i3));
  }
  // Stores `value` rounded to the element type.
  void set(int64_t i0, int64_t i1, int64_t i2, int64_t i3, double value) {
    store(layout_.offset(i0, i1, i2, i3), value);
  }

  // Every element, in row-major order of the dimensions: the dense layout of cpu_attention.h.
  std::vector<double> to_dense() const;
  // The inverse of to_dense(); values are rounded to the element type.
  void from_dense(const std::vector<double>& values);
  // The [N, D] matrix of one (batch, head) of a 4-dimensional tensor, dense.
  std::vector<double> head_matrix(int64_t batch, int64_t head) const;

  // Every element uniform in [low, high), rounded to the element type.
  void fill_uniform(Random& random, double low, double high);
  // Every byte 0xFF, which is NaN in fp16, bf16 and fp32: an element nobody writes fails any
  // comparison.
  void poison();
  // True when every byte outside the elements (the gaps of a padded layout) is still 0xFF.
  bool gaps_untouched() const;

 private:
  double load(int64_t offset) const;
  void store(int64_t offset, double value);
  // Calls visit(offset) for every element, in row-major order of the dimensions.
  template <typename Visit>
  void for_each_offset(Visit&& visit) const;

  DType dtype_ = DType::float32;
  TensorLayout layout_;
  std::vector<uint8_t> bytes_;
};

}  // namespace ffpa_tools
