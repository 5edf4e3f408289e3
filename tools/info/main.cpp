// ffpa-info: the version and build of the loaded libffpa, the device a handle would use, and the
// policy knobs. Uses the public API only, so it shows exactly what an application would see.
#include "knob_table.h"
#include "library_call.h"

#include <ffpa/ffpa.h>

#include <cstring>
#include <iostream>
#include <string>

namespace {

constexpr int kExitOk = 0;
constexpr int kExitLibraryError = 1;
constexpr int kExitUsage = 2;

constexpr const char* kUsage =
    "usage: ffpa-info [--knobs | --knobs-rst | --help]\n"
    "\n"
    "Prints the libffpa version and build configuration, the CUDA device a handle is bound to,\n"
    "and the policy knobs (type, bounds, default, environment variables).\n"
    "\n"
    "  --knobs      print only the knob table, as plain text\n"
    "  --knobs-rst  print only the knob table, as a reStructuredText list-table\n"
    "  --help       print this help\n"
    "\n"
    "Exit status: 0 on success (also without a usable GPU), 1 when libffpa reports an error\n"
    "(for example a malformed environment variable), 2 on bad usage.\n";

enum class Mode { Everything, KnobsText, KnobsRst, Help, BadUsage };

Mode parseArguments(int argc, char** argv) {
  if (argc == 1) return Mode::Everything;
  if (argc > 2) return Mode::BadUsage;
  if (std::strcmp(argv[1], "--knobs") == 0) return Mode::KnobsText;
  if (std::strcmp(argv[1], "--knobs-rst") == 0) return Mode::KnobsRst;
  if (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) return Mode::Help;
  return Mode::BadUsage;
}

std::string versionText(uint32_t version) {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

void printVersion(std::ostream& out) {
  const uint32_t runtime = ffpaGetVersion();
  out << "libffpa " << versionText(runtime) << " (this program was built with the header of "
      << versionText(FFPA_VERSION) << "; "
      << (FFPA_VERSION_IS_COMPATIBLE(runtime) ? "compatible" : "NOT compatible") << ")\n"
      << "build: " << ffpaGetBuildInfo() << '\n';
}

std::string kibibytes(int64_t bytes) { return std::to_string(bytes / 1024) + " KiB"; }

std::string gibibytes(int64_t bytes) {
  const int64_t tenths = bytes * 10 / (int64_t{1} << 30);
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " GiB";
}

void printDeviceDesc(std::ostream& out, const ffpaDeviceDesc_t& device) {
  // Bounded by the array, whatever the library wrote into it.
  const std::string name(device.name, strnlen(device.name, sizeof device.name));
  out << "device: " << name << " (CUDA device " << device.ordinal << ")\n"
      << "  compute capability  " << device.smVersion / 10 << "." << device.smVersion % 10
      << " (sm_" << device.smVersion << ")\n"
      << "  multiprocessors     " << device.smCount << '\n'
      << "  shared memory       " << kibibytes(device.sharedMemPerBlockOptin)
      << " per block (opt-in), " << kibibytes(device.sharedMemPerSm) << " per multiprocessor\n"
      << "  global memory       " << gibibytes(device.globalMemBytes) << '\n';
}

// A machine without a (supported) GPU is a normal answer for this program, not a failure.
bool meansNoUsableDevice(ffpaStatus_t status) {
  return FFPA_STATUS_CATEGORY(status) == FFPA_STATUS_NOT_INITIALIZED ||
         status == FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH;
}

// Prints the device of a new handle. Returns false when handle creation failed for a reason
// other than the lack of a usable device (for example a malformed environment variable).
bool printDevice(std::ostream& out) {
  ffpaHandle_t handle = nullptr;
  const ffpaStatus_t created = ffpaCreate(&handle);
  if (created != FFPA_STATUS_SUCCESS) {
    const bool expected = meansNoUsableDevice(created);
    out << "device: " << (expected ? "none usable" : "handle creation failed") << " ("
        << ffpa_info::describeFailure(created) << ")\n";
    return expected;
  }

  ffpaDeviceDesc_t device{};
  device.structSize = sizeof device;
  const ffpaStatus_t described = ffpaGetDeviceDesc(handle, &device);
  if (described == FFPA_STATUS_SUCCESS) {
    printDeviceDesc(out, device);
  } else {
    out << "device: unknown (ffpaGetDeviceDesc: " << ffpa_info::describeFailure(described) << ")\n";
  }
  // Destroy even after a failed query, and report both failures.
  const ffpaStatus_t destroyed = ffpaDestroy(handle);
  if (destroyed != FFPA_STATUS_SUCCESS) {
    std::cerr << "ffpa-info: ffpaDestroy: " << ffpa_info::describeFailure(destroyed) << '\n';
  }
  return described == FFPA_STATUS_SUCCESS && destroyed == FFPA_STATUS_SUCCESS;
}

int run(Mode mode) {
  switch (mode) {
    case Mode::KnobsText:
      ffpa_info::writeKnobsText(std::cout, ffpa_info::readPolicyInfos());
      return kExitOk;
    case Mode::KnobsRst:
      ffpa_info::writeKnobsRst(std::cout, ffpa_info::readPolicyInfos());
      return kExitOk;
    case Mode::Everything: {
      printVersion(std::cout);
      const bool deviceOk = printDevice(std::cout);
      std::cout << '\n';
      ffpa_info::writeKnobsText(std::cout, ffpa_info::readPolicyInfos());
      return deviceOk ? kExitOk : kExitLibraryError;
    }
    case Mode::Help:
      std::cout << kUsage;
      return kExitOk;
    case Mode::BadUsage:
      break;
  }
  std::cerr << "ffpa-info: expected no argument or one of --knobs, --knobs-rst, --help\n\n"
            << kUsage;
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  int status = kExitLibraryError;
  try {
    status = run(parseArguments(argc, argv));
  } catch (const std::exception& error) {  // LibraryCallError, or out of memory
    std::cerr << "ffpa-info: " << error.what() << '\n';
    return kExitLibraryError;
  }
  // Output captured into a file (the docs build does that) must not be silently truncated.
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "ffpa-info: could not write the output\n";
    return kExitLibraryError;
  }
  return status;
}
