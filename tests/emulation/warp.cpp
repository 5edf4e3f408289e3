// The warp collectives: ldmatrix, mma.sync, shfl.sync and the A registers of wgmmaRS. Each lane
// publishes its operands in its slot and waits; the last lane to arrive checks that all 32
// reached the same operation at the same call site, computes every lane's results from all the
// operands, and releases the others.
#include "emulation/block.h"

#include <cstring>
#include <map>

namespace ffpa::emulation {
namespace {

using kernels::Bf16Tag;
using kernels::HalfTag;

// Fails unless every lane of the warp is at the same collective and call site.
void checkConverged(const Warp& warp, Site site) {
  const LaneSlot& first = warp.slots[0];
  bool converged = true;
  for (const LaneSlot& slot : warp.slots) {
    converged = converged && slot.collective == first.collective &&
                slot.site.line == first.site.line &&
                std::strcmp(slot.site.file, first.site.file) == 0;
  }
  if (converged) return;
  std::map<std::string, std::vector<int>> sites;  // "what at where" -> lanes
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const LaneSlot& slot = warp.slots[lane];
    sites[std::string(collectiveName(slot.collective)) + " at " + describe(slot.site)].push_back(
        lane);
  }
  std::string text = "the lanes of the warp reached different collectives:";
  for (const auto& [where, lanes] : sites) {
    text += " lanes " + describeSet(lanes) + " " + where + ";";
  }
  text.pop_back();
  failWarp(text, site);
}

void loadMatrices(Block& block, Warp& warp, int matrices, bool transposed, Site site) {
  const char* name = collectiveName(warp.slots[0].collective);
  // Lane 8 * j + r addresses row r of matrix j. The addresses of the lanes beyond the matrices are
  // ignored, but ptx.cuh requires them to be valid too.
  const unsigned char* rows[4][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const uint32_t address = warp.slots[lane].in[0];
    const std::string problem = sharedUnitProblem(block, address);
    if (!problem.empty()) {
      failWarp(std::string(name) + ": lane " + std::to_string(lane) + "'s row address " +
                   hex(address) + " " + problem,
               site);
    }
    if (lane >= 8 * matrices) continue;
    const uint32_t offset = address - kSharedBase;
    if (block.copiesInFlight[offset / 16] != 0) {
      failWarp(std::string(name) + ": lane " + std::to_string(lane) + "'s row " + hex(address) +
                   " is still being written by a cp.async in flight (a missing copyAsyncWait or "
                   "barrier)",
               site);
    }
    rows[lane / 8][lane % 8] = block.shared.get() + offset;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const int group = lane / 4, quad = lane % 4;
    for (int j = 0; j < matrices; ++j) {
      uint16_t pair[2];
      if (transposed) {  // elements (2 * quad, group) and (2 * quad + 1, group) as stored
        std::memcpy(&pair[0], rows[j][2 * quad] + 2 * group, 2);
        std::memcpy(&pair[1], rows[j][2 * quad + 1] + 2 * group, 2);
      } else {  // elements (group, 2 * quad) and (group, 2 * quad + 1)
        std::memcpy(pair, rows[j][group] + 4 * quad, 4);
      }
      std::memcpy(&warp.slots[lane].out[j], pair, 4);
    }
  }
}

// m16n8k16, D = A B + C, fragments as in ptx.cuh. Operands: a in in[0..3], b in in[4..5], c (four
// fp32 or two fp16 pairs) in in[6..9].
template <class Tag>
void multiply(Warp& warp, bool halfAccumulator) {
  float a[16][16], b[16][8], c[16][8];
  auto unpackInto = [](uint32_t bits, auto tag, float& low, float& high) {
    const kernels::float2 pair = kernels::unpackPair(bits, tag);
    low = pair.x;
    high = pair.y;
  };
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const uint32_t* in = warp.slots[lane].in;
    const int g = lane / 4, q = 2 * (lane % 4);
    unpackInto(in[0], Tag{}, a[g][q], a[g][q + 1]);
    unpackInto(in[1], Tag{}, a[g + 8][q], a[g + 8][q + 1]);
    unpackInto(in[2], Tag{}, a[g][q + 8], a[g][q + 9]);
    unpackInto(in[3], Tag{}, a[g + 8][q + 8], a[g + 8][q + 9]);
    unpackInto(in[4], Tag{}, b[q][g], b[q + 1][g]);
    unpackInto(in[5], Tag{}, b[q + 8][g], b[q + 9][g]);
    if (halfAccumulator) {
      unpackInto(in[6], HalfTag{}, c[g][q], c[g][q + 1]);
      unpackInto(in[7], HalfTag{}, c[g + 8][q], c[g + 8][q + 1]);
    } else {
      std::memcpy(&c[g][q], &in[6], 8);
      std::memcpy(&c[g + 8][q], &in[8], 8);
    }
  }
  auto element = [&](int row, int column) {
    double sum = c[row][column];
    for (int k = 0; k < 16; ++k) sum += double{a[row][k]} * b[k][column];
    return static_cast<float>(sum);
  };
  for (int lane = 0; lane < kWarpSize; ++lane) {
    uint32_t* out = warp.slots[lane].out;
    const int g = lane / 4, q = 2 * (lane % 4);
    if (halfAccumulator) {
      out[0] = kernels::packPair(element(g, q), element(g, q + 1), HalfTag{});
      out[1] = kernels::packPair(element(g + 8, q), element(g + 8, q + 1), HalfTag{});
    } else {
      const float d[4] = {element(g, q), element(g, q + 1), element(g + 8, q),
                          element(g + 8, q + 1)};
      std::memcpy(out, d, sizeof d);
    }
  }
}

void shuffle(Warp& warp) {
  for (int lane = 0; lane < kWarpSize; ++lane) {
    // shfl.bfly: a source lane past the warp gives the lane its own value.
    const uint32_t source = static_cast<uint32_t>(lane) ^ warp.slots[lane].in[1];
    warp.slots[lane].out[0] = warp.slots[source < kWarpSize ? source : lane].in[0];
  }
}

// vote.all / vote.any of the lanes' predicates (in[0]), the same result in every lane.
void vote(Warp& warp, bool all) {
  int count = 0;
  for (const LaneSlot& slot : warp.slots) count += slot.in[0] != 0;
  const uint32_t result = all ? count == kWarpSize : count > 0;
  for (LaneSlot& slot : warp.slots) slot.out[0] = result;
}

// Each lane receives the A registers of the four lanes of its quad (those of its rows).
void gatherQuads(Warp& warp) {
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const int first = lane - lane % 4;
    for (int q = 0; q < 4; ++q) std::memcpy(&warp.slots[lane].out[4 * q], warp.slots[first + q].in, 16);
  }
}

// Runs one collective for the calling lane: `in` holds its operands; returns its results.
const uint32_t* collective(Collective kind, const uint32_t* in, int words, Site site) {
  Block& block = currentBlock();
  const int thread = currentThread().index;
  Warp& warp = block.warps[thread / kWarpSize];
  if (warp.lanes < kWarpSize) {
    fail(std::string(collectiveName(kind)) + " needs a whole warp, but this warp has only " +
             std::to_string(warp.lanes) + " threads (blocks of " +
             std::to_string(block.config.blockThreads) + ")",
         site);
  }
  LaneSlot& slot = warp.slots[thread % kWarpSize];
  slot.collective = kind;
  slot.site = site;
  std::memcpy(slot.in, in, words * sizeof(uint32_t));
  if (++warp.arrived < kWarpSize) {
    wait(Waiting::Collective, site);
    return slot.out;
  }
  warp.arrived = 0;
  checkConverged(warp, site);
  switch (kind) {
    case Collective::LoadMatrixX4: loadMatrices(block, warp, 4, false, site); break;
    case Collective::LoadMatrixX2: loadMatrices(block, warp, 2, false, site); break;
    case Collective::LoadMatrixX4Trans: loadMatrices(block, warp, 4, true, site); break;
    case Collective::MmaF32Half: multiply<HalfTag>(warp, false); break;
    case Collective::MmaF32Bf16: multiply<Bf16Tag>(warp, false); break;
    case Collective::MmaF16: multiply<HalfTag>(warp, true); break;
    case Collective::ShuffleXor: shuffle(warp); break;
    case Collective::VoteAll: vote(warp, true); break;
    case Collective::VoteAny: vote(warp, false); break;
    case Collective::WgmmaRegisters: gatherQuads(warp); break;
  }
  const int first = thread - thread % kWarpSize;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (first + lane != thread) release(block, first + lane);
  }
  return slot.out;
}

template <int N>
void loadMatrix(Collective kind, uint32_t (&r)[N], uint32_t shared, Site site) {
  const uint32_t* out = collective(kind, &shared, 1, site);
  std::memcpy(r, out, sizeof r);
}

void multiplyF32(Collective kind, float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                 const float (&c)[4], Site site) {
  uint32_t in[10];
  std::memcpy(in, a, 16);
  std::memcpy(in + 4, b, 8);
  std::memcpy(in + 6, c, 16);
  std::memcpy(d, collective(kind, in, 10, site), 16);
}

}  // namespace

const uint32_t* gatherQuadRegisters(const uint32_t (&a)[4], Site site) {
  return collective(Collective::WgmmaRegisters, a, 4, site);
}

const char* collectiveName(Collective collective) {
  switch (collective) {
    case Collective::LoadMatrixX4: return "loadMatrixX4";
    case Collective::LoadMatrixX2: return "loadMatrixX2";
    case Collective::LoadMatrixX4Trans: return "loadMatrixX4Trans";
    case Collective::MmaF32Half: return "mmaF32 (fp16)";
    case Collective::MmaF32Bf16: return "mmaF32 (bf16)";
    case Collective::MmaF16: return "mmaF16";
    case Collective::ShuffleXor: return "shuffleXor";
    case Collective::VoteAll: return "warpAll";
    case Collective::VoteAny: return "warpAny";
    case Collective::WgmmaRegisters: return "wgmmaRS";
  }
  return "?";
}

}  // namespace ffpa::emulation

namespace ffpa::kernels {
inline namespace emulated {

using emulation::Collective;

void loadMatrixX4(uint32_t (&r)[4], uint32_t shared, emulation::Site site) {
  emulation::loadMatrix(Collective::LoadMatrixX4, r, shared, site);
}

void loadMatrixX2(uint32_t (&r)[2], uint32_t shared, emulation::Site site) {
  emulation::loadMatrix(Collective::LoadMatrixX2, r, shared, site);
}

void loadMatrixX4Trans(uint32_t (&r)[4], uint32_t shared, emulation::Site site) {
  emulation::loadMatrix(Collective::LoadMatrixX4Trans, r, shared, site);
}

void mmaF32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
            HalfTag, emulation::Site site) {
  emulation::multiplyF32(Collective::MmaF32Half, d, a, b, c, site);
}

void mmaF32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
            Bf16Tag, emulation::Site site) {
  emulation::multiplyF32(Collective::MmaF32Bf16, d, a, b, c, site);
}

void mmaF16(uint32_t (&d)[2], const uint32_t (&a)[4], const uint32_t (&b)[2],
            const uint32_t (&c)[2], emulation::Site site) {
  uint32_t in[8];
  std::memcpy(in, a, 16);
  std::memcpy(in + 4, b, 8);
  std::memcpy(in + 6, c, 8);
  std::memcpy(d, emulation::collective(Collective::MmaF16, in, 8, site), 8);
}

float shuffleXor(float value, int laneMask, emulation::Site site) {
  uint32_t in[2];
  std::memcpy(&in[0], &value, 4);
  in[1] = static_cast<uint32_t>(laneMask);
  float result;
  std::memcpy(&result, emulation::collective(Collective::ShuffleXor, in, 2, site), 4);
  return result;
}

bool warpAll(bool predicate, emulation::Site site) {
  const uint32_t in = predicate;
  return emulation::collective(Collective::VoteAll, &in, 1, site)[0] != 0;
}

bool warpAny(bool predicate, emulation::Site site) {
  const uint32_t in = predicate;
  return emulation::collective(Collective::VoteAny, &in, 1, site)[0] != 0;
}

}  // namespace emulated
}  // namespace ffpa::kernels
