#!/usr/bin/env python3
"""Runs an nvcc command line with ptxas' verbose report and keeps that report in a file.

    nvcc_report.py REPORT -- NVCC ARGS...

The report (registers, stack frame, spills of every kernel, per architecture) goes to REPORT, where
tools/kernel-report reads it; the build log shows only what is not part of it (errors, warnings).
"""
import subprocess
import sys


def is_report_line(line: str) -> bool:
    return line.startswith("ptxas info") or line.startswith("    ") and (
        "stack frame" in line or "spill" in line)


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    report, command = sys.argv[1], sys.argv[3:] + ["-Xptxas=-v"]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(report, "w", encoding="utf-8") as out:
        out.write(result.stdout)
    for line in result.stdout.splitlines():
        if not is_report_line(line):
            print(line, file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
