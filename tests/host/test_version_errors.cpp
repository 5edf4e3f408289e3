// Versions, status names and categories, the thread-local error message.
#include "test_support.h"

#include <thread>

using namespace ffpa_test;

TEST_CASE("the library's version matches the header and follows the compatibility rule") {
  CHECK(ffpaGetVersion() == FFPA_VERSION);
  CHECK(FFPA_VERSION == FFPA_VERSION_MAJOR * 10000 + FFPA_VERSION_MINOR * 100 + FFPA_VERSION_PATCH);
  CHECK(FFPA_VERSION_IS_COMPATIBLE(ffpaGetVersion()));
  CHECK(FFPA_VERSION_IS_COMPATIBLE(FFPA_VERSION + 100));        // a newer minor serves old programs
  CHECK_FALSE(FFPA_VERSION_IS_COMPATIBLE(FFPA_VERSION + 10000));  // another major does not
  if (FFPA_VERSION_MINOR > 0) CHECK_FALSE(FFPA_VERSION_IS_COMPATIBLE(FFPA_VERSION - 100));
}

TEST_CASE("the build info names the version and the compiled architectures") {
  const std::string info = ffpaGetBuildInfo();
  CHECK(info.find("libffpa ") == 0);
  CHECK(info.find("architectures ") != std::string::npos);
  CHECK(info.find("head dims ") != std::string::npos);
}

TEST_CASE("every status has a name and a category") {
  const ffpaStatus_t all[] = {
      FFPA_STATUS_SUCCESS, FFPA_STATUS_NOT_INITIALIZED, FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE,
      FFPA_STATUS_NOT_INITIALIZED_LIBRARY, FFPA_STATUS_BAD_PARAM, FFPA_STATUS_BAD_PARAM_NULL_POINTER,
      FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, FFPA_STATUS_BAD_PARAM_NOT_FINALIZED,
      FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,
      FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH,
      FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, FFPA_STATUS_BAD_PARAM_STRIDE,
      FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS, FFPA_STATUS_BAD_PARAM_ENVIRONMENT,
      FFPA_STATUS_BAD_PARAM_INVALID_HANDLE, FFPA_STATUS_NOT_SUPPORTED, FFPA_STATUS_NOT_SUPPORTED_SHAPE,
      FFPA_STATUS_NOT_SUPPORTED_DATA_TYPE, FFPA_STATUS_NOT_SUPPORTED_LAYOUT,
      FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH, FFPA_STATUS_NOT_SUPPORTED_SHARED_MEMORY,
      FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION, FFPA_STATUS_INTERNAL_ERROR,
      FFPA_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, FFPA_STATUS_EXECUTION_FAILED,
      FFPA_STATUS_EXECUTION_FAILED_CUDA, FFPA_STATUS_EXECUTION_FAILED_CUBLAS,
      FFPA_STATUS_EXECUTION_FAILED_NON_FINITE};
  for (const ffpaStatus_t status : all) {
    const std::string name = ffpaGetErrorString(status);
    CHECK_MESSAGE(name.rfind("FFPA_STATUS_", 0) == 0, name);
    CHECK_MESSAGE(name != "FFPA_STATUS_UNKNOWN", static_cast<int>(status));
    const ffpaStatus_t category = FFPA_STATUS_CATEGORY(status);
    CHECK(std::string(ffpaGetErrorString(category)) != "FFPA_STATUS_UNKNOWN");
    CHECK(static_cast<int>(category) % 1000 == 0);
  }
  CHECK(FFPA_STATUS_CATEGORY(FFPA_STATUS_BAD_PARAM_STRIDE) == FFPA_STATUS_BAD_PARAM);
  CHECK(FFPA_STATUS_CATEGORY(FFPA_STATUS_NOT_SUPPORTED_SHAPE) == FFPA_STATUS_NOT_SUPPORTED);
  CHECK(std::string(ffpaGetErrorString(static_cast<ffpaStatus_t>(1234))) == "FFPA_STATUS_UNKNOWN");
  CHECK(sizeof(ffpaStatus_t) == 4);
}

TEST_CASE("the last error message is per thread, returns its length and truncates safely") {
  CHECK_FAILS_WITH(ffpaCreateTensorDescriptor(nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER,
                   "ffpaCreateTensorDescriptor", "desc is NULL");
  const std::string full = lastError();
  REQUIRE(full.size() > 10);

  char small[8];
  std::memset(small, 'x', sizeof small);
  CHECK(ffpaGetLastErrorString(small, sizeof small) == full.size());
  CHECK(std::string(small) == full.substr(0, 7));  // truncated and NUL-terminated
  CHECK(ffpaGetLastErrorString(nullptr, 0) == full.size());

  // A successful call leaves the message alone (errno semantics).
  CHECK(ffpaGetVersion() == FFPA_VERSION);
  CHECK(lastError() == full);

  // Another thread has its own message, empty until it fails.
  std::string other = "unset";
  std::thread([&] { other = lastError(); }).join();
  CHECK(other.empty());
}
