// The Hopper (sm_90a) instructions of the sm90 kernels, as thin named wrappers, in the manner of
// common/ptx.cuh: the same names are provided by the CPU warp emulator (tests/emulation) when
// FFPA_EMULATE is defined.
//
// wgmma (warpgroup MMA): the 128 threads of a warpgroup (4 consecutive warps, the first a multiple
// of 4) issue it together; it runs asynchronously and its accumulators may be read only after
// wgmmaWait. Accumulator layout of m64nNk16 with fp32 D, thread t = 32 * w + 4 * group + quad:
//   d[4 * j + 0..1] = D[16 * w + group    ][8 * j + 2 * quad .. +1]     (j = 0 .. N/8 - 1)
//   d[4 * j + 2..3] = D[16 * w + group + 8][8 * j + 2 * quad .. +1]
// (each warp holds its 16 rows as an mma.sync m16n8 C fragment per 8 columns.)
//
// Operands come from shared memory through 64-bit matrix descriptors (matrixDescriptor), always
// with the 128-byte swizzle that TMA writes (tensor_map.h):
//   K-major operand (A = Q or P, B = K for S = Q K^T): rows of 64 elements (128 bytes), 8-row
//     groups 1024 bytes apart (stride byte offset); the k16 step s of a 64-wide block starts 32 * s
//     bytes into it.
//   N-major B (V for O = P V, transposed on the fly): rows of 64 n-elements, one per key; 8-key
//     groups 1024 bytes apart (stride byte offset), blocks of 64 columns `leading` bytes apart.
// Or A from registers (wgmmaRS): each warp supplies its 16 rows of A[64, 16] as an mma.sync m16k16
// A fragment, four 16-bit pairs per thread:
//   a[0] = A[16 * w + group][2 * quad .. +1]      a[1] = A[16 * w + group + 8][2 * quad .. +1]
//   a[2] = A[16 * w + group][2 * quad + 8 .. +9]  a[3] = A[16 * w + group + 8][2 * quad + 8 .. +9]
// which is the fp32 accumulator layout above, packed pairwise: accumulators 8 s .. 8 s + 7 of a
// 64-column tile (its columns 16 s .. 16 s + 15) are the A fragment of the k16 step s of a
// product that tile is the A operand of (P V with P from the registers of S).
#pragma once

#include "common/platform.cuh"
#include "sm90/tensor_map.h"

#include <cstdint>

namespace ffpa::kernels {

// The descriptor of a 128B-swizzled operand at shared address `shared` (1024-byte aligned, or
// the aligned start plus the k-offset of a K-major step): bits 0-13 address / 16, 16-29 leading
// byte offset / 16, 32-45 stride byte offset / 16, 62-63 layout (1 = 128-byte swizzle).
FFPA_DEVICE uint64_t matrixDescriptor(uint32_t shared, uint32_t leadingBytes, uint32_t strideBytes) {
  return uint64_t((shared & 0x3ffff) >> 4) | uint64_t((leadingBytes >> 4) & 0x3fff) << 16 |
         uint64_t((strideBytes >> 4) & 0x3fff) << 32 | uint64_t(1) << 62;
}

#ifndef FFPA_EMULATE

// --- mbarrier: arrival counts and TMA transaction bytes ----------------------------------------

FFPA_DEVICE void mbarrierInit(uint32_t barrier, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(arrivals));
}

// Makes the initialised barriers visible to the TMA unit (before the block barrier that follows).
FFPA_DEVICE void fenceBarrierInit() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

// One arrival that also announces `bytes` of TMA transactions the phase must wait for.
FFPA_DEVICE void mbarrierArriveExpectTx(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes)
               : "memory");
}

FFPA_DEVICE void mbarrierArrive(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}

// Waits until the phase of parity `parity` has completed (phases alternate 0, 1, 0, ...).
FFPA_DEVICE void mbarrierWait(uint32_t barrier, int parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
}

// --- Clusters: the shared memory of the other blocks of a thread-block cluster -----------------

// The block's rank in its cluster (its x index modulo the cluster size, for clusters along x).
FFPA_DEVICE int clusterRank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return int(rank);
}

// The shared::cluster address of `shared` (an address of this block) in the block of `rank`.
FFPA_DEVICE uint32_t mapShared(uint32_t shared, int rank) {
  uint32_t mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(mapped) : "r"(shared), "r"(rank));
  return mapped;
}

// Stores 16 bytes at the cluster address `shared` and completes 16 transaction bytes on the
// mbarrier at cluster address `barrier` (of the same block); asynchronous: the receiver sees the
// bytes once the mbarrier's phase completes.
FFPA_DEVICE void storeAsyncCluster(uint32_t shared, const float (&values)[4], uint32_t barrier) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(shared),
      "f"(values[0]), "f"(values[1]), "f"(values[2]), "f"(values[3]), "r"(barrier)
      : "memory");
}

// One arrival on the mbarrier at cluster address `barrier` (of this block or another of the
// cluster): a consumer hands back a buffer that it has read, whose next contents another block
// writes (TMA multicast, st.async). Release at CTA scope, the default, as CUTLASS's
// ClusterBarrier::arrive: the reads are ordered before the arrival, which is all a buffer handed
// back needs. Not for publishing this thread's writes to another block: .release.cluster would
// put MEMBAR.ALL.GPU and two error barriers before every arrival, which stalled the cluster
// kernels' consumers in 11-26% of their warp-state samples (Nsight Compute, H100).
FFPA_DEVICE void mbarrierArriveCluster(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}

// Every thread of every block of the cluster: wait until all have arrived (release / acquire).
// Not .aligned: a warp may reach it diverged (the producer warp, whose thread 0 alone produced).
FFPA_DEVICE void clusterSync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// --- TMA -------------------------------------------------------------------------------------

// Copies the box at element coordinates (c0 .. c3, innermost first) of `map` to shared address
// `shared` (1024-byte aligned), completing its bytes on `barrier`.
FFPA_DEVICE void tmaLoad4d(uint32_t shared, const ffpa::sm90::TensorMap* map, int c0, int c1, int c2, int c3,
                           uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(shared),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(barrier)
      : "memory");
}

// As tmaLoad4d, into the shared memory of every block of the cluster whose rank has its bit set in
// `ctaMask`: the box lands at the same offset `shared` in each, and completes its bytes on the
// mbarrier at the same offset `barrier` in each (so the L2 delivers it once for all of them).
FFPA_DEVICE void tmaLoad4dMulticast(uint32_t shared, const ffpa::sm90::TensorMap* map, int c0, int c1, int c2, int c3,
                                    uint32_t barrier, uint16_t ctaMask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3, %4, %5}], [%6], %7;\n" ::"r"(shared),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(barrier), "h"(ctaMask)
      : "memory");
}

// Orders this thread's ordinary shared-memory stores before later reads by wgmma or TMA (the
// async proxy); a barrier must still follow for other threads.
FFPA_DEVICE void fenceProxyAsync() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// --- wgmma -----------------------------------------------------------------------------------

// Before the first wgmma that reads accumulators written by ordinary instructions.
FFPA_DEVICE void wgmmaFence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// Closes the group of wgmma issued since the last commit.
FFPA_DEVICE void wgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// Waits until at most `Pending` committed groups are in flight; their accumulators are then valid.
template <int Pending>
FFPA_DEVICE void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// Keeps the compiler from moving accesses of `d` across a wgmma issued on it.
template <int N>
FFPA_DEVICE void wgmmaFenceOperands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (+)= A B, m64nNk16, operands from shared memory (the generated specialisations, wgmma_ops.cuh).
template <int N, bool kTransposeB>
FFPA_DEVICE void wgmmaSS(float (&d)[N / 2], uint64_t descA, uint64_t descB, bool accumulate, HalfTag);
template <int N, bool kTransposeB>
FFPA_DEVICE void wgmmaSS(float (&d)[N / 2], uint64_t descA, uint64_t descB, bool accumulate, Bf16Tag);

// D (+)= A B, m64nNk16, A from registers (the fragment above), B from shared memory. Until a
// wgmmaWait has seen its group complete, the wgmma may still read `a`: its registers must not
// change before then; a wgmmaFence must stand between their last write and the wgmma.
template <int N, bool kTransposeB>
FFPA_DEVICE void wgmmaRS(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t descB, bool accumulate, HalfTag);
template <int N, bool kTransposeB>
FFPA_DEVICE void wgmmaRS(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t descB, bool accumulate, Bf16Tag);

// Keeps the compiler from moving writes of a wgmmaRS's A registers `a` above the wgmmaWait that
// precedes this (or their reads below it).
template <int N>
FFPA_DEVICE void wgmmaFenceOperands(uint32_t (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// --- Registers per thread of a warpgroup (setmaxnreg; the kernel must have a register cap) ------

template <int Registers>
FFPA_DEVICE void increaseRegisters() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

template <int Registers>
FFPA_DEVICE void decreaseRegisters() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

#endif  // !FFPA_EMULATE

}  // namespace ffpa::kernels

#ifndef FFPA_EMULATE
#include "wgmma_ops.cuh"  // generated by sm90/make_wgmma.py into the build directory
#endif
