// The kernels' hardware interface (kernels/common/platform.cuh, element.cuh, ptx.cuh) for the CPU
// warp emulator: platform.cuh includes this header when FFPA_EMULATE is defined, and the other two
// then compile none of their CUDA code. Names and semantics are those of the CUDA versions; the
// comments there give the fragment layouts. Tests launch kernels through emulation/launch.h.
//
// Every function that can detect a bug takes the caller's source position as a defaulted last
// argument, so that error messages name the kernel line, and so that a warp collective reached by
// lanes at different call sites (divergence) is reported. Positions are lines (GCC has no column
// builtin): two calls on one line count as one site, and so do the calls expanded from one macro.
//
// Shared addresses (sharedAddress(), and what ldmatrix and cp.async take) are kSharedBase plus
// the byte offset into dynamic shared memory.
#pragma once

#include <cmath>  // fmaxf, floorf: the CUDA math functions the kernels call
#include <cstdint>

#define FFPA_DEVICE inline
#define FFPA_KERNEL
#define FFPA_LAUNCH_BOUNDS(threads, blocks)
#define FFPA_GRID_CONSTANT
#define FFPA_CLUSTER_DIMS(x, y, z)

namespace ffpa::sm90 {
struct TensorMapSpec;  // sm90/tensor_map.h
}

namespace ffpa::emulation {

// Storage of the 16-bit element types: bits only, as kernels never compute on single elements.
struct Half {
  uint16_t bits;
};
struct Bfloat16 {
  uint16_t bits;
};

// A call site, captured by the default argument `emulation::Site site = emulation::Site::here()`.
struct Site {
  const char* file;
  int line;
  static constexpr Site here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return {file, line};
  }
};

// The shared address of the first byte of dynamic shared memory. Not 0, and above any block's
// shared memory size, so that a byte offset passed where a shared address is expected falls
// outside shared memory and is reported (on the GPU, too, the window need not start at 0).
inline constexpr uint32_t kSharedBase = 1u << 20;

// copyAsyncWait<pending>: retires the calling thread's oldest committed cp.async groups until at
// most `pending` remain.
void retireCopyGroups(int pending);

// wgmmaSS: queues one wgmma of the calling thread (run by retireWgmmaGroups); wgmmaWait<pending>.
void issueWgmma(float* d, int n, bool transposeB, uint64_t descA, uint64_t descB, bool accumulate, bool bf16,
                Site site);
void retireWgmmaGroups(int pending, Site site);
// wgmmaRS: the same with A from the registers `a` (gathered from the warp's lanes at the issue).
void issueWgmmaRegisters(float* d, int n, bool transposeB, const uint32_t (&a)[4], uint64_t descB, bool accumulate,
                         bool bf16, Site site);

}  // namespace ffpa::emulation

// In an inline namespace: kernel templates instantiated with these tags get names of their own,
// never those of the CUDA build's instances, which a program may link too (the planner's).
namespace ffpa::kernels {
inline namespace emulated {

struct HalfTag {
  using Element = emulation::Half;
};
struct Bf16Tag {
  using Element = emulation::Bfloat16;
};

// CUDA's float2, for unpackPair.
struct float2 {
  float x, y;
};

// --- platform.cuh: the calling thread's position and its block's shared memory -----------------
int threadIndex();
inline int threadIndexAtUse() { return threadIndex(); }
int blockIndexX();
int blockIndexY();
int blockIndexZ();
// 16-byte aligned; filled with 0xFF bytes (NaN in fp16 and bf16) when the block starts.
unsigned char* sharedMemory();

// --- element.cuh: conversions, round to nearest even; usable outside kernels too ---------------
uint32_t packPair(float low, float high, HalfTag);
uint32_t packPair(float low, float high, Bf16Tag);
float2 unpackPair(uint32_t bits, HalfTag);
float2 unpackPair(uint32_t bits, Bf16Tag);
uint32_t scalePair(uint32_t bits, float factor);

// --- ptx.cuh ---------------------------------------------------------------------------------
uint32_t sharedAddress(const void* pointer, emulation::Site site = emulation::Site::here());

// Queued in the thread's open group; shared memory is written only when a copyAsyncWait retires
// the group (or the thread ends), so reading too early sees the old bytes.
void copyAsync16(uint32_t shared, const void* global, bool valid,
                 emulation::Site site = emulation::Site::here());
void copyAsyncCommit();
template <int Pending>
void copyAsyncWait() {
  static_assert(Pending >= 0, "cp.async.wait_group takes a count of groups");
  emulation::retireCopyGroups(Pending);
}

void loadMatrixX4(uint32_t (&r)[4], uint32_t shared,
                  emulation::Site site = emulation::Site::here());
void loadMatrixX2(uint32_t (&r)[2], uint32_t shared,
                  emulation::Site site = emulation::Site::here());
void loadMatrixX4Trans(uint32_t (&r)[4], uint32_t shared,
                       emulation::Site site = emulation::Site::here());

// Each result is summed in double and rounded once to fp32 (and then to fp16 for mmaF16). The
// hardware adds in its own order and precision, so tests compare with a tolerance.
void mmaF32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
            HalfTag, emulation::Site site = emulation::Site::here());
void mmaF32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
            Bf16Tag, emulation::Site site = emulation::Site::here());
void mmaF16(uint32_t (&d)[2], const uint32_t (&a)[4], const uint32_t (&b)[2],
            const uint32_t (&c)[2], emulation::Site site = emulation::Site::here());

float shuffleXor(float value, int laneMask, emulation::Site site = emulation::Site::here());
bool warpAll(bool predicate, emulation::Site site = emulation::Site::here());
bool warpAny(bool predicate, emulation::Site site = emulation::Site::here());

void namedBarrier(int id, int threads, emulation::Site site = emulation::Site::here());
void rolesBarrier(int id, int threads, emulation::Site site = emulation::Site::here());
void rolesArrive(int id, int threads, emulation::Site site = emulation::Site::here());
void blockBarrier(emulation::Site site = emulation::Site::here());

// Computed in double and rounded to fp32 (more accurate than the hardware's ~2^-22), with the
// hardware's flush of subnormal inputs and results to zero.
float exp2Approx(float x);
float log2Approx(float x);
// The same operations as on the GPU (fma in single rounding, NaN converted to the integer 0).
float exp2Polynomial(float x);

void storeGlobal32(void* global, uint32_t value, emulation::Site site = emulation::Site::here());
void storeGlobalF32(float* global, float value, emulation::Site site = emulation::Site::here());

// --- sm90/ptx.cuh (Hopper) ---------------------------------------------------------------------
// mbarriers live at shared addresses (8 bytes, 8-byte aligned) and must be initialised first.
// A TMA copy is performed only when a thread waits on its mbarrier, and the bytes it will write
// count as in flight until then (wgmma reads of them are reported): a consumer that reads a tile
// before waiting reads the poison, or the previous tile.
void mbarrierInit(uint32_t barrier, int arrivals, emulation::Site site = emulation::Site::here());
void fenceBarrierInit();
void mbarrierArriveExpectTx(uint32_t barrier, uint32_t bytes, emulation::Site site = emulation::Site::here());
void mbarrierArrive(uint32_t barrier, emulation::Site site = emulation::Site::here());
void mbarrierWait(uint32_t barrier, int parity, emulation::Site site = emulation::Site::here());
void tmaLoad4d(uint32_t shared, const ffpa::sm90::TensorMapSpec* map, int c0, int c1, int c2, int c3,
               uint32_t barrier, emulation::Site site = emulation::Site::here());
// Multicast (cp.async.bulk.tensor ... .multicast::cluster): the box lands at offset `shared` of
// every block of the cluster whose rank bit is set in `ctaMask`, on the mbarrier at `barrier` there.
void tmaLoad4dMulticast(uint32_t shared, const ffpa::sm90::TensorMapSpec* map, int c0, int c1, int c2, int c3,
                        uint32_t barrier, uint16_t ctaMask, emulation::Site site = emulation::Site::here());
void fenceProxyAsync();

// Clusters (Config::clusterX): clusterRank() is the block's rank, mapShared() the cluster address
// of a shared address in the block of another rank. A storeAsyncCluster lands when the phase of
// the mbarrier it completes bytes on completes (a reader that does not wait sees the old bytes),
// or under a seeded schedule at once (a sender that does not wait for the reader to be done with
// the old bytes overwrites them); clusterSync waits for every thread of every block of the cluster.
int clusterRank();
uint32_t mapShared(uint32_t shared, int rank, emulation::Site site = emulation::Site::here());
void storeAsyncCluster(uint32_t shared, const float (&values)[4], uint32_t barrier,
                       emulation::Site site = emulation::Site::here());
void mbarrierArriveCluster(uint32_t barrier, emulation::Site site = emulation::Site::here());
void clusterSync(emulation::Site site = emulation::Site::here());

// wgmma: each thread computes its own accumulators (in double, rounded once to fp32) when its
// group is retired, from the shared memory of that moment; until then its accumulators keep their
// old values, as reading them before wgmmaWait would give on the GPU (undefined there). A wgmma
// needs a wgmmaFence since the thread's last wgmmaWait (stricter than the PTX ISA, which asks for
// one between an ordinary access of the registers a wgmma uses and that wgmma), and no thread
// may exit with one in flight.
void wgmmaFence();
void wgmmaCommit();
template <int Pending>
void wgmmaWait(emulation::Site site = emulation::Site::here()) {
  static_assert(Pending >= 0, "wgmma.wait_group takes a count of groups");
  emulation::retireWgmmaGroups(Pending, site);
}
template <int N>
void wgmmaFenceOperands(float (&)[N]) {}
template <int N>
void wgmmaFenceOperands(uint32_t (&)[N]) {}
template <int N, bool kTransposeB>
void wgmmaSS(float (&d)[N / 2], uint64_t descA, uint64_t descB, bool accumulate, HalfTag,
             emulation::Site site = emulation::Site::here()) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N: a multiple of 8 in 8..256");
  emulation::issueWgmma(d, N, kTransposeB, descA, descB, accumulate, false, site);
}
template <int N, bool kTransposeB>
void wgmmaSS(float (&d)[N / 2], uint64_t descA, uint64_t descB, bool accumulate, Bf16Tag,
             emulation::Site site = emulation::Site::here()) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N: a multiple of 8 in 8..256");
  emulation::issueWgmma(d, N, kTransposeB, descA, descB, accumulate, true, site);
}
// A from registers: the call's `a` must be the kernel's own registers (an lvalue that lives until
// the group retires), which the retirement checks are unchanged.
template <int N, bool kTransposeB>
void wgmmaRS(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t descB, bool accumulate, HalfTag,
             emulation::Site site = emulation::Site::here()) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N: a multiple of 8 in 8..256");
  emulation::issueWgmmaRegisters(d, N, kTransposeB, a, descB, accumulate, false, site);
}
template <int N, bool kTransposeB>
void wgmmaRS(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t descB, bool accumulate, Bf16Tag,
             emulation::Site site = emulation::Site::here()) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N: a multiple of 8 in 8..256");
  emulation::issueWgmmaRegisters(d, N, kTransposeB, a, descB, accumulate, true, site);
}
// The wgmma reads `a` until its group retires: a temporary would be gone by then.
template <int N, bool kTransposeB, class Tag>
void wgmmaRS(float (&d)[N / 2], const uint32_t (&&a)[4], uint64_t descB, bool accumulate, Tag) = delete;
template <int Registers>
void increaseRegisters() {
  static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256, "setmaxnreg: 24..256, step 8");
}
template <int Registers>
void decreaseRegisters() {
  static_assert(Registers % 8 == 0 && Registers >= 24 && Registers <= 256, "setmaxnreg: 24..256, step 8");
}

}  // namespace emulated
}  // namespace ffpa::kernels
