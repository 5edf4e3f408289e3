// The tuned-config reader (src/tuning) on arbitrary bytes, the one input libffpa reads from disk.
// Properties: it never throws or crashes; a refused text comes with a reason; an accepted file
// written out and read back has the same entries (task keys and configs); lookup answers any
// query about an accepted file with one of its entries or none, and an entry's own task always
// finds an entry of the same head dim and kernel.
#include "support/fuzz_checks.h"
#include "tuning/tuned_config.h"

#include <cstddef>
#include <cstdint>
#include <string>

using ffpa_fuzz::expect;
using namespace ffpa::tuning;

namespace {

TunedQuery queryFor(const TunedFile& file, const TunedEntry& e) {
  TunedQuery q;
  q.direction = e.direction;
  q.kernel = e.kernel;
  q.mode = e.mode.empty() ? file.mode : e.mode;
  q.dtype = e.dtype;
  q.causal = e.causal;
  q.hasAttnBias = e.hasAttnBias;
  q.hasDropout = e.hasDropout;
  q.biasGrad = e.biasGrad;
  q.gradVStorageDtype = e.gradVStorageDtype;
  q.useGemv = e.useGemv;
  q.headDim = e.lookupHeadDim();
  q.seqlenQ = e.seqlenQ;
  q.seqlenKv = e.seqlenKv;
  q.headsQ = e.headsQ;
  q.headsKv = e.headsKv;
  return q;
}

bool isEntryOf(const TunedFile& file, const TunedEntry* entry) {
  return entry == nullptr || (entry >= file.entries.data() && entry < file.entries.data() + file.entries.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const ParseResult parsed = parseTunedFile(text);
  if (!parsed.file) {
    expect(!parsed.error.empty(), "a refused file has a reason");
    return 0;
  }
  const TunedFile& file = *parsed.file;
  const ParseResult again = parseTunedFile(serializeTunedFile(file));
  expect(again.file.has_value(), "a written file reads back: " + again.error);
  expect(again.file->entries.size() == file.entries.size(), "a written file keeps its entries");
  for (size_t i = 0; i < file.entries.size(); ++i) {
    const TunedEntry& before = file.entries[i];
    const TunedEntry& after = again.file->entries[i];
    expect(before.taskKey() == after.taskKey(), "entry " + std::to_string(i) + " keeps its task");
    expect(before.config == after.config, "entry " + std::to_string(i) + " keeps its config");
  }
  for (const TunedEntry& e : file.entries) {
    const TunedQuery query = queryFor(file, e);
    const TunedEntry* found = file.lookup(query);
    expect(found != nullptr && isEntryOf(file, found), "an entry's own task finds an entry");
    expect(found->lookupHeadDim() == e.lookupHeadDim() && found->kernel == e.kernel,
           "an entry's own task finds its head dim and kernel");
    TunedQuery other = query;
    other.headDim = static_cast<int64_t>(size % 2048);
    other.seqlenQ = static_cast<int64_t>(size % 70000) + 1;
    other.seqlenKv = static_cast<int64_t>(size % 9000) + 1;
    expect(isEntryOf(file, file.lookup(other)), "lookup answers with an entry of the file or none");
  }
  return 0;
}
