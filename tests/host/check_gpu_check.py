#!/usr/bin/env python3
"""tools/gpu-check builds a list of targets, then runs the device suite without rebuilding: every
program that suite runs must be in that list, or the suite cannot start on the GPU machine.

    check_gpu_check.py BUILD_DIR GPU_CHECK
"""
import json
import os
import re
import sys


def gpu_targets(script):
    match = re.search(r"^gpu_targets=\(([^)]*)\)", script, re.MULTILINE)
    if not match:
        sys.exit("check_gpu_check: no gpu_targets=(...) in tools/gpu-check")
    return set(match.group(1).split())


def device_programs(build_dir):
    with open(os.path.join(build_dir, "meson-info", "intro-tests.json"), encoding="utf-8") as f:
        tests = json.load(f)
    # Programs built here (under the build directory); interpreters such as python3 are not targets.
    root = os.path.realpath(build_dir) + os.sep
    return {
        test["name"]: os.path.basename(test["cmd"][0])
        for test in tests
        if "device" in test["suite"] or any(s.endswith(":device") for s in test["suite"])
        if os.path.realpath(test["cmd"][0]).startswith(root)
    }


def main():
    build_dir, script_path = sys.argv[1:3]
    with open(script_path, encoding="utf-8") as f:
        targets = gpu_targets(f.read())
    programs = device_programs(build_dir)
    if not programs:
        sys.exit("check_gpu_check: the build has no device test (was it configured with tests?)")
    missing = sorted(f"{name} ({program})" for name, program in programs.items() if program not in targets)
    for line in missing:
        print(f"check_gpu_check: the device test {line} is not built by tools/gpu-check (gpu_targets)")
    print(f"check_gpu_check: {len(programs)} device tests, {len(missing)} not covered")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
