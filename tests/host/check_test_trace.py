#!/usr/bin/env python3
"""FFPA_TEST_TRACE: a test suite's main() appends the start and the end of each case it runs to the
named file, and writes nothing anywhere without the variable.

    check_test_trace.py TEST_EXECUTABLE "CASE NAME"
"""
import os
import re
import subprocess
import sys
import tempfile


def run(executable, case, env, cwd=None):
    return subprocess.run([executable, f"--test-case={case}"], env=env, cwd=cwd, capture_output=True, text=True)


def main():
    executable, case = os.path.abspath(sys.argv[1]), sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        trace = os.path.join(scratch, "trace.txt")
        env = dict(os.environ, FFPA_TEST_TRACE=trace)
        for attempt in range(2):
            result = run(executable, case, env)
            if result.returncode != 0:
                failures.append(f"run {attempt + 1}: exit {result.returncode}\n{result.stdout}{result.stderr}")
        lines = open(trace).read().splitlines() if os.path.exists(trace) else []
        # Two runs, appended: start and end of the one case each time.
        pattern = [f"start {case}", re.compile(rf"end {re.escape(case)}: \d+\.\d{{3}} s$")] * 2
        if len(lines) != len(pattern) or not all(
                line == want if isinstance(want, str) else want.match(line) for line, want in zip(lines, pattern)):
            failures.append(f"the trace is not two runs of start/end of '{case}':\n" + "\n".join(lines))

        quiet = os.path.join(scratch, "quiet")
        os.mkdir(quiet)
        env = {k: v for k, v in os.environ.items() if k != "FFPA_TEST_TRACE"}
        result = run(executable, case, env, cwd=quiet)
        if result.returncode != 0 or os.listdir(quiet):
            failures.append(f"without FFPA_TEST_TRACE: exit {result.returncode}, files {os.listdir(quiet)}")
    for failure in failures:
        print(f"check_test_trace: {failure}")
    print(f"check_test_trace: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
