#include "bench_table.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ffpa_bench {
namespace {

std::string csvCell(const std::string& cell) {
  if (cell.find_first_of(",\"\r\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (const char c : cell) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string markdownCell(const std::string& cell) {
  std::string escaped;
  for (const char c : cell) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  return escaped;
}

}  // namespace

std::string fixed(double value, int precision) {
  if (std::isnan(value)) return "-";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(precision);
  out << value;
  return out.str();
}

std::string renderTable(const Table& table, Format format) {
  std::ostringstream out;
  if (format == Format::csv) {
    auto line = [&](const std::vector<std::string>& cells) {
      for (size_t i = 0; i < cells.size(); ++i) out << (i ? "," : "") << csvCell(cells[i]);
      out << "\n";
    };
    line(table.header);
    for (const auto& row : table.rows) line(row);
    return out.str();
  }
  const bool markdown = format == Format::markdown;
  std::vector<std::vector<std::string>> all{table.header};
  all.insert(all.end(), table.rows.begin(), table.rows.end());
  if (markdown) {
    for (auto& row : all)
      for (auto& cell : row) cell = markdownCell(cell);
  }
  std::vector<size_t> widths(table.header.size(), 0);
  for (const auto& row : all)
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  for (size_t r = 0; r < all.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < all[r].size(); ++i) {
      const std::string padded = all[r][i] + std::string(widths[i] - all[r][i].size(), ' ');
      line += markdown ? "| " + padded + " " : (i ? "  " : "") + padded;
    }
    if (markdown) line += "|";
    // Text rows end without the last column's padding.
    out << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
    if (r == 0 && markdown) {
      for (const size_t w : widths) out << "|" << std::string(w + 2, '-');
      out << "|\n";
    }
  }
  return out.str();
}

}  // namespace ffpa_bench
