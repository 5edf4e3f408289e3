// ffpa-info: the version and build of the loaded libffpa, the device a handle would use, and the
// policy knobs. Uses the public API only, so it shows exactly what an application would see.
#include "knob_table.h"
#include "library_call.h"
#include "plan_report.h"
#include "policy_report.h"
#include "session.h"

#include <ffpa/ffpa.h>

#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace {

constexpr int kExitOk = 0;
constexpr int kExitLibraryError = 1;
constexpr int kExitUsage = 2;

constexpr const char* kUsage =
    "usage: ffpa-info [--device NAME] [--policy | --plan PROBLEM | --knobs | --knobs-rst | --help]\n"
    "\n"
    "Without an option: the libffpa version and build configuration, the CUDA device a handle is\n"
    "bound to, and the handle's effective policy (each knob's value and where it comes from:\n"
    "default, environment variable or setter).\n"
    "\n"
    "  --policy        print only the effective policy\n"
    "  --plan PROBLEM  explain which kernel serves a problem, forward and backward, and why;\n"
    "                  PROBLEM: %s\n"
    "  --device NAME   plan for a described device instead of the current GPU (also the\n"
    "                  fallback, sm90, without a usable GPU): %s\n"
    "  --knobs         print only the knob table (type, bounds, default, environment variables)\n"
    "  --knobs-rst     the knob table as a reStructuredText list-table\n"
    "  --help          print this help\n"
    "\n"
    "Exit status: 0 on success (also without a usable GPU), 1 when libffpa reports an error\n"
    "(for example a malformed environment variable), 2 on bad usage.\n";

enum class Mode { Everything, Policy, Plan, KnobsText, KnobsRst, Help };

struct Options {
  Mode mode = Mode::Everything;
  std::string problem;
  std::optional<ffpaDeviceDesc_t> device;
};

std::string usage() {
  std::string text(kUsage);
  for (const char* part : {ffpa_info::planSyntax(), ffpa_info::describedDeviceNames()}) {
    const size_t at = text.find("%s");
    text.replace(at, 2, part);
  }
  return text;
}

// Throws std::invalid_argument with what is wrong.
Options parseArguments(int argc, char** argv) {
  Options options;
  bool modeGiven = false;
  const auto setMode = [&](Mode mode) {
    if (modeGiven) throw std::invalid_argument("give at most one of --policy, --plan, --knobs, --knobs-rst, --help");
    options.mode = mode;
    modeGiven = true;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--policy") setMode(Mode::Policy);
    else if (arg == "--knobs") setMode(Mode::KnobsText);
    else if (arg == "--knobs-rst") setMode(Mode::KnobsRst);
    else if (arg == "--help" || arg == "-h") setMode(Mode::Help);
    else if (arg == "--plan") {
      setMode(Mode::Plan);
      options.problem = value();
    } else if (arg == "--device") {
      const std::string name = value();
      options.device = ffpa_info::describedDevice(name);
      if (!options.device) {
        throw std::invalid_argument("--device " + name + ": expected one of " + ffpa_info::describedDeviceNames());
      }
    } else {
      throw std::invalid_argument("unknown argument \"" + arg + "\"");
    }
  }
  return options;
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

// The device the session's handle plans for, and why it is a described one when it is.
bool printDevice(std::ostream& out, const ffpa_info::Session& session) {
  ffpaDeviceDesc_t device{};
  device.structSize = sizeof device;
  ffpa_info::check(ffpaGetDeviceDesc(session.handle(), &device), "ffpaGetDeviceDesc");
  printDeviceDesc(out, device);
  if (!session.whyDescribed().empty()) {
    out << "  (no usable GPU: " << session.whyDescribed() << ")\n";
  }
  return true;
}

int run(const Options& options) {
  switch (options.mode) {
    case Mode::KnobsText:
      ffpa_info::writeKnobsText(std::cout, ffpa_info::readPolicyInfos());
      return kExitOk;
    case Mode::KnobsRst:
      ffpa_info::writeKnobsRst(std::cout, ffpa_info::readPolicyInfos());
      return kExitOk;
    case Mode::Help:
      std::cout << usage();
      return kExitOk;
    case Mode::Policy:
      ffpa_info::writeEffectivePolicy(std::cout, ffpa_info::Session(options.device).handle());
      return kExitOk;
    case Mode::Plan: {
      const ffpa_info::Session session(options.device);
      std::ostringstream plans;  // first, so that a malformed problem is reported alone
      ffpa_info::writePlans(plans, session.handle(), options.problem);
      printDevice(std::cout, session);
      std::cout << plans.str();
      return kExitOk;
    }
    case Mode::Everything: {
      printVersion(std::cout);
      const ffpa_info::Session session(options.device);
      printDevice(std::cout, session);
      std::cout << '\n';
      ffpa_info::writeEffectivePolicy(std::cout, session.handle());
      std::cout << "\n(ffpa-info --knobs lists every knob with its bounds and environment variables;\n"
                   " ffpa-info --plan b=1,hq=32,nq=8192,d=512 explains which kernel serves a problem)\n";
      return kExitOk;
    }
  }
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parseArguments(argc, argv);
  } catch (const std::invalid_argument& error) {
    std::cerr << "ffpa-info: " << error.what() << "\n\n" << usage();
    return kExitUsage;
  }
  int status = kExitLibraryError;
  try {
    status = run(options);
  } catch (const std::invalid_argument& error) {  // a malformed --plan problem
    std::cerr << "ffpa-info: --plan: " << error.what() << "\n" << ffpa_info::planSyntax() << '\n';
    return kExitUsage;
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
