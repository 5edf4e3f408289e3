// A doctest listener for every test suite's main(): with FFPA_TEST_TRACE=FILE in the environment,
// the start and the end (with its seconds) of every case and subcase are appended to FILE as they
// happen, each line flushed. When a case never returns (a kernel that hangs) and the process is
// killed, the last "start" lines name where it stopped. Include once, after doctest.h, in the
// translation unit of main() (a listener registered from a static library's unreferenced object
// would not be linked).
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

namespace ffpa_test_support {

class TraceListener : public doctest::IReporter {
 public:
  explicit TraceListener(const doctest::ContextOptions&) {
    const char* path = std::getenv("FFPA_TEST_TRACE");
    if (path != nullptr && *path != '\0') file_ = std::fopen(path, "a");
  }
  ~TraceListener() override {
    if (file_ != nullptr) std::fclose(file_);
  }
  TraceListener(const TraceListener&) = delete;
  TraceListener& operator=(const TraceListener&) = delete;

  void test_case_start(const doctest::TestCaseData& data) override {
    current_ = data.m_name;
    line("start", current_);
  }
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    if (file_ == nullptr) return;
    std::fprintf(file_, "end %s: %.3f s%s\n", current_, stats.seconds, stats.testCaseSuccess ? "" : " (failed)");
    std::fflush(file_);
  }
  void subcase_start(const doctest::SubcaseSignature& subcase) override {
    line("  subcase", subcase.m_name.c_str());
  }
  void test_case_exception(const doctest::TestCaseException& e) override {
    line("exception", e.error_string.c_str());
  }

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  void line(const char* what, const char* name) {
    if (file_ == nullptr) return;
    std::fprintf(file_, "%s %s\n", what, name);
    std::fflush(file_);
  }

  std::FILE* file_ = nullptr;
  const char* current_ = "";
};

}  // namespace ffpa_test_support

REGISTER_LISTENER("ffpa-trace", 1, ffpa_test_support::TraceListener);
