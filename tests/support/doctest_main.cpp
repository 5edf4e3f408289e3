// The main() of the host test suites: doctest's own, with the trace of FFPA_TEST_TRACE
// (trace_listener.h).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "trace_listener.h"
