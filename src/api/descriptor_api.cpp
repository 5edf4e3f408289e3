// Tensor and attention descriptors.
#include "api/boundary.h"

#include "core/descriptors.h"

#include <algorithm>

namespace {

ffpaTensorStruct& liveTensor(ffpaTensorDescriptor_t desc) {
  ffpa::requireNotNull(desc, "desc");
  ffpa::require(desc->magic == ffpaTensorStruct::kMagic, FFPA_STATUS_BAD_PARAM_INVALID_HANDLE,
                "desc is not a live tensor descriptor (destroyed, or not from ffpaCreateTensorDescriptor)");
  return *desc;
}

ffpaAttentionStruct& liveAttention(ffpaAttentionDescriptor_t desc) {
  ffpa::attentionSettings(desc, "desc");  // throws unless live
  return *desc;
}

}  // namespace

extern "C" {

FFPA_API ffpaStatus_t ffpaCreateTensorDescriptor(ffpaTensorDescriptor_t* desc) {
  return ffpa::guarded("ffpaCreateTensorDescriptor", [&] {
    ffpa::requireNotNull(desc, "desc");
    *desc = nullptr;
    *desc = new ffpaTensorStruct();
  });
}

FFPA_API ffpaStatus_t ffpaDestroyTensorDescriptor(ffpaTensorDescriptor_t desc) {
  return ffpa::guarded("ffpaDestroyTensorDescriptor", [&] {
    if (desc == nullptr) return;
    liveTensor(desc).magic = 0;
    delete desc;
  });
}

FFPA_API ffpaStatus_t ffpaSetTensorDescriptor(ffpaTensorDescriptor_t desc, ffpaDataType_t dataType,
                                              int32_t nbDims, const int64_t* dims,
                                              const int64_t* strides) {
  return ffpa::guarded("ffpaSetTensorDescriptor", [&] {
    ffpaTensorStruct& tensor = liveTensor(desc);
    tensor.layout = ffpa::makeTensorLayout(dataType, nbDims, dims, strides);
    tensor.isSet = true;
  });
}

FFPA_API ffpaStatus_t ffpaGetTensorDescriptor(ffpaTensorDescriptor_t desc, ffpaDataType_t* dataType,
                                              int32_t requested, int32_t* nbDims, int64_t* dims,
                                              int64_t* strides) {
  return ffpa::guarded("ffpaGetTensorDescriptor", [&] {
    const ffpa::TensorLayout& layout = ffpa::tensorLayout(desc, "desc");
    ffpa::require(requested >= 0, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "requested is ", requested,
                  "; allowed: >= 0");
    if (dataType != nullptr) *dataType = layout.dtype;
    if (nbDims != nullptr) *nbDims = layout.nbDims;
    const int32_t n = std::min(requested, layout.nbDims);
    if (dims != nullptr) std::copy(layout.dims.begin(), layout.dims.begin() + n, dims);
    if (strides != nullptr) std::copy(layout.strides.begin(), layout.strides.begin() + n, strides);
  });
}

FFPA_API ffpaStatus_t ffpaCreateAttentionDescriptor(ffpaAttentionDescriptor_t* desc) {
  return ffpa::guarded("ffpaCreateAttentionDescriptor", [&] {
    ffpa::requireNotNull(desc, "desc");
    *desc = nullptr;
    *desc = new ffpaAttentionStruct();
  });
}

FFPA_API ffpaStatus_t ffpaDestroyAttentionDescriptor(ffpaAttentionDescriptor_t desc) {
  return ffpa::guarded("ffpaDestroyAttentionDescriptor", [&] {
    if (desc == nullptr) return;
    liveAttention(desc).magic = 0;
    delete desc;
  });
}

FFPA_API ffpaStatus_t ffpaSetAttentionAttribute(ffpaAttentionDescriptor_t desc,
                                                ffpaAttentionAttribute_t attr, const void* value,
                                                size_t size) {
  return ffpa::guarded("ffpaSetAttentionAttribute", [&] {
    ffpa::setAttentionAttribute(liveAttention(desc).settings, attr, value, size);
  });
}

FFPA_API ffpaStatus_t ffpaGetAttentionAttribute(ffpaAttentionDescriptor_t desc,
                                                ffpaAttentionAttribute_t attr, void* value,
                                                size_t size, size_t* sizeWritten) {
  return ffpa::guarded("ffpaGetAttentionAttribute", [&] {
    ffpa::getAttentionAttribute(liveAttention(desc).settings, attr, value, size, sizeWritten);
  });
}

}  // extern "C"
