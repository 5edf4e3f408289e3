// ffpaAttentionMerge's argument checks, on a described device: every check runs before the
// device is touched, so a call that passes them all ends in NOT_INITIALIZED_NO_DEVICE.
#include "test_support.h"

#include <array>

using namespace ffpa_test;

namespace {

// Fake device addresses: far apart, never dereferenced by the checks.
uintptr_t gib(uintptr_t n) { return n << 30; }
template <class T>
T* at(uintptr_t bytes) {
  return reinterpret_cast<T*>(bytes);
}

// The buffers of a merge of three partials, in separate buffers (copyable, to vary one).
struct Buffers {
  std::array<const void*, 3> partialO{at<const void>(gib(1)), at<const void>(gib(2)), at<const void>(gib(3))};
  std::array<const float*, 3> partialLse{at<const float>(gib(4)), at<const float>(gib(5)), at<const float>(gib(6))};
  void* o = at<void>(gib(7));
  float* lse = at<float>(gib(8));
};

// The descriptors of a merge of [2, 4, 100, 512] bf16 partials.
struct MergeCall {
  Tensor partialODesc{FFPA_DATA_TYPE_BFLOAT16, {2, 4, 100, 512}};
  Tensor partialLseDesc{FFPA_DATA_TYPE_FLOAT32, {2, 4, 100}};
  Tensor oDesc{FFPA_DATA_TYPE_BFLOAT16, {2, 4, 100, 512}};
  Tensor lseDesc{FFPA_DATA_TYPE_FLOAT32, {2, 4, 100}};
  Buffers buffers;

  ffpaStatus_t run(ffpaHandle_t h, int32_t count = 3) const { return run(h, buffers, count); }
  ffpaStatus_t run(ffpaHandle_t h, const Buffers& b, int32_t count = 3) const {
    return ffpaAttentionMerge(h, count, partialODesc, b.partialO.data(), partialLseDesc, b.partialLse.data(),
                              oDesc, b.o, lseDesc, b.lse);
  }
};

}  // namespace

TEST_CASE("merge: a valid call passes every check and then needs a device") {
  Handle h;
  MergeCall call;
  CHECK_FAILS_WITH(call.run(h), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE, "ffpaCreateForDevice");
  CHECK_FAILS_WITH(call.run(h, 1), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  // Without the merged log-sum-exp.
  CHECK_FAILS_WITH(ffpaAttentionMerge(h, 3, call.partialODesc, call.buffers.partialO.data(), call.partialLseDesc,
                                      call.buffers.partialLse.data(), call.oDesc, call.buffers.o, nullptr, nullptr),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  // fp32 partials into a bf16 output, and the reverse: the types are independent.
  Tensor partialF32(FFPA_DATA_TYPE_FLOAT32, {2, 4, 100, 512});
  Tensor oF32(FFPA_DATA_TYPE_FLOAT32, {2, 4, 100, 512});
  CHECK_FAILS_WITH(ffpaAttentionMerge(h, 3, partialF32, call.buffers.partialO.data(), call.partialLseDesc,
                                      call.buffers.partialLse.data(), call.oDesc, call.buffers.o, call.lseDesc, call.buffers.lse),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  CHECK_FAILS_WITH(ffpaAttentionMerge(h, 3, call.partialODesc, call.buffers.partialO.data(), call.partialLseDesc,
                                      call.buffers.partialLse.data(), oF32, call.buffers.o, call.lseDesc, call.buffers.lse),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
}

TEST_CASE("merge: count, null pointers and alignment are named") {
  Handle h;
  MergeCall call;
  CHECK_FAILS_WITH(call.run(h, 0), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "count is 0", "1 to FFPA_MAX_MERGE_PARTIALS (32)");
  CHECK_FAILS_WITH(call.run(h, FFPA_MAX_MERGE_PARTIALS + 1), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "count is 33");
  CHECK_FAILS_WITH(call.run(nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "handle");

  CHECK_FAILS_WITH(ffpaAttentionMerge(h, 3, call.partialODesc, nullptr, call.partialLseDesc, call.buffers.partialLse.data(),
                                      call.oDesc, call.buffers.o, call.lseDesc, call.buffers.lse),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "partialO is NULL");
  CHECK_FAILS_WITH(ffpaAttentionMerge(h, 3, call.partialODesc, call.buffers.partialO.data(), call.partialLseDesc, nullptr,
                                      call.oDesc, call.buffers.o, call.lseDesc, call.buffers.lse),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "partialLse is NULL");
  Buffers nullPart;
  nullPart.partialO[2] = nullptr;
  CHECK_FAILS_WITH(call.run(h, nullPart), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "partialO[2] is NULL");
  CHECK_FAILS_WITH(call.run(h, nullPart, 2), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);  // [2] is not one of 2
  Buffers nullLse;
  nullLse.partialLse[1] = nullptr;
  CHECK_FAILS_WITH(call.run(h, nullLse), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "partialLse[1] is NULL");
  Buffers nullOut;
  nullOut.o = nullptr;
  CHECK_FAILS_WITH(call.run(h, nullOut), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "o is NULL");
  CHECK_FAILS_WITH(ffpaAttentionMerge(h, 3, call.partialODesc, call.buffers.partialO.data(), call.partialLseDesc,
                                      call.buffers.partialLse.data(), call.oDesc, call.buffers.o, call.lseDesc, nullptr),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "lse is NULL but lseDesc is not");
  CHECK_FAILS_WITH(ffpaAttentionMerge(h, 3, call.partialODesc, call.buffers.partialO.data(), call.partialLseDesc,
                                      call.buffers.partialLse.data(), call.oDesc, call.buffers.o, nullptr, call.buffers.lse),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "lseDesc is NULL but lse is not");

  // Element alignment is enough (bf16: 2 bytes, fp32 log-sum-exp: 4).
  Buffers odd;
  odd.partialO[1] = at<const void>(gib(2) + 2);
  odd.partialLse[0] = at<const float>(gib(4) + 4);
  odd.o = at<void>(gib(7) + 6);
  CHECK_FAILS_WITH(call.run(h, odd), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  odd.partialO[1] = at<const void>(gib(2) + 1);
  CHECK_FAILS_WITH(call.run(h, odd), FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, "partialO[1]", "2 bytes");
  Buffers oddLse;
  oddLse.lse = at<float>(gib(8) + 2);
  CHECK_FAILS_WITH(call.run(h, oddLse), FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, "lse", "4 bytes");
}

TEST_CASE("merge: shapes, types and strides name the descriptor") {
  Handle h;
  MergeCall call;
  const auto with = [&](ffpaTensorDescriptor_t partialO, ffpaTensorDescriptor_t partialLse,
                        ffpaTensorDescriptor_t o, ffpaTensorDescriptor_t lse) {
    return ffpaAttentionMerge(h, 3, partialO, call.buffers.partialO.data(), partialLse, call.buffers.partialLse.data(), o,
                              call.buffers.o, lse, call.buffers.lse);
  };
  Tensor o3d(FFPA_DATA_TYPE_BFLOAT16, {2, 4, 100});
  CHECK_FAILS_WITH(with(o3d, call.partialLseDesc, call.oDesc, call.lseDesc), FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                   "partialODesc has 3 dimensions");
  Tensor oOther(FFPA_DATA_TYPE_BFLOAT16, {2, 4, 101, 512});
  CHECK_FAILS_WITH(with(call.partialODesc, call.partialLseDesc, oOther, call.lseDesc),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "oDesc is [2, 4, 101, 512]", "expected [2, 4, 100, 512]");
  Tensor oStrided(FFPA_DATA_TYPE_BFLOAT16, {2, 4, 100, 512}, {4 * 100 * 1024, 100 * 1024, 1024, 2});
  CHECK_FAILS_WITH(with(call.partialODesc, call.partialLseDesc, oStrided, call.lseDesc), FFPA_STATUS_BAD_PARAM_STRIDE,
                   "oDesc", "stride of D");
  Tensor lseHalf(FFPA_DATA_TYPE_FLOAT16, {2, 4, 100});
  CHECK_FAILS_WITH(with(call.partialODesc, lseHalf, call.oDesc, call.lseDesc), FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH,
                   "partialLseDesc is fp16", "fp32");
  Tensor lseShort(FFPA_DATA_TYPE_FLOAT32, {2, 4, 99});
  CHECK_FAILS_WITH(with(call.partialODesc, call.partialLseDesc, call.oDesc, lseShort),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "lseDesc is [2, 4, 99]", "expected [2, 4, 100]");
  Tensor lse4d(FFPA_DATA_TYPE_FLOAT32, {2, 4, 100, 1});
  CHECK_FAILS_WITH(with(call.partialODesc, lse4d, call.oDesc, call.lseDesc), FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                   "partialLseDesc has 4 dimensions");
  Tensor wide(FFPA_DATA_TYPE_BFLOAT16, {1, 1, 4, 2048});
  Tensor wideLse(FFPA_DATA_TYPE_FLOAT32, {1, 1, 4});
  CHECK_FAILS_WITH(with(wide, wideLse, wide, wideLse), FFPA_STATUS_NOT_SUPPORTED_SHAPE, "FFPA_MAX_HEAD_DIM");
  Tensor unset;
  CHECK_FAILS_WITH(with(call.partialODesc, unset, call.oDesc, call.lseDesc), FFPA_STATUS_BAD_PARAM_NOT_FINALIZED,
                   "partialLseDesc");
}

TEST_CASE("merge: outputs overlap nothing, except a partial updated in place") {
  Handle h;
  // The partials as slices of one [3, 2, 4, 100, 512] buffer.
  const uintptr_t slice = 2 * 4 * 100 * 512 * 2;
  const uintptr_t lseSlice = 2 * 4 * 100 * 4;
  MergeCall call;
  Buffers sliced;
  sliced.partialO = {at<const void>(gib(1)), at<const void>(gib(1) + slice), at<const void>(gib(1) + 2 * slice)};
  sliced.partialLse = {at<const float>(gib(4)), at<const float>(gib(4) + lseSlice),
                       at<const float>(gib(4) + 2 * lseSlice)};
  CHECK_FAILS_WITH(call.run(h, sliced), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);

  Buffers inPlace = sliced;
  inPlace.o = const_cast<void*>(sliced.partialO[0]);
  inPlace.lse = const_cast<float*>(sliced.partialLse[2]);
  CHECK_FAILS_WITH(call.run(h, inPlace), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);

  Buffers shifted = sliced;
  shifted.o = at<void>(gib(1) + slice / 2);  // straddles partials 0 and 1
  CHECK_FAILS_WITH(call.run(h, shifted), FFPA_STATUS_BAD_PARAM, "output o overlaps a partial output (index 0)");

  // In place, but as another type: the elements would not line up.
  Tensor oF32(FFPA_DATA_TYPE_FLOAT32, {2, 4, 100, 512});
  CHECK_FAILS_WITH(ffpaAttentionMerge(h, 3, call.partialODesc, sliced.partialO.data(), call.partialLseDesc,
                                      sliced.partialLse.data(), oF32, inPlace.o, call.lseDesc, sliced.lse),
                   FFPA_STATUS_BAD_PARAM, "output o overlaps a partial output", "in place");
  // In place, but with other strides (BNHD over a BHND partial).
  Tensor oBnhd(FFPA_DATA_TYPE_BFLOAT16, {2, 4, 100, 512}, {100 * 4 * 512, 512, 4 * 512, 1});
  CHECK_FAILS_WITH(ffpaAttentionMerge(h, 3, call.partialODesc, sliced.partialO.data(), call.partialLseDesc,
                                      sliced.partialLse.data(), oBnhd, inPlace.o, call.lseDesc, sliced.lse),
                   FFPA_STATUS_BAD_PARAM, "output o overlaps a partial output");

  Buffers lseOverO = sliced;
  lseOverO.lse = at<float>(gib(1) + slice);
  CHECK_FAILS_WITH(call.run(h, lseOverO), FFPA_STATUS_BAD_PARAM, "output lse overlaps a partial output (index 1)");
  Buffers outputsMeet = sliced;
  outputsMeet.lse = at<float>(gib(7) + 64);
  CHECK_FAILS_WITH(call.run(h, outputsMeet), FFPA_STATUS_BAD_PARAM, "output o overlaps output lse");
}

TEST_CASE("sinks: ffpaAttentionApplySinks checks its arguments before the device") {
  Handle h;
  Tensor o(FFPA_DATA_TYPE_BFLOAT16, {2, 4, 100, 512});
  Tensor lse(FFPA_DATA_TYPE_FLOAT32, {2, 4, 100});
  const float* sinks = at<const float>(gib(1));
  void* out = at<void>(gib(2));
  float* outLse = at<float>(gib(3));
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, sinks, o, out, lse, outLse), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, nullptr, o, out, lse, outLse), FFPA_STATUS_BAD_PARAM_NULL_POINTER,
                   "sinks is NULL");
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, sinks, o, nullptr, lse, outLse), FFPA_STATUS_BAD_PARAM_NULL_POINTER,
                   "o is NULL");
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, sinks, o, out, lse, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER,
                   "lse is NULL");
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, at<const float>(gib(1) + 2), o, out, lse, outLse),
                   FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, "sinks", "4 bytes");
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, sinks, o, at<void>(gib(2) + 1), lse, outLse),
                   FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, "o (");
  // The 4 sinks (16 bytes) inside O or the LSE.
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, at<const float>(gib(2) + 4096), o, out, lse, outLse),
                   FFPA_STATUS_BAD_PARAM, "o overlaps sinks");
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, at<const float>(gib(3) - 8), o, out, lse, outLse),
                   FFPA_STATUS_BAD_PARAM, "lse overlaps sinks");
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, at<const float>(gib(3) - 16), o, out, lse, outLse),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);  // just before the LSE
  Tensor lseShort(FFPA_DATA_TYPE_FLOAT32, {2, 4, 99});
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, sinks, o, out, lseShort, outLse), FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                   "lseDesc is [2, 4, 99]");
  Tensor o3d(FFPA_DATA_TYPE_BFLOAT16, {2, 4, 100});
  CHECK_FAILS_WITH(ffpaAttentionApplySinks(h, sinks, o3d, out, lse, outLse), FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                   "has 3 dimensions");
}

TEST_CASE("sinks: ffpaAttentionSinksBackward checks its arguments before the device") {
  Handle h;
  Tensor o(FFPA_DATA_TYPE_FLOAT16, {1, 8, 64, 256});
  Tensor lse(FFPA_DATA_TYPE_FLOAT32, {1, 8, 64});
  const float* sinks = at<const float>(gib(1));
  const void* out = at<const void>(gib(2));
  const void* dOut = at<const void>(gib(3));
  const float* outLse = at<const float>(gib(4));
  float* dSinks = at<float>(gib(5));
  const auto call = [&](ffpaTensorDescriptor_t oDesc, ffpaTensorDescriptor_t doDesc, ffpaTensorDescriptor_t lseDesc,
                        const float* s, float* d) {
    return ffpaAttentionSinksBackward(h, s, oDesc, out, doDesc, dOut, lseDesc, outLse, d);
  };
  CHECK_FAILS_WITH(call(o, o, lse, sinks, dSinks), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  CHECK_FAILS_WITH(call(o, o, lse, sinks, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "dSinks is NULL");
  CHECK_FAILS_WITH(call(o, o, lse, nullptr, dSinks), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "sinks is NULL");
  CHECK_FAILS_WITH(ffpaAttentionSinksBackward(h, sinks, o, out, o, nullptr, lse, outLse, dSinks),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "dO is NULL");
  Tensor dOBf16(FFPA_DATA_TYPE_BFLOAT16, {1, 8, 64, 256});
  CHECK_FAILS_WITH(call(o, dOBf16, lse, sinks, dSinks), FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH, "doDesc is bf16");
  Tensor dOShort(FFPA_DATA_TYPE_FLOAT16, {1, 8, 63, 256});
  CHECK_FAILS_WITH(call(o, dOShort, lse, sinks, dSinks), FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "doDesc is [1, 8, 63, 256]");
  Tensor lseHalf(FFPA_DATA_TYPE_FLOAT16, {1, 8, 64});
  CHECK_FAILS_WITH(call(o, o, lseHalf, sinks, dSinks), FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH, "lseDesc is fp16");
  CHECK_FAILS_WITH(call(o, o, lse, sinks, at<float>(gib(4) + 64)), FFPA_STATUS_BAD_PARAM, "dSinks overlaps lse");
  CHECK_FAILS_WITH(call(o, o, lse, sinks, at<float>(gib(1) + 4)), FFPA_STATUS_BAD_PARAM, "dSinks overlaps sinks");
  CHECK_FAILS_WITH(call(o, o, lse, sinks, at<float>(gib(5) + 2)), FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, "dSinks");
}
