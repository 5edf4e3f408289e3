// How the reference path splits a problem so its fp32 scratch fits a budget
// (FFPA_POLICY_REFERENCE_CHUNK_BYTES), and where each scratch buffer lives in the workspace.
//
// The unit of work is one K/V head of one batch ("unit", B * Hkv of them) together with the
// `group = Hq / Hkv` query heads that read it. Stacking those query heads' rows makes every GEMM
// a plain strided batch over units:
//   S[u]  = Q[u] (group*rows x Dqk) * K[u]^T          -> group*rows x Nkv
//   O[u]  = P[u] * V[u]                               -> group*rows x Dv
//   dK[u] = dS[u]^T * Q[u] sums over the group by itself, so GQA needs no separate reduction.
// A chunk is `unitsPerChunk` units times `rowsPerChunk` query rows of each of their query heads.
#pragma once

#include "core/problem.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace ffpa::reference {

struct ChunkPlan {
  int64_t units = 0;          // B * Hkv
  int64_t group = 0;          // Hq / Hkv
  int64_t unitsPerChunk = 0;  // >= 1
  int64_t rowsPerChunk = 0;   // query rows per query head, 1..Nq

  // Number of chunks (saturated at INT64_MAX; only ever printed or compared).
  int64_t chunkCount(int64_t seqQ) const {
    const __int128 count = __int128{(units + unitsPerChunk - 1) / unitsPerChunk} *
                           ((seqQ + rowsPerChunk - 1) / rowsPerChunk);
    return count > INT64_MAX ? INT64_MAX : static_cast<int64_t>(count);
  }
};

// fp32 scratch of the forward, sized for a full chunk; offsets into the workspace.
struct ForwardBuffers {
  size_t q, k, v, scores, out;  // Q rows, K and V of the units, S/P, O rows
  size_t lt;                    // cuBLASLt's own scratch
  size_t total;
};

// fp32 scratch of the backward. dK/dV of a unit accumulate over its row chunks.
struct BackwardBuffers {
  size_t q, k, v, dOut, probs, dScores, dq, dk, dv, delta, lt;
  size_t total;
};

// cuBLASLt's scratch per GEMM; enough for its split-K algorithms at these sizes.
constexpr size_t kCublasLtWorkspaceBytes = size_t{8} << 20;

// Throws NOT_SUPPORTED_SHAPE when the scratch of even one row could not exist (past 2^62 bytes).
ChunkPlan chooseChunks(const AttentionProblem& problem, int64_t budgetBytes);
ForwardBuffers forwardBuffers(const AttentionProblem& problem, const ChunkPlan& chunks);
BackwardBuffers backwardBuffers(const AttentionProblem& problem, const ChunkPlan& chunks);

std::string describeChunks(const ChunkPlan& chunks, int64_t seqQ);

}  // namespace ffpa::reference
