// Tuned configs in plans of the sm80 kernels, through the public API on a described A100: a file in
// FFPA_POLICY_TUNED_CONFIG_DIR sets the launch parameters its entry names, forward and backward;
// knobs the caller set win; FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG and a missing or malformed
// file leave the built-in defaults; values a kernel cannot take are ignored. Also the Hopper
// kernels' parameters, and decode entries (split-KV's choices) on a described H100.
#include "plan_text.h"
#include "test_support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace ffpa_test;

namespace {

class ConfigDirectory {
 public:
  explicit ConfigDirectory(const char* name)
      : path_(std::filesystem::temp_directory_path() /
              (std::string("ffpa-tuned-plans-") + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ConfigDirectory() { std::filesystem::remove_all(path_); }
  void write(const std::string& text, const char* file = "Described_A100.json") const {
    std::ofstream(path_ / file) << text;
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

void setDirectory(Handle& h, const std::string& dir) {
  REQUIRE_OK(ffpaSetPolicy(h, FFPA_POLICY_TUNED_CONFIG_DIR, dir.c_str(), dir.size() + 1));
}

std::string fileWith(const std::string& entries, const char* device = R"("Described A100", "compute_capability": "8.0")") {
  return std::string(R"({"schema_version": 1, "device": {"name": )") + device +
         R"(}, "autotune_mode": "fast", "entries": [)" + entries + "]}";
}

const char* const kForwardEntry = R"({"direction": "forward", "kernel": "sm80.forward", "dtype": "fp16",
  "head_dim": 512, "seqlen_q": 4096, "seqlen_kv": 4096, "causal": false,
  "config": {"stages": 1, "qk_step": 32, "v_step": 64, "prefetch": 0}})";
const char* const kBackwardEntry = R"({"direction": "backward", "kernel": "sm80.backward", "dtype": "fp16",
  "head_dim": 512, "seqlen_q": 4096, "seqlen_kv": 4096, "causal": false,
  "config": {"stages": 1, "score_step": 32, "output_step": 16, "persist_q": 0}})";

const Problem& problem() {
  static const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 3000, 3000, 512, 512);
  return p;
}

}  // namespace

TEST_CASE("tuned configs: a device file sets the launch parameters of the entry the lookup picks") {
  REQUIRE_COMPILED(512);
  ConfigDirectory dir("picks");
  dir.write(fileWith(std::string(kForwardEntry) + "," + kBackwardEntry));
  Handle h(describedA100());
  setDirectory(h, dir.path());
  // Nq = Nkv = 3000 takes the 4096 entry.
  const Described forward = describeForward(h, problem());
  REQUIRE(forward.status == FFPA_STATUS_SUCCESS);
  for (const char* part : {"stages=1", "qk_step=32", "v_step=64", "prefetch=0",
                           "tuned(Described_A100.json: forward fp16 d=512 Nq=4096 Nkv=4096)"}) {
    CHECK_HAS(forward.config, part);
  }
  const Described backward = describeBackward(h, problem());
  for (const char* part : {"stages=1", "score_step=32/32", "output_step=16/16", "persist_q=0", "tuned("}) {
    CHECK_HAS(backward.config, part);
  }
  // Another dtype has no entry: defaults.
  const Problem bf16(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 3000, 3000, 512, 512);
  CHECK_LACKS(describeForward(h, bf16).config, "tuned(");
}

TEST_CASE("tuned configs: knobs the caller set win; the skip knob and bad files leave the defaults") {
  REQUIRE_COMPILED(512);
  ConfigDirectory dir("precedence");
  dir.write(fileWith(kForwardEntry));
  Handle set(describedA100());
  setDirectory(set, dir.path());
  set.set<int32_t>(FFPA_POLICY_STAGES, 2);
  set.set<int32_t>(FFPA_POLICY_PREFETCH_QKV, 1);
  const std::string config = describeForward(set, problem()).config;
  CHECK_HAS(config, "stages=2");
  CHECK_HAS(config, "prefetch=1");
  CHECK_HAS(config, "qk_step=32");  // no knob: the tuned value

  Handle skipping(describedA100());
  setDirectory(skipping, dir.path());
  skipping.set<int32_t>(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, 1);
  const std::string defaults = describeForward(skipping, problem()).config;
  CHECK_LACKS(defaults, "tuned(");
  CHECK_HAS(defaults, "stages=2");

  // A malformed file, a file of entries this build cannot use: defaults (and a warning).
  ConfigDirectory broken("broken");
  broken.write("{not json");
  Handle b(describedA100());
  setDirectory(b, broken.path());
  CHECK(describeForward(b, problem()).status == FFPA_STATUS_SUCCESS);
  CHECK_LACKS(describeForward(b, problem()).config, "tuned(");

  ConfigDirectory odd("odd-values");
  odd.write(fileWith(R"({"direction": "forward", "kernel": "sm80.forward", "dtype": "fp16", "head_dim": 512,
    "seqlen_q": 4096, "seqlen_kv": 4096, "config": {"stages": 9, "qk_step": 24, "v_step": 32, "tiles": 3}})"));
  Handle o(describedA100());
  setDirectory(o, odd.path());
  const std::string partly = describeForward(o, problem()).config;
  CHECK_HAS(partly, "tuned(");
  CHECK_HAS(partly, "stages=2");   // 9 stages are not compiled
  CHECK_HAS(partly, "qk_step=128");  // 24 is no multiple of 16: the default
  CHECK_HAS(partly, "v_step=32");
}

TEST_CASE("tuned configs: the Hopper forward takes kv_multicast from its entry unless the caller set the knob") {
  if (!buildListHas("architectures", "90a")) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  ConfigDirectory dir("hopper");
  dir.write(fileWith(R"({"direction": "forward", "kernel": "sm90.forward", "dtype": "bf16", "head_dim": 512,
    "seqlen_q": 4096, "seqlen_kv": 4096, "config": {"kv_multicast": 1}})",
                     R"("Described H100", "compute_capability": "9.0")"),
            "Described_H100.json");
  const Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 3000, 3000, 512, 512);
  Handle tuned;  // a described H100
  setDirectory(tuned, dir.path());
  const Described d = describeForward(tuned, p);
  REQUIRE(d.status == FFPA_STATUS_SUCCESS);
  CHECK(d.kernel == "sm90.forward.bf16.d512.kv2");
  CHECK_HAS(d.config, "tuned(Described_H100.json: forward bf16 d=512 Nq=4096 Nkv=4096)");
  // Set by the caller, the knob wins; a shape sharing cannot serve (one row tile) never names it.
  Handle set;
  setDirectory(set, dir.path());
  set.set<int32_t>(FFPA_POLICY_HOPPER_KV_MULTICAST, 0);
  CHECK(describeForward(set, p).kernel == "sm90.forward.bf16.d512");
  // One row tile: nothing to share, the entry's other parameter (the split) applies alone.
  const Problem oneTile(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 64, 3000, 512, 512);
  const Described single = describeForward(tuned, oneTile);
  CHECK(single.kernel == "sm90.forward.bf16.d512");
  CHECK_HAS(single.config, "split=even");
  CHECK_HAS(single.config, "tuned(");
  // d_v 640: its two splits agree and clusters share no K and V, but the consumers' overlap is a
  // choice: the entry is consulted, and its kv_multicast does not apply there (the overlap keeps
  // its default).
  const Described wide = describeForward(tuned, Problem(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 3000, 3000, 640, 640));
  CHECK(wide.kernel == "sm90.forward.bf16.d640");
  CHECK_HAS(wide.config, "overlap=1");
  CHECK_HAS(wide.config, "tuned(");
}

TEST_CASE("tuned configs: tile_keys picks 32- or 64-key tiles of the mma.sync forward where both are compiled") {
  REQUIRE_COMPILED(128, 256);
  ConfigDirectory dir("tile-keys");
  dir.write(fileWith(R"({"direction": "forward", "kernel": "sm80.forward", "dtype": "fp16", "head_dim": 128,
    "seqlen": 4096, "config": {"tile_keys": 64}},
    {"direction": "forward", "kernel": "sm80.forward", "dtype": "fp16", "head_dim": 256,
    "seqlen": 4096, "config": {"tile_keys": 32}})"));
  Handle a100(describedA100());  // 32-key tiles by default there
  setDirectory(a100, dir.path());
  const Problem d128(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 3000, 3000, 128, 128);
  const Described wide = describeForward(a100, d128);
  CHECK(wide.kernel == "sm80.forward.f16.d128.acc_f32.v_s2r.bc64");
  CHECK_HAS(wide.config, "Bc=64");
  CHECK_HAS(wide.config, "tuned(");
  // d_v 256 has 64-key tiles only: the entry's 32 is ignored (the plan keeps its shape).
  const Described d256 = describeForward(a100, Problem(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 3000, 3000, 256, 256));
  CHECK(d256.kernel == "sm80.forward.f16.d256.acc_f32.v_s2r");
  CHECK_HAS(d256.config, "Bc=64");
}

namespace {

// An entry of the Hopper forward, bf16, at `headDim` and sequence length 4096 with `config`.
std::string hopperEntry(const char* direction, int64_t headDim, const std::string& config) {
  return std::string(R"({"direction": ")") + direction + R"(", "kernel": "sm90.)" + direction +
         R"(", "dtype": "bf16", "head_dim": )" + std::to_string(headDim) + R"(, "seqlen": 4096, "config": )" +
         config + "}";
}

std::string hopperForwardEntry(int64_t headDim, const std::string& config) {
  return hopperEntry("forward", headDim, config);
}

// Writes `entries` (joined by commas) as the described H100's tuned-config file into `dir`, and
// points `handle` (on a described H100) at it.
void useHopperEntries(const std::vector<std::string>& entries, ConfigDirectory& dir, Handle& handle) {
  std::string joined;
  for (const std::string& entry : entries) joined += (joined.empty() ? "" : ",") + entry;
  dir.write(fileWith(joined, R"("Described H100", "compute_capability": "9.0")"), "Described_H100.json");
  setDirectory(handle, dir.path());
}

}  // namespace

TEST_CASE("tuned configs: the Hopper forward takes the consumers' split of the columns from its entry") {
  if (!buildListHas("architectures", "90a")) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  // One entry per head dim (the lookup takes the nearest), each with the split that is not the
  // default: one CTA (d_v <= 512) skewed, clusters even; each by its own instance. Where the two
  // splits agree (320, 640) "split" changes nothing and is not named.
  struct Case {
    int64_t dv;
    int split;
    const char* kernel;
    const char* columns;
  };
  const Case cases[] = {
      {512, 1, "sm90.forward.bf16.d512.skewed", "cluster=1 columns=192+320 split=skewed"},
      {448, 1, "sm90.forward.bf16.d448.skewed", "columns=128+320 split=skewed"},
      {384, 1, "sm90.forward.bf16.d384.skewed", "columns=128+256 split=skewed"},
      {320, 1, "sm90.forward.bf16.d320", "columns=128+192 overlap=1 smem="},
      {1024, 0, "sm90.forward.bf16.d1024.even", "cluster=2 columns=256+256 split=even"},
      {896, 0, "sm90.forward.bf16.d896.even", "columns=192+256 split=even"},
      {768, 0, "sm90.forward.bf16.d768.even", "columns=192+192 split=even"},
      {640, 0, "sm90.forward.bf16.d640", "columns=128+192 overlap=1 exchange"},
  };
  std::vector<std::string> entries;
  for (const Case& c : cases) {
    entries.push_back(hopperForwardEntry(c.dv, R"({"split": )" + std::to_string(c.split) + "}"));
  }
  ConfigDirectory dir("split");
  Handle tuned;  // a described H100
  useHopperEntries(entries, dir, tuned);
  Handle builtIn;
  for (const Case& c : cases) {
    const std::string kernel = c.kernel;
    CAPTURE(kernel);
    // 3000 queries: several row tiles; d_v 1008 and 432 take the 1024 and 448 instances.
    const int64_t dv = c.dv == 1024 ? 1008 : c.dv == 448 ? 432 : c.dv;
    const Described d = describeForward(tuned, Problem(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 3000, 3000, dv, dv));
    REQUIRE(d.status == FFPA_STATUS_SUCCESS);
    CHECK(d.kernel == c.kernel);
    CHECK_HAS(d.config, c.columns);
    // Without the file, the default split (and the unsuffixed instance).
    const Described plain = describeForward(builtIn, Problem(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 3000, 3000, dv, dv));
    CHECK(plain.kernel == kernel.substr(0, kernel.find('.', std::string("sm90.forward.bf16.d").size())));
  }
}

TEST_CASE("tuned configs: the Hopper forward takes the arrangement of d_v up to 256 from its entry") {
  if (!buildListHas("architectures", "90a")) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  // "row_split": 0 asks for the split of the columns where both arrangements serve (d_v
  // 65..256); d_v up to 64 has the row split only, whatever the entry says; "pingpong": 0 has
  // the row split's consumers issue their products without taking turns; "tile_keys": 64 its KV
  // tiles of 64 keys where 128 is the default (d_v up to 128), and 128 is no choice above.
  struct Case {
    int64_t dv;
    const char* config;
    const char* kernel;
    const char* shape;
    const char* builtIn;  // without the file
  };
  const Case cases[] = {
      {64, R"({"row_split": 0, "pingpong": 0, "tile_keys": 64})", "sm90.forward.bf16.d64.row_split",
       "Bc=64 warpgroups=1+2 threads=384 d_v<=64 cluster=1 rows=64+64 columns=64 pingpong=0 ",
       "sm90.forward.bf16.d64.row_split.bc128"},
      {128, R"({"row_split": 0})", "sm90.forward.bf16.d128", "cluster=1 columns=64+64 overlap=1 smem=",
       "sm90.forward.bf16.d128.row_split.bc128"},
      {192, R"({"row_split": 0, "overlap": 0})", "sm90.forward.bf16.d192", "cluster=1 columns=64+128 overlap=0 smem=",
       "sm90.forward.bf16.d192.row_split"},
      {256, R"({"row_split": 1, "tile_keys": 128})", "sm90.forward.bf16.d256.row_split",
       "Bc=64 warpgroups=1+2 threads=384 d_v<=256 cluster=1 rows=64+64 columns=256 pingpong=1 k_buffers=2",
       "sm90.forward.bf16.d256.row_split"},
  };
  std::vector<std::string> entries;
  for (const Case& c : cases) entries.push_back(hopperForwardEntry(c.dv, c.config));
  ConfigDirectory dir("row-split");
  Handle tuned;  // a described H100
  useHopperEntries(entries, dir, tuned);
  Handle builtIn;
  for (const Case& c : cases) {
    INFO(c.kernel);
    const Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 3000, 3000, c.dv, c.dv);
    const Described d = describeForward(tuned, p);
    REQUIRE(d.status == FFPA_STATUS_SUCCESS);
    CHECK(d.kernel == c.kernel);
    CHECK_HAS(d.config, c.shape);
    CHECK_HAS(d.config, "tuned(");
    // Without the file, the row split (KV tiles of 128 keys up to d_v 128).
    CHECK(describeForward(builtIn, p).kernel == c.builtIn);
  }
}

TEST_CASE("tuned configs: the Hopper backward takes each gradient kernel's mma.sync version from its entry") {
  if (!buildListHas("architectures", "90a")) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  REQUIRE_COMPILED(128, 256, 512);
  // "sm90_dq": 0 / "sm90_dkdv": 0 run that gradient kernel's mma.sync version; both 0 leave the
  // problem to the sm80 backward; without the file, both sm90 kernels.
  struct Case {
    int64_t d;
    const char* config;
    const char* kernel;
    const char* part;
  };
  const Case cases[] = {
      {128, R"({"sm90_dq": 0})", "sm90.backward.bf16.dkdv128", "dQ: mma.sync (launch parameter sm90_dq=0)"},
      {256, R"({"sm90_dkdv": 0, "sm90_dq": 1})", "sm90.backward.bf16.dq256",
       "dK/dV: mma.sync (launch parameter sm90_dkdv=0)"},
      {512, R"({"sm90_dq": 0, "sm90_dkdv": 0})", "sm80.backward.bf16.d512",
       "skipped: sm90.backward: launch parameter sm90_dq=0; launch parameter sm90_dkdv=0"},
  };
  std::vector<std::string> entries;
  for (const Case& c : cases) entries.push_back(hopperEntry("backward", c.d, c.config));
  ConfigDirectory dir("hopper-backward");
  Handle tuned;  // a described H100
  useHopperEntries(entries, dir, tuned);
  Handle builtIn;
  for (const Case& c : cases) {
    INFO(c.kernel);
    const Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 3000, 3000, c.d, c.d);
    const Described d = describeBackward(tuned, p);
    REQUIRE(d.status == FFPA_STATUS_SUCCESS);
    CHECK(d.kernel == c.kernel);
    CHECK_HAS(d.text, c.part);
    const std::string sm90 = "sm90.backward.bf16.dq" + std::to_string(c.d);
    CHECK(describeBackward(builtIn, p).kernel.rfind(sm90, 0) == 0);
  }
}

TEST_CASE("tuned configs: decode entries set split-KV's choices, looked up by the call's own shape") {
  REQUIRE_COMPILED(128);
  // MQA decode: the planner runs the 32 query heads as rows of the KV head (query_heads_as_rows),
  // a grid of one row tile that split-KV cuts into runs of KV tiles.
  const Problem decode(FFPA_DATA_TYPE_BFLOAT16, 1, 32, 1, 1, 8192, 128, 128);
  Handle plain;
  plain.set<int32_t>(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, 1);
  const Described untuned = describeForward(plain, decode);
  REQUIRE(untuned.status == FFPA_STATUS_SUCCESS);
  CHECK_HAS(untuned.config, "query_heads_as_rows=32");
  CHECK_HAS(untuned.config, "key_splits=");
  // Entries for either forward kernel, whichever this build plans.
  const auto entries = [](const char* config, int seqlenQ) {
    std::string all;
    for (const char* kernel : {"sm80.forward", "sm90.forward"}) {
      all += std::string(all.empty() ? "" : ",") + R"({"direction": "forward", "kernel": ")" + kernel +
             R"(", "dtype": "bf16", "head_dim": 128, "seqlen_q": )" + std::to_string(seqlenQ) +
             R"(, "seqlen_kv": 8192, "nheads_q": 32, "nheads_kv": 1, "config": )" + config + "}";
    }
    return fileWith(all, R"("Described H100", "compute_capability": "9.0")");
  };
  const auto tunedWith = [&](const char* name, const std::string& file) {
    ConfigDirectory dir(name);
    dir.write(file, "Described_H100.json");
    Handle h;
    setDirectory(h, dir.path());
    return describeForward(h, decode);
  };
  // A decode entry (seqlen_q 1) that turns the split off: the lookup is by the call's one query
  // row, not by the 32 rows of the problem the kernel runs.
  const Described off = tunedWith("decode-off", entries(R"({"split_kv": 0})", 1));
  REQUIRE(off.status == FFPA_STATUS_SUCCESS);
  CHECK_HAS(off.config, "tuned(Described_H100.json: forward bf16 d=128 Nq=1 Nkv=8192)");
  CHECK_HAS(off.config, "query_heads_as_rows=32");
  CHECK_LACKS(off.config, "key_splits=");
  // Runs of at least 16 of the KV tiles.
  const Described longer = tunedWith("decode-longer", entries(R"({"split_min_tiles": 16})", 1));
  CHECK_HAS(longer.config, "tuned(");
  const size_t at = longer.config.find("split_tiles=");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoi(longer.config.substr(at + 12)) >= 16);
  CHECK_HAS(longer.config, "key_splits=");
  // Prefill entries do not serve decode, though the merged problem has 32 query rows.
  const Described prefill = tunedWith("decode-prefill", entries(R"({"split_kv": 0})", 512));
  CHECK_LACKS(prefill.config, "tuned(");
  CHECK_HAS(prefill.config, "key_splits=");
  // A count the caller asked for wins over the entry.
  ConfigDirectory dir("decode-knob");
  dir.write(entries(R"({"split_kv": 0})", 1), "Described_H100.json");
  Handle asked;
  setDirectory(asked, dir.path());
  asked.set<int32_t>(FFPA_POLICY_KEY_SPLITS, 3);
  const Described three = describeForward(asked, decode);
  CHECK_HAS(three.config, "tuned(");
  CHECK_HAS(three.config, "key_splits=3 ");
}
