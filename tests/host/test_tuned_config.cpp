// Tuned-config files (src/tuning): the schema reader, the lookup rules with ffpa-attn's example
// tables, writing, merging, file names; and the per-process store of src/core that finds a
// device's file and warns once about a file it cannot use.
#include "core/logging.h"
#include "core/tuned_configs.h"
#include "tuning/tuned_config.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

using namespace ffpa::tuning;

namespace {

TunedEntry entry(int64_t headDim, int64_t seqlen, const std::string& dtype = "bf16", bool causal = false) {
  TunedEntry e;
  e.direction = "forward";
  e.kernel = "sm80.forward";
  e.dtype = dtype;
  e.headDim = e.headDimV = headDim;
  e.seqlenQ = e.seqlenKv = seqlen;
  e.causal = causal;
  e.config = {{"stages", 2}, {"qk_step", headDim}};  // a config that tells entries apart
  return e;
}

TunedFile fileOf(std::vector<TunedEntry> entries) {
  TunedFile f;
  f.library = "libffpa test";
  f.deviceName = "Described H100";
  f.computeCapability = "9.0";
  f.entries = std::move(entries);
  return f;
}

TunedQuery query(int64_t headDim, int64_t seqlen, const std::string& dtype = "bf16") {
  TunedQuery q;
  q.direction = "forward";
  q.kernel = "sm80.forward";
  q.mode = "fast";
  q.dtype = dtype;
  q.headDim = headDim;
  q.seqlenQ = q.seqlenKv = seqlen;
  q.headsQ = q.headsKv = 32;
  return q;
}

// The (head dim, seqlen) of the entry a query finds, or (0, 0).
std::pair<int64_t, int64_t> found(const TunedFile& file, const TunedQuery& q) {
  const TunedEntry* e = file.lookup(q);
  return e ? std::make_pair(e->lookupHeadDim(), e->seqlenKv) : std::make_pair(int64_t{0}, int64_t{0});
}

std::string errorOf(const std::string& text) {
  const ParseResult r = parseTunedFile(text);
  CHECK_FALSE(r.file.has_value());
  return r.error;
}

const char* const kValidFile = R"({
  "schema_version": 1,
  "library": "libffpa 0.1.0",
  "device": {"name": "Described H100", "compute_capability": "9.0", "a_newer_field": 1},
  "autotune_mode": "fast",
  "grid": {"head_dims": [320, 512], "seqlens": [1024, 4096], "dtypes": ["bf16"],
           "directions": ["forward", "backward"], "batch": 1, "heads": 32, "full_tasks": false},
  "entries": [
    {"direction": "forward", "kernel": "sm80.forward", "dtype": "bf16", "head_dim": 512, "head_dim_v": 512,
     "seqlen_q": 4096, "seqlen_kv": 4096, "causal": false, "has_attn_bias": false, "has_dropout": false,
     "nheads_q": 32, "nheads_kv": 8, "config": {"stages": 1, "qk_step": 32}, "time_ms": 1.5,
     "default_time_ms": 1.75, "unknown": "ignored"},
    {"direction": "backward", "kernel": "sm80.backward", "dtype": "bf16", "head_dim": 320,
     "seqlen_q": 1024, "seqlen_kv": 1024, "causal": true, "bias_grad": false,
     "grad_v_storage_dtype": null, "use_gemv": false, "preprocess_d_chunk": null,
     "config": {"score_step": 64}}
  ]
})";

}  // namespace

TEST_CASE("tuned configs: a file is read field by field, unknown fields ignored") {
  const ParseResult r = parseTunedFile(kValidFile);
  REQUIRE_MESSAGE(r.file.has_value(), r.error);
  const TunedFile& f = *r.file;
  CHECK(f.deviceName == "Described H100");
  CHECK(f.computeCapability == "9.0");
  CHECK(f.mode == "fast");
  CHECK(f.grid.headDims == std::vector<int64_t>{320, 512});
  CHECK(f.grid.heads == 32);
  REQUIRE(f.entries.size() == 2);
  const TunedEntry& forward = f.entries[0];
  CHECK(forward.headsKv == 8);
  CHECK(forward.config == LaunchConfig{{"qk_step", 32}, {"stages", 1}});
  CHECK(forward.timeMs == doctest::Approx(1.5));
  const TunedEntry& backward = f.entries[1];
  CHECK(backward.direction == "backward");
  CHECK(backward.headDimV == 320);  // d_v defaults to d_qk
  CHECK(backward.causal);
  CHECK_FALSE(backward.preprocessDChunk.has_value());
}

TEST_CASE("tuned configs: nearest head dim, ties to the larger (ffpa-attn's table)") {
  const TunedFile f = fileOf({entry(320, 4096), entry(512, 4096), entry(1024, 4096)});
  CHECK(found(f, query(384, 4096)).first == 320);
  CHECK(found(f, query(448, 4096)).first == 512);
  CHECK(found(f, query(900, 4096)).first == 1024);
  CHECK(found(f, query(64, 4096)).first == 320);
  CHECK(found(f, query(4096, 4096)).first == 1024);
  const TunedFile tie = fileOf({entry(256, 4096), entry(384, 4096)});
  CHECK(found(tie, query(320, 4096)).first == 384);
}

TEST_CASE("tuned configs: the smallest persisted seqlen at least the problem's, else the largest") {
  const TunedFile f = fileOf({entry(512, 1024), entry(512, 2048), entry(512, 4096), entry(512, 8192)});
  CHECK(found(f, query(512, 3000)).second == 4096);
  CHECK(found(f, query(512, 32768)).second == 8192);
  CHECK(found(f, query(512, 100)).second == 1024);
  CHECK(found(f, query(512, 2048)).second == 2048);
  TunedFile big = f;
  big.entries.push_back(entry(512, 16384));
  CHECK(found(big, query(512, 32768)).second == 16384);
  // Queries first, then keys.
  TunedFile cross = fileOf({entry(512, 1024)});
  cross.entries.push_back(entry(512, 1024));
  cross.entries.back().seqlenKv = 8192;
  TunedQuery q = query(512, 1024);
  q.seqlenKv = 5000;
  CHECK(cross.lookup(q)->seqlenKv == 8192);
}

TEST_CASE("tuned configs: variant fields filter, head counts only prefer") {
  TunedEntry biased = entry(512, 4096), dropped = entry(512, 4096), causal = entry(512, 4096, "bf16", true);
  biased.hasAttnBias = true;
  biased.config["stages"] = 7;
  dropped.hasDropout = true;
  TunedFile f = fileOf({biased, dropped, causal});
  CHECK(f.lookup(query(512, 4096)) == nullptr);  // no plain entry
  f.entries.push_back(entry(512, 4096));
  CHECK(f.lookup(query(512, 4096)) == &f.entries.back());
  TunedQuery q = query(512, 4096);
  q.hasAttnBias = true;
  CHECK(f.lookup(q)->config.at("stages") == 7);
  q = query(512, 4096);
  q.causal = true;
  CHECK(f.lookup(q)->causal);
  CHECK(f.lookup(query(512, 4096, "fp16")) == nullptr);  // dtype filters
  q = query(512, 4096);
  q.kernel = "sm80.backward";
  CHECK(f.lookup(q) == nullptr);  // kernel filters
  q = query(512, 4096);
  q.mode = "max";
  CHECK(f.lookup(q) == nullptr);  // the mode must match
  f.entries.back().mode = "max";  // an entry's own mode overrides the file's
  CHECK(f.lookup(q) == &f.entries.back());

  // Heads: the problem's layout wins, else the first entry.
  TunedEntry gqa = entry(320, 2048), mha = entry(320, 2048);
  gqa.headsQ = 32, gqa.headsKv = 8, gqa.config["stages"] = 1;
  mha.headsQ = 32, mha.headsKv = 32, mha.config["stages"] = 2;
  const TunedFile heads = fileOf({gqa, mha});
  TunedQuery layout = query(320, 2048);
  CHECK(heads.lookup(layout)->config.at("stages") == 2);
  layout.headsKv = 8;
  CHECK(heads.lookup(layout)->config.at("stages") == 1);
  layout.headsQ = 7, layout.headsKv = 7;
  CHECK(heads.lookup(layout)->config.at("stages") == 1);

  // Backward-only fields.
  TunedEntry b = entry(512, 4096);
  b.direction = "backward";
  b.kernel = "sm80.backward";
  b.gradVStorageDtype = "fp32";
  const TunedFile backward = fileOf({b});
  TunedQuery bq = query(512, 4096);
  bq.direction = "backward";
  bq.kernel = "sm80.backward";
  CHECK(backward.lookup(bq) == nullptr);
  bq.gradVStorageDtype = "fp32";
  CHECK(backward.lookup(bq) != nullptr);
}

TEST_CASE("tuned configs: older files count as no-mask, no-dropout; decode entries serve decode only") {
  const ParseResult r = parseTunedFile(R"({"schema_version": 1, "device": {"name": "Described H100"},
    "autotune_mode": "fast", "entries": [
      {"direction": "forward", "kernel": "sm80.forward", "dtype": "fp16", "head_dim": 1024, "seqlen": 2048,
       "config": {"stages": 2}},
      {"direction": "forward", "kernel": "sm80.forward", "dtype": "fp16", "head_dim": 1024, "seqlen_q": 1,
       "seqlen_kv": 8192, "config": {"stages": 1}}]})");
  REQUIRE_MESSAGE(r.file.has_value(), r.error);
  CHECK(r.file->entries[0].seqlenQ == 2048);
  CHECK(r.file->entries[0].seqlenKv == 2048);
  CHECK(r.file->lookup(query(1024, 4096, "fp16"))->config.at("stages") == 2);
  TunedQuery withBias = query(1024, 4096, "fp16");
  withBias.hasAttnBias = true;
  CHECK(r.file->lookup(withBias) == nullptr);
  TunedQuery decode = query(1024, 1, "fp16");
  decode.seqlenKv = 4000;
  CHECK(r.file->lookup(decode)->config.at("stages") == 1);
}

TEST_CASE("tuned configs: malformed files are refused with the path of what is wrong") {
  CHECK(errorOf("") == "not valid JSON");
  CHECK(errorOf("{\"schema_version\": 1,") == "not valid JSON");
  CHECK(errorOf("[1, 2]").find("expected an object") != std::string::npos);
  CHECK(errorOf(R"({"device": {"name": "x"}, "autotune_mode": "fast", "entries": []})")
            .find("\"schema_version\" is missing") != std::string::npos);
  CHECK(errorOf(R"({"schema_version": 2, "device": {"name": "x"}, "autotune_mode": "fast", "entries": []})")
            .find("newer") != std::string::npos);
  CHECK(errorOf(R"({"schema_version": 1, "device": {"name": "x"}, "autotune_mode": "slow", "entries": []})")
            .find("autotune_mode: expected one of \"fast\", \"max\"") != std::string::npos);
  const std::string badEntry = R"({"schema_version": 1, "device": {"name": "x"}, "autotune_mode": "fast",
    "entries": [{"direction": "forward", "kernel": "k", "dtype": "bf16", "head_dim": "512",
                 "seqlen_q": 1, "seqlen_kv": 1, "config": {"stages": 1}}]})";
  CHECK(errorOf(badEntry) == "entries[0].head_dim: expected an integer, got \"512\"");
  std::string hugeValue = badEntry;
  hugeValue.replace(hugeValue.find("\"512\""), 5, "512");
  hugeValue.replace(hugeValue.find("\"stages\": 1"), 11, "\"stages\": 99999999999");
  CHECK(errorOf(hugeValue).find("entries[0].config.stages: expected an integer from") != std::string::npos);
  std::string noConfig = hugeValue;
  noConfig.replace(noConfig.find("\"config\""), 8, "\"other\"");
  CHECK(errorOf(noConfig).find("\"config\" is missing") != std::string::npos);
  CHECK(errorOf(std::string(kMaxFileBytes + 1, ' ')).find("at most") != std::string::npos);
}

TEST_CASE("tuned configs: a written file reads back, entries in order") {
  TunedFile f = fileOf({entry(320, 1024), entry(512, 8192, "fp16", true)});
  f.entries[1].direction = "backward";
  f.entries[1].kernel = "sm80.backward";
  f.entries[1].headsQ = 48;
  f.entries[1].timeMs = 2.5;
  f.grid.headDims = {320, 512};
  const ParseResult r = parseTunedFile(serializeTunedFile(f));
  REQUIRE_MESSAGE(r.file.has_value(), r.error);
  REQUIRE(r.file->entries.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(r.file->entries[i].taskKey() == f.entries[i].taskKey());
    CHECK(r.file->entries[i].config == f.entries[i].config);
  }
  CHECK(r.file->entries[1].timeMs == doctest::Approx(2.5));
  CHECK(r.file->grid.headDims == f.grid.headDims);
}

TEST_CASE("tuned configs: optional device fields left out stay out when written") {
  TunedFile f = fileOf({entry(320, 1024)});
  f.computeCapability.clear();  // a file that names no compute capability
  const std::string written = serializeTunedFile(f);
  CHECK(written.find("compute_capability") == std::string::npos);
  const ParseResult r = parseTunedFile(written);
  REQUIRE_MESSAGE(r.file.has_value(), r.error);
  CHECK(r.file->computeCapability.empty());
  CHECK(r.file->deviceName == f.deviceName);
}

TEST_CASE("tuned configs: merging combines one device's files and refuses others") {
  TunedFile a = fileOf({entry(320, 1024), entry(512, 1024)});
  a.grid.headDims = {320, 512};
  TunedFile b = fileOf({entry(512, 1024), entry(1024, 1024)});
  b.entries[0].config["stages"] = 1;  // a newer result for a's second task
  b.grid.headDims = {1024, 512};
  const MergeResult merged = mergeTunedFiles({a, b});
  REQUIRE_MESSAGE(merged.file.has_value(), merged.error);
  REQUIRE(merged.file->entries.size() == 3);
  CHECK(merged.file->entries[1].config.at("stages") == 1);
  CHECK(merged.file->grid.headDims == std::vector<int64_t>{320, 512, 1024});
  TunedFile other = b;
  other.deviceName = "NVIDIA A100";
  CHECK(mergeTunedFiles({a, other}).error.find("file 2: device \"NVIDIA A100\"") != std::string::npos);
  other = b;
  other.mode = "max";
  CHECK(mergeTunedFiles({a, other}).error.find("autotune mode max") != std::string::npos);
  other = b;
  other.computeCapability = "8.0";
  CHECK(mergeTunedFiles({a, other}).error.find("compute capability 8.0") != std::string::npos);
  CHECK_FALSE(mergeTunedFiles({}).file.has_value());
}

TEST_CASE("tuned configs: file names from device names") {
  CHECK(deviceFileName("NVIDIA H100 80GB HBM3") == "NVIDIA_H100_80GB_HBM3.json");
  CHECK(deviceFileName("NVIDIA L20") == "NVIDIA_L20.json");
  CHECK(deviceFileName("a/b\\c:d*e") == "a_b_c_d_e.json");
  CHECK(deviceFileName("") == "unknown_device.json");
}

namespace {

// Messages the library logs while a test runs.
struct LogCapture {
  LogCapture() { ffpa::setLogCallback(&LogCapture::record, this); }
  ~LogCapture() { ffpa::setLogCallback(nullptr, nullptr); }
  static void record(ffpaLogLevel_t level, const char* message, void* self) {
    auto* capture = static_cast<LogCapture*>(self);
    std::lock_guard<std::mutex> lock(capture->mutex);
    capture->lines.push_back(std::to_string(level) + " " + message);
  }
  int count(const std::string& part) {
    std::lock_guard<std::mutex> lock(mutex);
    int n = 0;
    for (const std::string& line : lines) n += line.find(part) != std::string::npos;
    return n;
  }
  std::mutex mutex;
  std::vector<std::string> lines;
};

std::filesystem::path freshDirectory(const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / (std::string("ffpa-tuned-") + name + "-" +
                                                             std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

ffpa::DeviceInfo h100() {
  ffpa::DeviceInfo d;
  d.name = "Described H100";
  d.smVersion = 90;
  return d;
}

}  // namespace

TEST_CASE("tuned configs: the store reads the device's file once and warns once about a bad one") {
  const auto dir = freshDirectory("store");
  ffpa::forgetTunedConfigFiles();
  LogCapture log;
  ffpa::Policy policy;
  policy.setTunedConfigDir(dir.string());
  policy.setValue(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_DEBUG);

  // Missing: defaults, one warning however often it is asked.
  CHECK_FALSE(ffpa::findTunedConfig(policy, h100(), query(512, 4096)).has_value());
  CHECK_FALSE(ffpa::findTunedConfig(policy, h100(), query(512, 4096)).has_value());
  CHECK(log.count("Described_H100.json cannot be read") == 1);

  // Present: found, and the hit logged once at debug level.
  ffpa::forgetTunedConfigFiles();
  std::ofstream(dir / "Described_H100.json") << kValidFile;
  TunedQuery q = query(512, 4096);
  const auto choice = ffpa::findTunedConfig(policy, h100(), q);
  REQUIRE(choice.has_value());
  CHECK(choice->config.at("qk_step") == 32);
  CHECK(choice->source.find("Described_H100.json: forward bf16 d=512") == 0);
  ffpa::findTunedConfig(policy, h100(), q);
  CHECK(log.count("tuned config hit") == 1);

  // Skipped by the policy.
  ffpa::Policy skipping = policy;
  skipping.setValue(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, 1);
  CHECK_FALSE(ffpa::findTunedConfig(skipping, h100(), q).has_value());

  // Another device's file, and a malformed one: defaults, one warning each.
  ffpa::forgetTunedConfigFiles();
  ffpa::DeviceInfo renamed = h100();
  renamed.smVersion = 80;
  CHECK_FALSE(ffpa::findTunedConfig(policy, renamed, q).has_value());
  CHECK(log.count("compute capability 9.0, the device has 8.0") == 1);
  ffpa::forgetTunedConfigFiles();
  std::ofstream(dir / "Described_H100.json") << "{\"schema_version\": 1, \"entries\": [}";
  CHECK_FALSE(ffpa::findTunedConfig(policy, h100(), q).has_value());
  CHECK_FALSE(ffpa::findTunedConfig(policy, h100(), q).has_value());
  CHECK(log.count("not valid JSON") == 1);
  ffpa::forgetTunedConfigFiles();
  std::filesystem::remove_all(dir);
}
