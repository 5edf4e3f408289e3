// The ring schedule of context-parallel attention: which key/value block a rank holds at each
// step, and which (query rows, key rows, mask) blocks of its local attention that step computes.
// Pure host arithmetic, shared by the device executor and the host tests that check it.
//
// P ranks each hold n local tokens of Q and K/V. At step s (0 <= s < P) rank r holds the K/V of
// rank (r - s) mod P: the blocks travel to rank + 1 after each step. A global causal mask becomes,
// per step, at most two plain attention calls (full, or causal aligned bottom-right) on contiguous
// local rows and keys, so each step is ordinary attention whose partial output is merged by its
// log-sum-exp.
#pragma once

#include <cstdint>
#include <vector>

namespace ffpa::cp {

enum class Sharding : int32_t {
  Contiguous = 0,  // rank r holds tokens [r * n, (r + 1) * n)
  Zigzag = 1,      // 2P chunks of n / 2: rank r holds chunks r and 2P - 1 - r (balanced causal work)
};

struct RowRange {
  int64_t begin = 0, end = 0;  // half-open, local rows
  int64_t size() const { return end - begin; }
  bool operator==(const RowRange& o) const { return begin == o.begin && end == o.end; }
};

// One attention call of a step: local query rows against rows of the block held. `causal`: query
// row i sees key j iff j - keys.begin <= (i - queries.begin) + (keys.size() - queries.size()),
// the bottom-right alignment; otherwise every key.
struct Block {
  RowRange queries, keys;
  bool causal = false;
};

struct Step {
  int32_t source = 0;          // the rank whose K/V this step holds
  std::vector<Block> blocks;   // disjoint query ranges; empty when no query of the rank sees the block
};

struct RingShape {
  int32_t ranks = 1;
  int32_t rank = 0;
  Sharding sharding = Sharding::Contiguous;
  bool causal = false;  // the global mask: causal over the whole sequence (Nq = Nkv), or none
  int64_t localQueries = 0;
  int64_t localKeys = 0;
};

// Checks a shape (throws ffpa::Error naming what is wrong: a causal mask needs localQueries ==
// localKeys, zigzag sharding an even local length) and builds its P steps. Step 0 (the rank's
// own block) covers every local query row.
std::vector<Step> ringSchedule(const RingShape& shape);

// The global position of local token `local` of `rank` (of `localLength` tokens per rank).
int64_t globalToken(Sharding sharding, int32_t ranks, int32_t rank, int64_t localLength, int64_t local);

// The global token ranges a rank holds, in local order (1 range contiguous, 2 zigzag).
std::vector<RowRange> shardRanges(Sharding sharding, int32_t ranks, int32_t rank, int64_t localLength);

const char* shardingName(Sharding sharding);

}  // namespace ffpa::cp
