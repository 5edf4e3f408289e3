#include "cp/ring_schedule.h"

#include "core/error.h"

namespace ffpa::cp {
namespace {

// A run of local tokens that is a run of global tokens too: `chunk` in units of `size` tokens.
struct Chunk {
  int64_t local;   // first local row
  int64_t size;
  int64_t global;  // global chunk index
};

std::vector<Chunk> chunksOf(Sharding sharding, int32_t ranks, int32_t rank, int64_t length) {
  if (sharding == Sharding::Contiguous) return {{0, length, rank}};
  const int64_t half = length / 2;
  return {{0, half, rank}, {half, half, 2 * int64_t{ranks} - 1 - rank}};
}

enum class Seen { None, Full, Causal };

// How the queries of global chunk q see the keys of global chunk k under a causal mask (chunks of
// one size: the diagonal chunk is square, so both alignments agree).
Seen seen(int64_t q, int64_t k) { return q > k ? Seen::Full : q == k ? Seen::Causal : Seen::None; }

// The blocks of one step under a causal mask: per query chunk, the key chunks it sees, which are
// adjacent in local order, all fully seen but perhaps the last (seen causally): one block aligned
// bottom-right. Then adjacent query chunks with the same fully seen keys become one block.
std::vector<Block> causalBlocks(const std::vector<Chunk>& queries, const std::vector<Chunk>& keys) {
  std::vector<Block> rows;
  for (const Chunk& q : queries) {
    Block block{{q.local, q.local + q.size}, {0, 0}, false};
    bool open = true;  // a causal key chunk closes the block: nothing may follow it
    for (const Chunk& k : keys) {
      const Seen how = seen(q.global, k.global);
      if (how == Seen::None) continue;
      const bool adjacent = block.keys.size() == 0 || block.keys.end == k.local;
      require(open && adjacent, FFPA_STATUS_INTERNAL_ERROR,
              "context parallelism: the key chunks a query chunk sees are not one causal block");
      if (block.keys.size() == 0) block.keys.begin = k.local;
      block.keys.end = k.local + k.size;
      block.causal = how == Seen::Causal;
      open = !block.causal;
    }
    if (block.keys.size() > 0) rows.push_back(block);
  }
  std::vector<Block> merged;
  for (const Block& b : rows) {
    if (!merged.empty()) {
      Block& last = merged.back();
      if (!last.causal && !b.causal && last.keys == b.keys && last.queries.end == b.queries.begin) {
        last.queries.end = b.queries.end;
        continue;
      }
    }
    merged.push_back(b);
  }
  return merged;
}

void checkShape(const RingShape& s) {
  require(s.ranks >= 1, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "the communicator has ", s.ranks,
          " ranks; at least 1 is needed");
  require(s.rank >= 0 && s.rank < s.ranks, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "rank ", s.rank,
          " is outside 0 to ", s.ranks - 1);
  require(s.localQueries >= 1 && s.localKeys >= 1, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
          "context parallelism needs at least one local query and key (Nq = ", s.localQueries,
          ", Nkv = ", s.localKeys, ")");
  if (s.causal) {
    require(s.localQueries == s.localKeys, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
            "a causal mask over a context-parallel sequence needs as many local queries as keys (Nq = ",
            s.localQueries, ", Nkv = ", s.localKeys, "): Q and K/V are sharded alike");
  }
  if (s.sharding == Sharding::Zigzag) {
    require(s.localQueries % 2 == 0 && s.localKeys % 2 == 0, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
            "zigzag sharding gives every rank two chunks of equal length: Nq (", s.localQueries,
            ") and Nkv (", s.localKeys, ") must be even");
  }
}

}  // namespace

std::vector<Step> ringSchedule(const RingShape& shape) {
  checkShape(shape);
  std::vector<Step> steps;
  for (int32_t s = 0; s < shape.ranks; ++s) {
    Step step;
    step.source = (shape.rank - s + shape.ranks) % shape.ranks;
    if (shape.causal) {
      step.blocks = causalBlocks(chunksOf(shape.sharding, shape.ranks, shape.rank, shape.localQueries),
                                 chunksOf(shape.sharding, shape.ranks, step.source, shape.localKeys));
    } else {
      step.blocks = {{{0, shape.localQueries}, {0, shape.localKeys}, false}};
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

int64_t globalToken(Sharding sharding, int32_t ranks, int32_t rank, int64_t localLength, int64_t local) {
  for (const Chunk& c : chunksOf(sharding, ranks, rank, localLength)) {
    if (local < c.local + c.size) return c.global * c.size + (local - c.local);
  }
  return -1;
}

std::vector<RowRange> shardRanges(Sharding sharding, int32_t ranks, int32_t rank, int64_t localLength) {
  std::vector<RowRange> ranges;
  for (const Chunk& c : chunksOf(sharding, ranks, rank, localLength)) {
    ranges.push_back({c.global * c.size, (c.global + 1) * c.size});
  }
  return ranges;
}

const char* shardingName(Sharding sharding) {
  return sharding == Sharding::Zigzag ? "zigzag" : "contiguous";
}

}  // namespace ffpa::cp
