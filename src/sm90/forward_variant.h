// The sm90 forward kernel (TMA + wgmma, kernels/sm90) as a kernel variant of the registry. With
// FFPA_POLICY_HOPPER_KERNELS on, on compute capability 9.0 it comes before the mma.sync kernels
// for the problems it serves, unless the caller set a knob only those kernels have (then they
// run, honouring it).
#pragma once

#include "core/kernel_registry.h"
#include "sm90/forward_params.h"

#include <ffpa/ffpa.h>

#include <string>

namespace ffpa::sm90 {

constexpr const char* kForwardVariantName = "sm90.forward";

// "sm90.forward.bf16.d512": the variant, the element type and the instance's d_v; with K and V
// shared by two CTAs, "sm90.forward.bf16.d512.kv2"; with the consumers' split of the columns that
// is not the default for its cluster size (kernels/sm90/forward_params.h),
// "sm90.forward.bf16.d512.skewed" or "sm90.forward.bf16.d1024.even"; the row split of d_v up to
// 256 (rowSplit), "sm90.forward.bf16.d128.row_split", and with its KV tiles of 128 keys (tileKeys),
// "sm90.forward.bf16.d128.row_split.bc128".
std::string instanceName(ffpaDataType_t dtype, int instanceHeadDimV, int kvSharing, int split, bool rowSplit = false,
                         int tileKeys = kKeys);

// Whether this build compiled the sm_90a kernels (build_arch contains 90a).
bool compiled();

// The first knob of seed 000 that shapes the mma.sync kernels only and that `policy` sets to other
// than its default, as "NAME=value is a knob of the mma.sync kernels"; empty when none is. The
// sm90 kernels then step aside, so that the knob is honoured.
std::string mmaSyncKnobSet(const Policy& policy);

void registerForwardVariant(KernelRegistry& registry);

}  // namespace ffpa::sm90
