// The properties every fuzz target asserts. A violation prints what was expected and aborts, which
// libFuzzer reports as a crash (saving the input) and the corpus replay as a failed test.
#pragma once

#include "core/error.h"

#include <ffpa/ffpa.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace ffpa_fuzz {

[[noreturn]] inline void violation(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void expect(bool condition, const std::string& what) {
  if (!condition) violation(what);
}

// The failure codes ffpa.h defines (success excluded). Written out from the header rather than
// taken from ffpaGetErrorString, so that a code the library invents is caught.
inline bool isDocumentedFailure(ffpaStatus_t status) {
  switch (status) {
    case FFPA_STATUS_NOT_INITIALIZED:
    case FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE:
    case FFPA_STATUS_NOT_INITIALIZED_LIBRARY:
    case FFPA_STATUS_BAD_PARAM:
    case FFPA_STATUS_BAD_PARAM_NULL_POINTER:
    case FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER:
    case FFPA_STATUS_BAD_PARAM_NOT_FINALIZED:
    case FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND:
    case FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT:
    case FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH:
    case FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH:
    case FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE:
    case FFPA_STATUS_BAD_PARAM_STRIDE:
    case FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS:
    case FFPA_STATUS_BAD_PARAM_ENVIRONMENT:
    case FFPA_STATUS_BAD_PARAM_INVALID_HANDLE:
    case FFPA_STATUS_NOT_SUPPORTED:
    case FFPA_STATUS_NOT_SUPPORTED_SHAPE:
    case FFPA_STATUS_NOT_SUPPORTED_DATA_TYPE:
    case FFPA_STATUS_NOT_SUPPORTED_LAYOUT:
    case FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
    case FFPA_STATUS_NOT_SUPPORTED_SHARED_MEMORY:
    case FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION:
    case FFPA_STATUS_INTERNAL_ERROR:
    case FFPA_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
    case FFPA_STATUS_EXECUTION_FAILED:
    case FFPA_STATUS_EXECUTION_FAILED_CUDA:
    case FFPA_STATUS_EXECUTION_FAILED_CUBLAS:
    case FFPA_STATUS_EXECUTION_FAILED_NON_FINITE:
      return true;
    default:
      return false;
  }
}

inline std::string statusText(ffpaStatus_t status) {
  return std::string(ffpaGetErrorString(status)) + " (" + std::to_string(static_cast<int64_t>(status)) + ")";
}

inline std::string lastErrorMessage() {
  const size_t length = ffpaGetLastErrorString(nullptr, 0);
  std::string text(length + 1, '\0');
  ffpaGetLastErrorString(text.data(), text.size());
  text.resize(length);
  return text;
}

// A C API call returned: a failure must be a documented code other than an internal error (the
// calls fuzzed here involve no device and no allocation worth failing) and leave a message.
inline void expectApiResult(ffpaStatus_t status, const char* function) {
  if (status == FFPA_STATUS_SUCCESS) return;
  expect(isDocumentedFailure(status),
         std::string(function) + " returned " + statusText(status) + ", which ffpa.h does not define");
  expect(FFPA_STATUS_CATEGORY(status) != FFPA_STATUS_INTERNAL_ERROR,
         std::string(function) + " failed with an internal error: " + lastErrorMessage());
  expect(!lastErrorMessage().empty(),
         std::string(function) + " failed with " + statusText(status) + " but left no message");
}

// A call on a NULL descriptor: refused as such.
inline void expectNullPointerRefused(ffpaStatus_t status, const char* function) {
  expectApiResult(status, function);
  expect(status == FFPA_STATUS_BAD_PARAM_NULL_POINTER,
         std::string(function) + " on a NULL descriptor returned " + statusText(status));
}

// The same contract for an ffpa::Error thrown by an internal function.
inline void expectWellFormedError(const ffpa::Error& error, const char* function) {
  const std::string message = error.what();
  expect(isDocumentedFailure(error.status()) &&
             FFPA_STATUS_CATEGORY(error.status()) != FFPA_STATUS_INTERNAL_ERROR,
         std::string(function) + " threw " + statusText(error.status()) + ": " + message);
  expect(!message.empty(), std::string(function) + " threw " + statusText(error.status()) + " without a message");
}

// Runs `body`, which calls internal functions. Returns true when it completed, false when it threw
// a well-formed ffpa::Error; any other exception is a bug (the C boundary would turn it into
// FFPA_STATUS_INTERNAL_ERROR).
template <class Body>
bool completesOrThrowsFfpaError(const char* function, Body&& body) {
  try {
    body();
    return true;
  } catch (const ffpa::Error& error) {
    expectWellFormedError(error, function);
    return false;
  } catch (const std::exception& other) {
    violation(std::string(function) + " threw a non-ffpa exception: " + other.what());
  } catch (...) {
    violation(std::string(function) + " threw something that is not an exception");
  }
}

}  // namespace ffpa_fuzz
