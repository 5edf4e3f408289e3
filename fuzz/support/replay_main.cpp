// Replays a fuzz target's corpus without libFuzzer: every file of the directories given is passed
// once to LLVMFuzzerTestOneInput. Built with the normal compiler in every build, so each corpus
// input (seeds and the crashers found since) is a regression test of the host suite. A violated
// property aborts the process, which fails the test; the summary line is doctest's, which
// tools/test-summary.py adds up.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::filesystem::path> inputsOf(const std::filesystem::path& directory) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // the same order on every machine
  return files;
}

std::vector<uint8_t> contentsOf(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR...\n", argv[0]);
    return 2;
  }
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    std::error_code error;
    if (!std::filesystem::is_directory(argv[i], error)) {
      std::fprintf(stderr, "%s is not a directory\n", argv[i]);
      std::printf("[doctest] test cases: 1 | 0 passed | 1 failed | 0 skipped\n");
      return 1;
    }
    for (const auto& file : inputsOf(argv[i])) {
      // Named before it runs: when an input aborts, the last line says which one.
      std::fprintf(stderr, "replaying %s\n", file.c_str());
      const std::vector<uint8_t> input = contentsOf(file);
      LLVMFuzzerTestOneInput(input.data(), input.size());
      ++replayed;
    }
  }
  if (replayed == 0) {
    std::fprintf(stderr, "no input to replay: an empty corpus tests nothing\n");
    std::printf("[doctest] test cases: 1 | 0 passed | 1 failed | 0 skipped\n");
    return 1;
  }
  std::printf("[doctest] test cases: %zu | %zu passed | 0 failed | 0 skipped\n", replayed, replayed);
  return 0;
}
