#include "tuning/tuned_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>

namespace ffpa::tuning {
namespace {

using Json = nlohmann::ordered_json;

// A field that breaks the schema: thrown by the readers below, caught by parseTunedFile.
struct SchemaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string shown(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

[[noreturn]] void wrong(const std::string& path, const std::string& expected, const Json& value) {
  throw SchemaError(path + ": expected " + expected + ", got " + shown(value));
}

const Json* member(const Json& object, const char* name) {
  const auto found = object.find(name);
  return found == object.end() ? nullptr : &*found;
}

const Json& required(const Json& object, const std::string& path, const char* name) {
  const Json* value = member(object, name);
  if (value == nullptr) throw SchemaError(path + ": the field \"" + name + "\" is missing");
  return *value;
}

std::string text(const Json& value, const std::string& path, std::initializer_list<const char*> allowed = {}) {
  if (!value.is_string()) wrong(path, "a string", value);
  std::string result = value.get<std::string>();
  if (allowed.size() == 0) {
    if (result.empty()) wrong(path, "a non-empty string", value);
    return result;
  }
  for (const char* option : allowed) {
    if (result == option) return result;
  }
  std::string list;
  for (const char* option : allowed) list += (list.empty() ? "" : ", ") + std::string("\"") + option + "\"";
  wrong(path, "one of " + list, value);
}

bool flag(const Json& object, const std::string& path, const char* name, bool fallback = false) {
  const Json* value = member(object, name);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_boolean()) wrong(path + "." + name, "true or false", *value);
  return value->get<bool>();
}

int64_t integer(const Json& value, const std::string& path, int64_t low, int64_t high) {
  if (!value.is_number_integer()) wrong(path, "an integer", value);
  const int64_t result = value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX)
                             ? INT64_MAX
                             : value.get<int64_t>();
  if (result < low || result > high) {
    wrong(path, "an integer from " + std::to_string(low) + " to " + std::to_string(high), value);
  }
  return result;
}

int64_t optionalInteger(const Json& object, const std::string& path, const char* name, int64_t low, int64_t high,
                        int64_t fallback) {
  const Json* value = member(object, name);
  if (value == nullptr || value->is_null()) return fallback;
  return integer(*value, path + "." + name, low, high);
}

double optionalTime(const Json& object, const std::string& path, const char* name) {
  const Json* value = member(object, name);
  if (value == nullptr || value->is_null()) return 0.0;
  if (!value->is_number() || !std::isfinite(value->get<double>()) || value->get<double>() < 0.0) {
    wrong(path + "." + name, "a non-negative number of milliseconds", *value);
  }
  return value->get<double>();
}

constexpr int64_t kMaxDim = 65536;
constexpr int64_t kMaxSeq = int64_t{1} << 31;
constexpr int64_t kMaxHeads = int64_t{1} << 20;

TunedEntry readEntry(const Json& e, const std::string& path) {
  if (!e.is_object()) wrong(path, "an object", e);
  TunedEntry entry;
  entry.direction = text(required(e, path, "direction"), path + ".direction", {"forward", "backward"});
  entry.kernel = text(required(e, path, "kernel"), path + ".kernel");
  if (const Json* mode = member(e, "autotune_mode"); mode != nullptr && !mode->is_null()) {
    entry.mode = text(*mode, path + ".autotune_mode", {"fast", "max"});
  }
  entry.dtype = text(required(e, path, "dtype"), path + ".dtype", {"fp16", "bf16"});
  entry.headDim = integer(required(e, path, "head_dim"), path + ".head_dim", 1, kMaxDim);
  entry.headDimV = optionalInteger(e, path, "head_dim_v", 1, kMaxDim, entry.headDim);
  // Square-shape writers record one "seqlen"; ours record both.
  const Json* seqlen = member(e, "seqlen");
  const int64_t both = seqlen != nullptr ? integer(*seqlen, path + ".seqlen", 1, kMaxSeq) : 0;
  entry.seqlenQ = both ? optionalInteger(e, path, "seqlen_q", 1, kMaxSeq, both)
                       : integer(required(e, path, "seqlen_q"), path + ".seqlen_q", 1, kMaxSeq);
  entry.seqlenKv = both ? optionalInteger(e, path, "seqlen_kv", 1, kMaxSeq, both)
                        : integer(required(e, path, "seqlen_kv"), path + ".seqlen_kv", 1, kMaxSeq);
  // Entries of writers that predate the variant fields are no-bias, no-dropout entries.
  entry.causal = flag(e, path, "causal");
  entry.hasAttnBias = flag(e, path, "has_attn_bias");
  entry.hasDropout = flag(e, path, "has_dropout");
  entry.headsQ = optionalInteger(e, path, "nheads_q", 1, kMaxHeads, 0);
  entry.headsKv = optionalInteger(e, path, "nheads_kv", 1, kMaxHeads, 0);
  entry.biasGrad = flag(e, path, "bias_grad");
  if (const Json* v = member(e, "grad_v_storage_dtype"); v != nullptr && !v->is_null()) {
    entry.gradVStorageDtype = text(*v, path + ".grad_v_storage_dtype", {"fp16", "bf16", "fp32"});
  }
  entry.useGemv = flag(e, path, "use_gemv");
  if (const Json* v = member(e, "preprocess_d_chunk"); v != nullptr && !v->is_null()) {
    entry.preprocessDChunk = integer(*v, path + ".preprocess_d_chunk", 1, kMaxDim);
  }
  const Json& config = required(e, path, "config");
  if (!config.is_object() || config.empty()) wrong(path + ".config", "an object of named integers", config);
  for (const auto& [name, value] : config.items()) {
    entry.config[name] = integer(value, path + ".config." + name, INT32_MIN, INT32_MAX);
  }
  entry.timeMs = optionalTime(e, path, "time_ms");
  entry.defaultTimeMs = optionalTime(e, path, "default_time_ms");
  return entry;
}

template <class T, class Read>
std::vector<T> readList(const Json& object, const std::string& path, const char* name, Read read) {
  std::vector<T> values;
  const Json* list = member(object, name);
  if (list == nullptr || list->is_null()) return values;
  if (!list->is_array()) wrong(path + "." + name, "an array", *list);
  for (size_t i = 0; i < list->size(); ++i) {
    values.push_back(read((*list)[i], path + "." + name + "[" + std::to_string(i) + "]"));
  }
  return values;
}

TunedGrid readGrid(const Json& g) {
  TunedGrid grid;
  if (!g.is_object()) wrong("grid", "an object", g);
  const auto positive = [](int64_t high) {
    return [high](const Json& v, const std::string& p) { return integer(v, p, 1, high); };
  };
  grid.headDims = readList<int64_t>(g, "grid", "head_dims", positive(kMaxDim));
  grid.seqlens = readList<int64_t>(g, "grid", "seqlens", positive(kMaxSeq));
  grid.dtypes = readList<std::string>(g, "grid", "dtypes",
                                      [](const Json& v, const std::string& p) { return text(v, p, {"fp16", "bf16"}); });
  grid.directions = readList<std::string>(
      g, "grid", "directions", [](const Json& v, const std::string& p) { return text(v, p, {"forward", "backward"}); });
  grid.batch = optionalInteger(g, "grid", "batch", 1, kMaxHeads, 0);
  grid.heads = optionalInteger(g, "grid", "heads", 1, kMaxHeads, 0);
  grid.fullTasks = flag(g, "grid", "full_tasks");
  return grid;
}

TunedFile readFile(const Json& root) {
  if (!root.is_object()) wrong("the document", "an object", root);
  TunedFile file;
  const Json& version = required(root, "the document", "schema_version");
  file.schemaVersion = static_cast<int>(integer(version, "schema_version", 1, INT32_MAX));
  if (file.schemaVersion > kSchemaVersion) {
    throw SchemaError("schema_version " + std::to_string(file.schemaVersion) + " is newer than this library's (" +
                      std::to_string(kSchemaVersion) + ")");
  }
  if (const Json* library = member(root, "library"); library != nullptr) file.library = text(*library, "library");
  const Json& device = required(root, "the document", "device");
  if (!device.is_object()) wrong("device", "an object", device);
  file.deviceName = text(required(device, "device", "name"), "device.name");
  if (const Json* cc = member(device, "compute_capability"); cc != nullptr) {
    file.computeCapability = text(*cc, "device.compute_capability");
  }
  file.mode = text(required(root, "the document", "autotune_mode"), "autotune_mode", {"fast", "max"});
  if (const Json* grid = member(root, "grid"); grid != nullptr) file.grid = readGrid(*grid);
  const Json& entries = required(root, "the document", "entries");
  if (!entries.is_array()) wrong("entries", "an array", entries);
  if (entries.size() > kMaxEntries) {
    throw SchemaError("entries: " + std::to_string(entries.size()) + " entries; at most " +
                      std::to_string(kMaxEntries) + " are read");
  }
  file.entries.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    file.entries.push_back(readEntry(entries[i], "entries[" + std::to_string(i) + "]"));
  }
  return file;
}

Json writeEntry(const TunedEntry& e) {
  Json j;
  j["direction"] = e.direction;
  j["kernel"] = e.kernel;
  if (!e.mode.empty()) j["autotune_mode"] = e.mode;
  j["dtype"] = e.dtype;
  j["head_dim"] = e.headDim;
  j["head_dim_v"] = e.headDimV;
  j["seqlen_q"] = e.seqlenQ;
  j["seqlen_kv"] = e.seqlenKv;
  j["causal"] = e.causal;
  j["has_attn_bias"] = e.hasAttnBias;
  j["has_dropout"] = e.hasDropout;
  if (e.headsQ > 0) j["nheads_q"] = e.headsQ;
  if (e.headsKv > 0) j["nheads_kv"] = e.headsKv;
  if (e.direction == "backward") {
    j["bias_grad"] = e.biasGrad;
    j["grad_v_storage_dtype"] = e.gradVStorageDtype.empty() ? Json(nullptr) : Json(e.gradVStorageDtype);
    j["use_gemv"] = e.useGemv;
    j["preprocess_d_chunk"] = e.preprocessDChunk ? Json(*e.preprocessDChunk) : Json(nullptr);
  }
  Json config = Json::object();
  for (const auto& [name, value] : e.config) config[name] = value;
  j["config"] = config;
  if (e.timeMs > 0.0) j["time_ms"] = e.timeMs;
  if (e.defaultTimeMs > 0.0) j["default_time_ms"] = e.defaultTimeMs;
  return j;
}

// Rule 3: the smallest value >= wanted, else the largest.
int64_t nearestAbove(const std::set<int64_t>& values, int64_t wanted) {
  const auto above = values.lower_bound(wanted);
  return above != values.end() ? *above : *values.rbegin();
}

}  // namespace

std::string TunedEntry::taskKey() const {
  std::ostringstream key;
  key << direction << '|' << kernel << '|' << mode << '|' << dtype << '|' << headDim << '|' << headDimV << '|'
      << seqlenQ << '|' << seqlenKv << '|' << causal << hasAttnBias << hasDropout << '|' << headsQ << '|' << headsKv
      << '|' << biasGrad << useGemv << '|' << gradVStorageDtype << '|' << preprocessDChunk.value_or(0);
  return key.str();
}

const TunedEntry* TunedFile::lookup(const TunedQuery& q) const {
  const bool decode = q.seqlenQ == 1;
  std::vector<const TunedEntry*> candidates;
  for (const TunedEntry& e : entries) {
    const std::string& entryMode = e.mode.empty() ? mode : e.mode;
    if (e.direction != q.direction || e.kernel != q.kernel || entryMode != q.mode || e.dtype != q.dtype ||
        e.causal != q.causal || e.hasAttnBias != q.hasAttnBias || e.hasDropout != q.hasDropout ||
        (e.seqlenQ == 1) != decode) {
      continue;
    }
    if (q.direction == "backward" &&
        (e.biasGrad != q.biasGrad || e.gradVStorageDtype != q.gradVStorageDtype || e.useGemv != q.useGemv)) {
      continue;
    }
    candidates.push_back(&e);
  }
  if (candidates.empty()) return nullptr;

  // Rule 2: the nearest head dim, ties to the larger.
  int64_t bestDim = candidates.front()->lookupHeadDim();
  for (const TunedEntry* e : candidates) {
    const int64_t d = e->lookupHeadDim();
    const int64_t distance = std::llabs(d - q.headDim), best = std::llabs(bestDim - q.headDim);
    if (distance < best || (distance == best && d > bestDim)) bestDim = d;
  }
  // Rule 3, queries then keys.
  std::set<int64_t> queryLengths;
  for (const TunedEntry* e : candidates) {
    if (e->lookupHeadDim() == bestDim) queryLengths.insert(e->seqlenQ);
  }
  const int64_t seqQ = nearestAbove(queryLengths, q.seqlenQ);
  std::set<int64_t> keyLengths;
  for (const TunedEntry* e : candidates) {
    if (e->lookupHeadDim() == bestDim && e->seqlenQ == seqQ) keyLengths.insert(e->seqlenKv);
  }
  const int64_t seqKv = nearestAbove(keyLengths, q.seqlenKv);
  // Rule 4: the problem's head layout when recorded, else the first entry in file order.
  const TunedEntry* chosen = nullptr;
  for (const TunedEntry* e : candidates) {
    if (e->lookupHeadDim() != bestDim || e->seqlenQ != seqQ || e->seqlenKv != seqKv) continue;
    if (e->headsQ == q.headsQ && e->headsKv == q.headsKv) return e;
    if (chosen == nullptr) chosen = e;
  }
  return chosen;
}

ParseResult parseTunedFile(const std::string& content) {
  if (content.size() > kMaxFileBytes) {
    return {std::nullopt, "the file has " + std::to_string(content.size()) + " bytes; at most " +
                              std::to_string(kMaxFileBytes) + " are read"};
  }
  const Json root = Json::parse(content, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return {std::nullopt, "not valid JSON"};
  try {
    return {readFile(root), ""};
  } catch (const SchemaError& e) {
    return {std::nullopt, e.what()};
  } catch (const std::exception& e) {  // nlohmann's type errors, allocation failures
    return {std::nullopt, std::string("unreadable: ") + e.what()};
  }
}

std::string serializeTunedFile(const TunedFile& file) {
  Json root;
  root["schema_version"] = file.schemaVersion;
  if (!file.library.empty()) root["library"] = file.library;
  root["device"] = Json{{"name", file.deviceName}};
  // Optional on reading, so absent (not "") when unknown: an empty string is refused.
  if (!file.computeCapability.empty()) root["device"]["compute_capability"] = file.computeCapability;
  root["autotune_mode"] = file.mode;
  Json grid;
  grid["head_dims"] = file.grid.headDims;
  grid["seqlens"] = file.grid.seqlens;
  grid["dtypes"] = file.grid.dtypes;
  grid["directions"] = file.grid.directions;
  if (file.grid.batch > 0) grid["batch"] = file.grid.batch;
  if (file.grid.heads > 0) grid["heads"] = file.grid.heads;
  grid["full_tasks"] = file.grid.fullTasks;
  root["grid"] = grid;
  Json entries = Json::array();
  for (const TunedEntry& e : file.entries) entries.push_back(writeEntry(e));
  root["entries"] = entries;
  return root.dump(2) + "\n";
}

MergeResult mergeTunedFiles(const std::vector<TunedFile>& files) {
  if (files.empty()) return {std::nullopt, "no files to merge"};
  TunedFile merged = files.front();
  merged.entries.clear();
  std::map<std::string, size_t> index;  // task key -> position in merged.entries
  auto unite = [](auto& into, const auto& from) {
    for (const auto& value : from) {
      if (std::find(into.begin(), into.end(), value) == into.end()) into.push_back(value);
    }
    std::sort(into.begin(), into.end());
  };
  for (size_t f = 0; f < files.size(); ++f) {
    const TunedFile& file = files[f];
    const std::string which = "file " + std::to_string(f + 1);
    if (file.schemaVersion != merged.schemaVersion) return {std::nullopt, which + ": another schema version"};
    if (file.deviceName != merged.deviceName) {
      return {std::nullopt, which + ": device \"" + file.deviceName + "\", not \"" + merged.deviceName + "\""};
    }
    if (file.computeCapability != merged.computeCapability) {
      return {std::nullopt, which + ": compute capability " + file.computeCapability + ", not " +
                                merged.computeCapability};
    }
    if (file.mode != merged.mode) {
      return {std::nullopt, which + ": autotune mode " + file.mode + ", not " + merged.mode};
    }
    if (f > 0) {
      unite(merged.grid.headDims, file.grid.headDims);
      unite(merged.grid.seqlens, file.grid.seqlens);
      unite(merged.grid.dtypes, file.grid.dtypes);
      unite(merged.grid.directions, file.grid.directions);
      merged.grid.fullTasks = merged.grid.fullTasks || file.grid.fullTasks;
      if (!file.library.empty()) merged.library = file.library;
    }
    for (const TunedEntry& e : file.entries) {
      const auto [position, inserted] = index.emplace(e.taskKey(), merged.entries.size());
      if (inserted) {
        merged.entries.push_back(e);
      } else {
        merged.entries[position->second] = e;
      }
    }
  }
  return {std::move(merged), ""};
}

std::string deviceFileName(const std::string& deviceName) {
  std::string name = deviceName.empty() ? "unknown_device" : deviceName;
  for (char& c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '-' || c == '_';
    if (!keep) c = '_';
  }
  return name + ".json";
}

}  // namespace ffpa::tuning
