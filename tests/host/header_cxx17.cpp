// The public header compiles as strict C++17 without any CUDA header, and its declarations have
// C linkage.
#include <ffpa/ffpa.h>

#include <cstdio>
#include <type_traits>

static_assert(std::is_same_v<decltype(&ffpaGetVersion), uint32_t (*)()>, "C signature");
static_assert(std::is_same_v<decltype(&ffpaCreate), ffpaStatus_t (*)(ffpaHandle_t*)>, "C signature");
static_assert(std::is_trivially_copyable_v<ffpaDeviceDesc_t>, "plain data");
static_assert(std::is_standard_layout_v<ffpaPolicyInfo_t>, "plain data");
static_assert(sizeof(ffpaLogLevel_t) == 4, "enums are 32-bit");

int main() {
  const bool ok = ffpaGetVersion() == FFPA_VERSION && FFPA_VERSION_IS_COMPATIBLE(ffpaGetVersion());
  std::printf("[doctest] test cases: 1 | %d passed | %d failed | 0 skipped\n", ok ? 1 : 0, ok ? 0 : 1);
  return ok ? 0 : 1;
}
