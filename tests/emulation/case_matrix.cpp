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

std::vector<AttentionCase> backwardKeyLengthCases() {
  using ffpa_tools::CausalMask;
  struct LengthCase {
    ffpa_tools::AttentionProblem shape;
    std::vector<int64_t> lengths;
    uint64_t scheduleSeed;
  };
  const LengthCase lengthCases[] = {
      {problem(4, 2, 1, 37, 150, 64, 64, CausalMask::none), {0, 1, 70, 150}, 0},
      {problem(3, 2, 2, 70, 130, 128, 96, CausalMask::bottom_right), {130, 65, 20}, 0},
      {problem(3, 4, 2, 50, 100, 320, 320, CausalMask::top_left), {-5, 999, 33}, 2},
      {problem(2, 2, 1, 40, 200, 512, 512, CausalMask::bottom_right), {190, 17}, 3},
      {problem(2, 2, 2, 70, 140, 576, 512, CausalMask::bottom_right), {100, 140}, 0},
      {problem(2, 2, 1, 60, 150, 1024, 1024, CausalMask::none), {129, 64}, 4},
  };
  std::vector<AttentionCase> cases;
  uint64_t start = 9700;
  for (const LengthCase& l : lengthCases) {
    AttentionCase c;
    c.shape = l.shape;
    c.shape.key_lengths = l.lengths;
    c.layout = kLayouts[start % 3];
    c.dtype = start % 2 ? ffpa_tools::DType::bfloat16 : ffpa_tools::DType::float16;
    c.withLse = true;
    c.scheduleSeed = l.scheduleSeed;
    c.start = start++;
    cases.push_back(c);
  }
  return cases;
}

std::vector<AttentionCase> sliceCases() {
  using ffpa_tools::DType;
  using ffpa_tools::LayoutKind;
  constexpr int kFull = 0, kCausal = 1, kInverse = 2, kBicausal = 3;
  struct SliceCase {
    int64_t batch, heads, headsKv, seqQ, seqKv, dimQk, dimV;
    DType dtype;
    LayoutKind layout;
    std::vector<ffpa_tools::Slice> slices;
  };
  const SliceCase cases[] = {
      {2, 2, 1, 150, 150, 128, 128, DType::float16, LayoutKind::bnhd,
       {{0, 1, 0, 1, kCausal}, {1, 41, 1, 41, kCausal}, {41, 111, 41, 111, kCausal}, {111, 150, 111, 150, kCausal}}},
      // Keys 130 to 149 past the slices' key extent.
      {1, 2, 2, 130, 150, 512, 512, DType::bfloat16, LayoutKind::bhnd,
       {{0, 30, 0, 30, kCausal}, {30, 75, 0, 30, kFull}, {30, 75, 30, 75, kCausal},
        {75, 130, 0, 30, kFull}, {75, 130, 75, 130, kCausal}}},
      {1, 2, 2, 100, 100, 1024, 1024, DType::float16, LayoutKind::padded_aligned,
       {{0, 19, 0, 19, kCausal}, {19, 100, 0, 100, kBicausal}}},
      // Keys 170 to 179 between the slices' keys, 190 to 199 after them.
      {1, 3, 1, 120, 200, 576, 512, DType::bfloat16, LayoutKind::bnhd,
       {{5, 40, 0, 70, kCausal}, {5, 40, 70, 170, kInverse}, {50, 90, 180, 190, kFull}}},
      {1, 2, 2, 90, 90, 320, 320, DType::float16, LayoutKind::padded_aligned,
       {{0, 45, 0, 45, kFull}, {45, 90, 0, 45, kInverse}, {45, 90, 45, 90, kBicausal}}},
  };
  std::vector<AttentionCase> list;
  for (const SliceCase& sc : cases) {
    const int index = static_cast<int>(list.size());
    AttentionCase c;
    c.shape = problem(sc.batch, sc.heads, sc.headsKv, sc.seqQ, sc.seqKv, sc.dimQk, sc.dimV, ffpa_tools::CausalMask::none);
    c.shape.slices = sc.slices;
    c.dtype = sc.dtype;
    c.layout = sc.layout;
    c.start = 9500 + index;
    c.scheduleSeed = index % 2 ? 0 : 21 + index;
    list.push_back(c);
  }
  return list;
}

std::vector<ffpa_tools::Slice> documentsWithPrefix() {
  constexpr int kFull = 0, kCausal = 1;
  return {{0, 150, 0, 150, kCausal}, {150, 187, 150, 187, kCausal}, {187, 300, 187, 300, kCausal},
          {150, 300, 0, 20, kFull}};
}

std::vector<ffpa_tools::Slice> bandsAndDiagonal() {
  constexpr int kCausal = 1, kInverse = 2, kBicausal = 3;
  return {{0, 100, 0, 160, kInverse}, {100, 170, 40, 180, kCausal}, {170, 190, 100, 120, kBicausal}};
}

std::vector<ffpa_tools::Slice> tallSlices() {
  constexpr int kFull = 0, kInverse = 2, kBicausal = 3;
  return {{0, 200, 0, 50, kInverse}, {0, 90, 60, 80, kBicausal}, {100, 200, 60, 100, kFull}};
}

}  // namespace emulation_test
