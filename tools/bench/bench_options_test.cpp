// ffpa-bench's command line: defaults that reproduce the FFPA benchmark tables, ranges, knobs
// resolved against the library's table, and a clear message naming the option for every bad value.
#include "bench_options.h"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

using namespace ffpa_bench;

namespace {

std::string errorOf(const std::vector<std::string>& args) {
  try {
    parseOptions(args);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("defaults are the FFPA tables: B=1, H=48, N=8192, D=320..1024 step 64, fp16, every mode") {
  const Options o = parseOptions({});
  CHECK(o.batch == 1);
  CHECK(o.heads == 48);
  CHECK(o.headsKv == 48);
  CHECK(o.seqQ == 8192);
  CHECK(o.seqKv == 8192);
  REQUIRE(o.headDims.size() == 12);
  CHECK(o.headDims.front() == 320);
  CHECK(o.headDims.back() == 1024);
  CHECK(o.dtypes == std::vector<ffpaDataType_t>{FFPA_DATA_TYPE_FLOAT16});
  CHECK(o.accumulators.empty());
  CHECK(o.format == Format::text);
  CHECK(sweepVariants(o).size() == 4);
}

TEST_CASE("head dims as lists and ranges") {
  CHECK(parseHeadDims("64,128") == std::vector<int64_t>{64, 128});
  CHECK(parseHeadDims("64,320:448:64") == std::vector<int64_t>{64, 320, 384, 448});
  CHECK(parseHeadDims("512:512:1") == std::vector<int64_t>{512});
}

TEST_CASE("every option is parsed into its field") {
  const Options o = parseOptions({"--B", "2", "--H", "32", "--Hkv", "8", "--N", "4096", "--Nkv", "1024", "--D", "576",
                                  "--Dv", "512", "--dtype", "f16,bf16", "--acc", "f32,f16", "--causal", "bottom-right",
                                  "--layout", "bnhd", "--warmup", "1", "--iters", "5", "--rotate", "3", "--policy",
                                  "FFPA_POLICY_STAGES=2", "--reference", "--check", "--bwd", "--markdown", "--output",
                                  "out.md"});
  CHECK(o.batch == 2);
  CHECK(o.headsKv == 8);
  CHECK(o.seqKv == 1024);
  CHECK(o.headDimV == 512);
  CHECK(o.dtypes.size() == 2);
  CHECK(o.accumulators == std::vector<ffpaAccumulator_t>{FFPA_ACCUMULATOR_F32, FFPA_ACCUMULATOR_F16});
  CHECK(o.causal == FFPA_CAUSAL_BOTTOM_RIGHT);
  CHECK(o.bnhd);
  CHECK(o.iters == 5);
  CHECK(o.rotate == 3);
  REQUIRE(o.policies.size() == 1);
  CHECK(o.policies[0].knob == FFPA_POLICY_STAGES);
  CHECK(o.policies[0].number == 2);
  CHECK((o.reference && o.check && o.backward));
  CHECK(o.format == Format::markdown);
  CHECK(o.output == "out.md");
  CHECK(parseOptions({"--csv"}).format == Format::csv);
}

TEST_CASE("bad values name the option and what it accepts") {
  CHECK(errorOf({"--D", "2000"}).find("--D: \"2000\" is not valid; allowed: an integer from 1 to 1024") == 0);
  CHECK(errorOf({"--D", "512:320:64"}).find("first <= last") != std::string::npos);
  CHECK(errorOf({"--dtype", "fp8"}).find("--dtype: \"fp8\"") == 0);
  CHECK(errorOf({"--acc", "f64"}).find("f32, qk_f16, pv_f16, f16") != std::string::npos);
  CHECK(errorOf({"--causal", "left"}).find("none, top-left, bottom-right") != std::string::npos);
  CHECK(errorOf({"--H", "48", "--Hkv", "5"}).find("a divisor of --H") != std::string::npos);
  CHECK(errorOf({"--iters", "0"}).find("--iters") == 0);
  CHECK(errorOf({"--policy", "STAGES"}).find("NAME=VALUE") != std::string::npos);
  CHECK(errorOf({"--policy", "FFPA_POLICY_ACCUMULATOR=f16"}).find("use --acc") != std::string::npos);
  CHECK(errorOf({"--acc", "qk_f16", "--dtype", "bf16"}).find("need --dtype f16") != std::string::npos);
  CHECK(errorOf({"--B"}).find("--B needs a value") == 0);
  CHECK(errorOf({"--frobnicate"}).find("unknown option \"--frobnicate\"") == 0);
}

TEST_CASE("--varlen: lengths with repeats make one packed batch of their sum") {
  CHECK(parseLengths("512,2048") == std::vector<int64_t>{512, 2048});
  CHECK(parseLengths("100x3,7") == std::vector<int64_t>{100, 100, 100, 7});
  const Options o = parseOptions({"--varlen", "4096,512x8", "--H", "8", "--causal", "bottom-right"});
  CHECK(o.varlen.size() == 9);
  CHECK(o.batch == 1);
  CHECK(o.seqQ == 8192);
  CHECK(o.seqKv == 8192);
  CHECK(o.causal == FFPA_CAUSAL_BOTTOM_RIGHT);
  CHECK(parseOptions({}).varlen.empty());
  CHECK(errorOf({"--varlen", "512,0"}).find("--varlen: \"0\" is not valid") == 0);
  CHECK(errorOf({"--varlen", "512x"}).find("--varlen") == 0);
  CHECK(errorOf({"--varlen", "1x2x3"}).find("with repeats (512x16)") != std::string::npos);
  CHECK(errorOf({"--varlen", "2147483647,1"}).find("at most 2^31 - 1 tokens") != std::string::npos);
  CHECK(errorOf({"--varlen", "512", "--N", "1024"}).find("drop --B, --N and --Nkv") != std::string::npos);
  CHECK(errorOf({"--B", "2", "--varlen", "512"}).find("drop --B, --N and --Nkv") != std::string::npos);
}

TEST_CASE("--key-lengths: the keys of each batch entry, one count for all or B of them") {
  const Options o = parseOptions({"--B", "3", "--N", "1", "--Nkv", "4096", "--key-lengths", "4096,1,0"});
  CHECK(o.keyLengths == std::vector<int64_t>{4096, 1, 0});
  CHECK(visiblePairs(o, 0) == 4096.0);
  CHECK(visiblePairs(o, 2) == 0.0);
  const Options all = parseOptions({"--B", "2", "--key-lengths", "100"});
  CHECK(all.keyLengths == std::vector<int64_t>{100, 100});
  // Exact pairs under a mask with counts: 10 queries, 6 keys, bottom-right (the last 6 queries
  // see 1..6 keys: 21 pairs) and top-left (queries 0..5 see 1..6, the rest 6: 21 + 24).
  const Options causal =
      parseOptions({"--B", "1", "--N", "10", "--Nkv", "20", "--key-lengths", "6", "--causal", "bottom-right"});
  CHECK(visiblePairs(causal, 0) == 21.0);
  const Options topLeft =
      parseOptions({"--B", "1", "--N", "10", "--Nkv", "20", "--key-lengths", "6", "--causal", "top-left"});
  CHECK(visiblePairs(topLeft, 0) == 45.0);
  // Without counts, the tables' convention: half the square under a mask.
  CHECK(visiblePairs(parseOptions({"--N", "10", "--causal", "top-left"}), 0) == 50.0);
  CHECK(errorOf({"--B", "3", "--key-lengths", "1,2"}).find("one value, or one per batch entry") != std::string::npos);
  CHECK(errorOf({"--N", "100", "--key-lengths", "101"}).find("counts from 0 to Nkv") != std::string::npos);
  CHECK(errorOf({"--key-lengths", "-1"}).find("--key-lengths") == 0);
  CHECK(errorOf({"--varlen", "512", "--key-lengths", "5"}).find("not with --varlen") != std::string::npos);
}

TEST_CASE("--merge: P partial results of the shape, the attention-only options refused") {
  const Options o = parseOptions({"--merge", "8", "--H", "16", "--N", "4096", "--D", "512", "--dtype", "bf16"});
  CHECK(o.merge == 8);
  CHECK(o.heads == 16);
  CHECK(o.seqQ == 4096);
  CHECK(parseOptions({}).merge == 0);
  CHECK(parseOptions({"--merge", "32"}).merge == 32);
  CHECK(errorOf({"--merge", "0"}).find("--merge: \"0\" is not valid; allowed: an integer from 1 to 32") == 0);
  CHECK(errorOf({"--merge", "33"}).find("--merge") == 0);
  for (const char* option : {"--bwd", "--reference", "--check"}) {
    CAPTURE(option);
    CHECK(errorOf({"--merge", "2", option}) == std::string("--merge times ffpaAttentionMerge alone: drop ") + option);
  }
  CHECK(errorOf({"--merge", "2", "--causal", "top-left"}).find("drop --causal") != std::string::npos);
  CHECK(errorOf({"--merge", "2", "--varlen", "512"}).find("drop --varlen") != std::string::npos);
  CHECK(errorOf({"--merge", "2", "--Nkv", "512"}).find("drop --Nkv") != std::string::npos);
  CHECK(errorOf({"--merge", "2", "--policy", "FFPA_POLICY_STAGES=2"}).find("drop --policy") != std::string::npos);
  CHECK(errorOf({"--merge", "2", "--acc", "f32"}).find("drop --acc") != std::string::npos);
}

TEST_CASE("the fp16-accumulation modes run for fp16 only") {
  const Options o = parseOptions({"--dtype", "f16,bf16", "--acc", "f32,pv_f16"});
  const std::vector<Variant> variants = sweepVariants(o);
  REQUIRE(variants.size() == 3);
  CHECK((variants[0].dtype == FFPA_DATA_TYPE_FLOAT16 && variants[0].accumulator == FFPA_ACCUMULATOR_F32));
  CHECK((variants[1].dtype == FFPA_DATA_TYPE_FLOAT16 && variants[1].accumulator == FFPA_ACCUMULATOR_PV_F16));
  CHECK((variants[2].dtype == FFPA_DATA_TYPE_BFLOAT16 && variants[2].accumulator == FFPA_ACCUMULATOR_F32));
  CHECK(sweepVariants(parseOptions({"--dtype", "bf16"})).size() == 1);
}

TEST_CASE("--policy takes any knob by name or short name, numbers or value names, within bounds") {
  const PolicySetting stages = resolvePolicy("FFPA_POLICY_STAGES=2");
  CHECK(stages.knob == FFPA_POLICY_STAGES);
  CHECK(stages.name == "FFPA_POLICY_STAGES");
  CHECK(stages.number == 2);
  CHECK(resolvePolicy("prefetch_qkv=0").knob == FFPA_POLICY_PREFETCH_QKV);
  CHECK(resolvePolicy("FFPA_POLICY_LOG_LEVEL=debug").number == FFPA_LOG_LEVEL_DEBUG);
  CHECK(resolvePolicy("FFPA_POLICY_REFERENCE_CHUNK_BYTES=1048576").number == 1048576);
  CHECK(resolvePolicy("FFPA_POLICY_TUNED_CONFIG_DIR=/tmp/a=b").text == "/tmp/a=b");
  CHECK(errorOf({"--policy", "FFPA_POLICY_STAGES=9"}).find("FFPA_POLICY_STAGES takes") != std::string::npos);
  CHECK(errorOf({"--policy", "FFPA_POLICY_STAGES=two"}).find("FFPA_POLICY_STAGES takes") != std::string::npos);
  CHECK(errorOf({"--policy", "NO_SUCH_KNOB=1"}).find("ffpa-info --knobs") != std::string::npos);
}

TEST_CASE("a resolved setting reaches the handle in the knob's own type") {
  ffpaDeviceDesc_t device{};
  device.structSize = sizeof device;
  device.smVersion = 90;
  device.smCount = 132;
  device.sharedMemPerBlockOptin = 227 * 1024;
  device.sharedMemPerSm = 228 * 1024;
  device.globalMemBytes = int64_t{80} << 30;
  ffpaHandle_t handle = nullptr;
  REQUIRE(ffpaCreateForDevice(&handle, &device) == FFPA_STATUS_SUCCESS);
  for (const char* assignment : {"FFPA_POLICY_STAGES=1", "FFPA_POLICY_REFERENCE_CHUNK_BYTES=4194304",
                                 "FFPA_POLICY_TUNED_CONFIG_DIR=/nonexistent", "FFPA_POLICY_LOG_LEVEL=error"}) {
    CAPTURE(assignment);
    CHECK(applyPolicy(handle, resolvePolicy(assignment)) == FFPA_STATUS_SUCCESS);
  }
  int32_t stages = 0;
  int64_t chunk = 0;
  CHECK(ffpaGetPolicy(handle, FFPA_POLICY_STAGES, &stages, sizeof stages, nullptr) == FFPA_STATUS_SUCCESS);
  CHECK(ffpaGetPolicy(handle, FFPA_POLICY_REFERENCE_CHUNK_BYTES, &chunk, sizeof chunk, nullptr) == FFPA_STATUS_SUCCESS);
  CHECK(stages == 1);
  CHECK(chunk == 4194304);
  ffpaDestroy(handle);
}
