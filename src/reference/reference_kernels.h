// The small CUDA kernels of the reference path, around the cuBLASLt GEMMs: moving rows between the
// caller's strided 16/32-bit tensors and packed fp32 scratch, softmax with the causal mask and
// log-sum-exp, and the elementwise steps of the backward. All of them enqueue on `stream` only.
#pragma once

#include "core/problem.h"
#include "common/slice_mask.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace ffpa::reference {

struct DeviceTensor {
  const void* data;
  ffpaDataType_t dtype;
  Strides strides;  // [B, H, N, D] (log-sum-exp: [B, H, N])
};

struct MutableDeviceTensor {
  void* data;
  ffpaDataType_t dtype;
  Strides strides;
};

// One chunk (see chunking.h): `units` consecutive units from `firstUnit` (unit = b * headsKv +
// kvHead) and query rows [firstRow, firstRow + rows) of each of their `group` query heads.
// Stacked row rho = (unitInChunk * group + j) * rows + r is query firstRow + r of head
// kvHead * group + j.
struct ChunkGeometry {
  int64_t firstUnit;
  int64_t units;
  int64_t headsKv;
  int64_t group;
  int64_t firstRow;
  int64_t rows;
};

inline int64_t stackedRows(const ChunkGeometry& g) { return g.units * g.group * g.rows; }

// Which keys a query sees: with slices (a device view), those the slices give it; otherwise
// query i sees key j iff mode is FFPA_CAUSAL_NONE or j <= i + offset.
struct KeyMask {
  ffpaCausalMode_t mode;
  int64_t offset;
  slices::SliceView slices;
  // FFPA_ATTENTION_KEY_LENGTHS (null: none): batch entry b has keys [0, L_b) only, L_b clamped to
  // [0, seqKv], and a bottom-right diagonal ends at its last key.
  const int32_t* keyLengths = nullptr;
};

// Q or dO rows of the chunk -> fp32 [stacked rows, dim].
void gatherQueryRows(const DeviceTensor& src, const ChunkGeometry& chunk, int64_t dim, float* dst,
                     cudaStream_t stream);
// fp32 [stacked rows, dim] -> O or dQ rows of the chunk, rounded to the tensor's type.
void scatterQueryRows(const float* src, const MutableDeviceTensor& dst, const ChunkGeometry& chunk,
                      int64_t dim, cudaStream_t stream);
// K or V of the chunk's units -> fp32 [units, seq, dim]; with `keyLengths` (KeyMask's), rows from
// the unit's batch entry's count on are zeros, not read (they may hold NaN).
void gatherUnitRows(const DeviceTensor& src, const ChunkGeometry& chunk, int64_t seq, int64_t dim,
                    const int32_t* keyLengths, float* dst, cudaStream_t stream);
// fp32 [units, seq, dim] -> dK or dV of the chunk's units.
void scatterUnitRows(const float* src, const MutableDeviceTensor& dst, const ChunkGeometry& chunk,
                     int64_t seq, int64_t dim, cudaStream_t stream);

// In place, per stacked row of already scaled scores [stacked rows, seqKv]: P = softmax over the
// visible keys, 0 elsewhere; writes LSE (natural log; -inf for a row that sees no key) when
// `lse` is not null.
void softmaxRows(float* scores, const ChunkGeometry& chunk, int64_t seqKv, KeyMask mask,
                 float* lse, const Strides& lseStrides, cudaStream_t stream);
// In place: P = exp(S - LSE) on visible keys, 0 elsewhere, from the forward's LSE.
void probabilitiesFromLse(float* scores, const ChunkGeometry& chunk, int64_t seqKv,
                          KeyMask mask, const float* lse, const Strides& lseStrides,
                          cudaStream_t stream);
// delta[rho] = sum_d O[rho, d] * dO[rho, d] over the chunk's rows.
void rowDotProducts(const DeviceTensor& o, const DeviceTensor& dO, const ChunkGeometry& chunk,
                    int64_t dimV, float* delta, cudaStream_t stream);
// In place: dS = P * (dP - delta[row]) over [rows, seqKv]; dScores holds dP on entry.
void softmaxGradient(float* dScores, const float* probs, const float* delta, int64_t rows,
                     int64_t seqKv, cudaStream_t stream);

}  // namespace ffpa::reference
