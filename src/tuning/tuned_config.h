// Persisted tuned configs: one JSON file per device holding the launch configs that autotuning
// found best for a grid of problem shapes, and the rules that pick an entry for a problem.
// Plain C++ with no device code, shared by the library (lookup at plan time) and ffpa-autotune
// (writing and merging files). The schema is documented in docs/tuned-configs.rst.
//
// Lookup (TunedFile::lookup), as ffpa-attn defines it:
//   1. filters: direction, kernel, autotune mode, dtype, causal, attention bias, dropout, and for
//      the backward bias gradient, dV storage type and the single-query (GEMV) path; entries of
//      older files without the variant fields count as no-bias, no-dropout entries; decode entries
//      (Nq = 1) serve decode problems only, and prefill entries the others;
//   2. the nearest head dim, ties to the larger (384 -> 320, 448 -> 512, 900 -> 1024);
//   3. per sequence length (queries, then keys): the smallest persisted value >= the problem's,
//      else the largest (3000 -> 4096, 32768 -> 16384);
//   4. head counts are a preference, not a filter: an entry with the problem's (Hq, Hkv) wins
//      over the others.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ffpa::tuning {

constexpr int kSchemaVersion = 1;

// A launch config: parameter name -> integer value ("stages": 2, "qk_step": 64, ...). Which names
// a kernel understands, and their ranges, is the kernel's business (see the planner variants).
using LaunchConfig = std::map<std::string, int64_t>;

// What a problem asks a file for.
struct TunedQuery {
  std::string direction;  // "forward" or "backward"
  std::string kernel;     // the planner variant, e.g. "sm80.forward"
  std::string mode;       // "fast" or "max"
  std::string dtype;      // "fp16" or "bf16"
  bool causal = false;
  bool hasAttnBias = false;
  bool hasDropout = false;
  // Backward only.
  bool biasGrad = false;
  std::string gradVStorageDtype;  // "" when the library chooses
  bool useGemv = false;
  int64_t headDim = 0;  // max(d_qk, d_v)
  int64_t seqlenQ = 0;
  int64_t seqlenKv = 0;
  int64_t headsQ = 0;
  int64_t headsKv = 0;
};

struct TunedEntry {
  std::string direction;
  std::string kernel;
  std::string mode;  // "" when the entry leaves it to the file's
  std::string dtype;
  int64_t headDim = 0;   // d_qk
  int64_t headDimV = 0;  // d_v (= headDim when absent)
  int64_t seqlenQ = 0;
  int64_t seqlenKv = 0;
  bool causal = false;
  bool hasAttnBias = false;
  bool hasDropout = false;
  int64_t headsQ = 0;  // 0: not recorded
  int64_t headsKv = 0;
  bool biasGrad = false;
  std::string gradVStorageDtype;
  bool useGemv = false;
  std::optional<int64_t> preprocessDChunk;
  LaunchConfig config;
  double timeMs = 0.0;         // of the winner, when measured
  double defaultTimeMs = 0.0;  // of the built-in defaults on the same inputs, when measured

  int64_t lookupHeadDim() const { return headDim > headDimV ? headDim : headDimV; }
  // The fields that make two entries the same task (everything but the config and timings).
  std::string taskKey() const;
};

// The shape grid a file was generated for (metadata; lookup does not depend on it).
struct TunedGrid {
  std::vector<int64_t> headDims;
  std::vector<int64_t> seqlens;
  std::vector<std::string> dtypes;
  std::vector<std::string> directions;
  int64_t batch = 0;
  int64_t heads = 0;
  bool fullTasks = false;
};

struct TunedFile {
  int schemaVersion = kSchemaVersion;
  std::string library;            // "libffpa 0.1.0"
  std::string deviceName;         // as the CUDA runtime reports it
  std::string computeCapability;  // "9.0"
  std::string mode = "fast";      // the autotune mode of the whole file
  TunedGrid grid;
  std::vector<TunedEntry> entries;

  // The entry for a problem (rules above), or none.
  const TunedEntry* lookup(const TunedQuery& query) const;
};

// The outcome of reading a file: the file, or why it cannot be used.
struct ParseResult {
  std::optional<TunedFile> file;
  std::string error;  // "entries[3].head_dim: expected a positive integer", ...
};

// Reads a file's text. Strict about types and ranges (a wrong value is an error naming its path
// in the document), tolerant of unknown fields (newer writers) and of missing variant fields
// (older writers). Never throws. Texts longer than kMaxFileBytes are refused.
constexpr size_t kMaxFileBytes = size_t{64} << 20;
constexpr size_t kMaxEntries = 1'000'000;
ParseResult parseTunedFile(const std::string& text);

// The file as JSON text (two-space indentation, entries in a stable order).
std::string serializeTunedFile(const TunedFile& file);

// Combines files of one device and mode into one: entries of later files replace entries of
// earlier ones for the same task. Refuses files of different devices, compute capabilities,
// modes or schema versions, naming the first that differs.
struct MergeResult {
  std::optional<TunedFile> file;
  std::string error;
};
MergeResult mergeTunedFiles(const std::vector<TunedFile>& files);

// The file name of a device's configs: its name with every character other than letters,
// digits, '.', '-' and '_' replaced by '_', plus ".json" ("NVIDIA H100 80GB HBM3" ->
// "NVIDIA_H100_80GB_HBM3.json").
std::string deviceFileName(const std::string& deviceName);

}  // namespace ffpa::tuning
