// ffpa-bench's table in its three formats: aligned text, Markdown, CSV.
#include "bench_table.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace ffpa_bench;

namespace {

Table sample() {
  Table table;
  table.header = {"d", "kernel", "config"};
  table.rows = {{"320", "sm80.forward", "Br=64 Bc=64, stages=2"}, {"1024", "a|b", "say \"hi\""}};
  return table;
}

}  // namespace

TEST_CASE("text: columns padded to the widest cell, no trailing blanks") {
  CHECK(renderTable(sample(), Format::text) ==
        "d     kernel        config\n"
        "320   sm80.forward  Br=64 Bc=64, stages=2\n"
        "1024  a|b           say \"hi\"\n");
}

TEST_CASE("Markdown: a pipe table with its rule, pipes in cells escaped") {
  CHECK(renderTable(sample(), Format::markdown) ==
        "| d    | kernel       | config                |\n"
        "|------|--------------|-----------------------|\n"
        "| 320  | sm80.forward | Br=64 Bc=64, stages=2 |\n"
        "| 1024 | a\\|b         | say \"hi\"              |\n");
}

TEST_CASE("CSV: cells with commas or quotes are quoted, quotes doubled") {
  CHECK(renderTable(sample(), Format::csv) ==
        "d,kernel,config\n"
        "320,sm80.forward,\"Br=64 Bc=64, stages=2\"\n"
        "1024,a|b,\"say \"\"hi\"\"\"\n");
}

TEST_CASE("numbers: fixed digits, a dash for what was not measured") {
  CHECK(fixed(1.23456, 3) == "1.235");
  CHECK(fixed(250.0, 1) == "250.0");
  CHECK(fixed(std::numeric_limits<double>::quiet_NaN(), 2) == "-");
  CHECK(fixed(std::numeric_limits<double>::infinity(), 2) == "inf");
}
