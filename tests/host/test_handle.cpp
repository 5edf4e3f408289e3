// Handles: creation on the current device (a clear status without one), described devices,
// streams, destruction.
#include "test_support.h"

using namespace ffpa_test;

TEST_CASE("ffpaCreate either succeeds on a GPU or reports clearly that there is none") {
  ffpaHandle_t handle = reinterpret_cast<ffpaHandle_t>(0x1);
  const ffpaStatus_t status = ffpaCreate(&handle);
  if (status == FFPA_STATUS_SUCCESS) {
    ffpaDeviceDesc_t d{};
    d.structSize = sizeof d;
    REQUIRE_OK(ffpaGetDeviceDesc(handle, &d));
    CHECK(d.smVersion >= 80);
    CHECK(ffpaDestroy(handle) == FFPA_STATUS_SUCCESS);
  } else {
    CHECK(status == FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
    CHECK(handle == nullptr);
    CHECK(lastError().find("no usable CUDA device") != std::string::npos);
  }
  CHECK_FAILS_WITH(ffpaCreate(nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "handle is NULL");
}

TEST_CASE("a handle for a described device reports that device") {
  Handle h;
  ffpaDeviceDesc_t d{};
  d.structSize = sizeof d;
  REQUIRE_OK(ffpaGetDeviceDesc(h, &d));
  const ffpaDeviceDesc_t expected = describedH100();
  CHECK(d.smVersion == expected.smVersion);
  CHECK(d.smCount == expected.smCount);
  CHECK(d.sharedMemPerBlockOptin == expected.sharedMemPerBlockOptin);
  CHECK(std::string(d.name) == expected.name);
  d.structSize = 4;
  CHECK_FAILS_WITH(ffpaGetDeviceDesc(h, &d), FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, "structSize");
  CHECK_FAILS_WITH(ffpaGetDeviceDesc(h, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "device");
}

TEST_CASE("described devices are validated field by field") {
  ffpaHandle_t h = nullptr;
  ffpaDeviceDesc_t d = describedH100();
  d.smVersion = 75;
  CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &d), FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH, "smVersion is 75", "80");
  d = describedH100();
  d.smCount = 0;
  CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &d), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "smCount is 0");
  d = describedH100();
  d.sharedMemPerBlockOptin = 1024;
  CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &d), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "sharedMemPerBlockOptin");
  d = describedH100();
  d.sharedMemPerSm = d.sharedMemPerBlockOptin - 1;
  CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &d), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "sharedMemPerSm");
  d = describedH100();
  d.ordinal = -1;
  CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &d), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "ordinal");
  d = describedH100();
  std::memset(d.name, 'x', sizeof d.name);
  CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &d), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "NUL-terminated");
  d = describedH100();
  d.structSize = 16;
  CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &d), FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, "sizeof(ffpaDeviceDesc_t)");
  CHECK_FAILS_WITH(ffpaCreateForDevice(&h, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "device");
  CHECK(h == nullptr);
}

TEST_CASE("the stream round-trips; NULL handles are refused; NULL destroys nothing") {
  Handle h;
  ffpaStream_t stream = reinterpret_cast<ffpaStream_t>(0x1);
  REQUIRE_OK(ffpaGetStream(h, &stream));
  CHECK(stream == nullptr);  // the default stream until set
  const ffpaStream_t mine = reinterpret_cast<ffpaStream_t>(0x5000);
  REQUIRE_OK(ffpaSetStream(h, mine));
  REQUIRE_OK(ffpaGetStream(h, &stream));
  CHECK(stream == mine);
  CHECK_FAILS_WITH(ffpaGetStream(h, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "stream");
  CHECK_FAILS_WITH(ffpaSetStream(nullptr, mine), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "handle");
  CHECK(ffpaDestroy(nullptr) == FFPA_STATUS_SUCCESS);
}

TEST_CASE("a pointer that is not a handle is refused instead of used") {
  // A live object of another type: its first word is not the handle's magic number.
  Tensor notAHandle;
  auto fake = reinterpret_cast<ffpaHandle_t>(static_cast<ffpaTensorDescriptor_t>(notAHandle));
  CHECK_FAILS_WITH(ffpaSetStream(fake, nullptr), FFPA_STATUS_BAD_PARAM_INVALID_HANDLE, "not a live ffpa handle");
  Attention attn;
  auto fakeTensor = reinterpret_cast<ffpaTensorDescriptor_t>(static_cast<ffpaAttentionDescriptor_t>(attn));
  int32_t nbDims = 0;
  CHECK_FAILS_WITH(ffpaGetTensorDescriptor(fakeTensor, nullptr, 0, &nbDims, nullptr, nullptr),
                   FFPA_STATUS_BAD_PARAM_INVALID_HANDLE, "not a live tensor descriptor");
}
