// The grid layouts of the fast kernels: one CTA per (row tile, batch x head), as (tiles, B*H) or,
// with FFPA_POLICY_LAUNCH_GRID_DNHB, (tiles, H, B).
#pragma once

#include "core/policy.h"

#include <cstdint>
#include <optional>
#include <string>

namespace ffpa {

// The extents of grid (tiles, B*H), or (tiles, H, B) when `dnhb`.
void gridExtents(int64_t tiles, int64_t batch, int64_t heads, bool dnhb, uint32_t (&grid)[3]);

// The grid (tiles, B*H) or (tiles, H, B), following FFPA_POLICY_LAUNCH_GRID_DNHB; at its default
// the knob gives way when B*H exceeds the y extent (noted in `notes`). `grid` receives the extents;
// the result is a refusal when neither layout fits.
std::optional<std::string> chooseGrid(const Policy& policy, int64_t tiles, int64_t batch, int64_t heads,
                                      bool& dnhb, uint32_t (&grid)[3], std::string& notes);

}  // namespace ffpa
