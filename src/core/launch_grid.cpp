#include "core/launch_grid.h"

#include "core/error.h"

namespace ffpa {
namespace {
constexpr int64_t kMaxGridYz = 65535;
}  // namespace

std::optional<std::string> chooseGrid(const Policy& policy, int64_t tiles, int64_t batch, int64_t heads,
                                      bool& dnhb, uint32_t (&grid)[3], std::string& notes) {
  dnhb = policy.flag(FFPA_POLICY_LAUNCH_GRID_DNHB);
  const bool flatFits = batch * heads <= kMaxGridYz;
  const bool dnhbFits = batch <= kMaxGridYz && heads <= kMaxGridYz;
  const bool knobAtDefault = policy.source(FFPA_POLICY_LAUNCH_GRID_DNHB) == FFPA_POLICY_SOURCE_DEFAULT;
  if (!dnhb && !flatFits && dnhbFits && knobAtDefault) {
    dnhb = true;
    notes += " grid=dnhb(B*H>65535)";
  }
  if (dnhb ? !dnhbFits : !flatFits) {
    return cat("grid layout ", dnhb ? "(N/Br, H, B) needs B and H" : "(N/Br, B*H) needs B*H",
               " <= 65535 (B=", batch, ", H=", heads, "); change FFPA_POLICY_LAUNCH_GRID_DNHB");
  }
  gridExtents(tiles, batch, heads, dnhb, grid);
  return std::nullopt;
}

void gridExtents(int64_t tiles, int64_t batch, int64_t heads, bool dnhb, uint32_t (&grid)[3]) {
  grid[0] = static_cast<uint32_t>(tiles);
  grid[1] = static_cast<uint32_t>(dnhb ? heads : batch * heads);
  grid[2] = static_cast<uint32_t>(dnhb ? batch : 1);
}

}  // namespace ffpa
