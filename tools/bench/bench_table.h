// ffpa-bench's result table as aligned text, Markdown or CSV. Plain C++ with no GPU, so that the
// host tests check the formats.
#pragma once

#include <string>
#include <vector>

#include "bench_options.h"

namespace ffpa_bench {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as long as the header
};

// Text: columns padded to their widest cell. Markdown: a pipe table (a '|' in a cell is
// escaped). CSV: RFC 4180, cells with a comma, quote or line break quoted.
std::string renderTable(const Table& table, Format format);

// A number with `precision` digits after the point; "-" for NaN, "inf" for infinity.
std::string fixed(double value, int precision);

}  // namespace ffpa_bench
