#include "case_matrix.h"

#include "ffpa_build_config.h"

#include <sstream>
#include <string>

namespace emulation_test {

ffpa_tools::AttentionProblem problem(int64_t batch, int64_t headsQ, int64_t headsKv, int64_t seqQ,
                                     int64_t seqKv, int64_t dimQk, int64_t dimV,
                                     ffpa_tools::CausalMask mask) {
  ffpa_tools::AttentionProblem p =
      ffpa_tools::attention_shape(batch, headsQ, headsKv, seqQ, seqKv, dimQk, dimV, mask);
  p.scale = ffpa_tools::default_scale(dimQk);
  return p;
}

std::vector<int> listOf(const char* commaSeparated) {
  std::vector<int> values;
  std::istringstream list(commaSeparated);
  for (std::string item; std::getline(list, item, ',');) values.push_back(std::stoi(item));
  return values;
}

int largestCompiledHeadDim() {
  int largest = 0;
  for (int d : listOf(FFPA_BUILD_HEADDIMS)) largest = d > largest ? d : largest;
  return largest;
}

}  // namespace emulation_test
