#!/usr/bin/env python3
"""Adds up the test cases of one or more `meson test` runs (their meson-logs/testlog.json).

    test-summary.py [--extra-failures N] [LABEL=]testlog.json...

Every suite of libffpa prints doctest's summary line ("[doctest] test cases: T | P passed | F failed
| S skipped"); device suites skipped for lack of a GPU report their cases as skipped. A test
without such a line counts as one case; a test that failed (crash, timeout, non-zero exit) counts at
least one failure even if its summary claims none. --extra-failures adds failures found outside
the logs (a stage whose build failed). The last line printed is "N passed, N failed, N skipped";
the exit status is 1 when anything failed or nothing ran."""
import argparse
import json
import re
import sys

SUMMARY = re.compile(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed\s*\|\s*(\d+) skipped")


def count(test):
    output = (test.get("stdout") or "") + (test.get("stderr") or "")
    summaries = SUMMARY.findall(output)
    result = test.get("result", "ERROR")
    if summaries:
        _, passed, failed, skipped = (int(x) for x in summaries[-1])
    else:
        passed, failed, skipped = {"OK": (1, 0, 0), "SKIP": (0, 0, 1)}.get(result, (0, 1, 0))
    if result not in ("OK", "SKIP", "EXPECTEDFAIL") and failed == 0:
        failed = 1
    return passed, failed, skipped, result


def load(argument):
    label, _, path = argument.rpartition("=")
    with open(path) as log:
        tests = [json.loads(line) for line in log if line.strip()]
    return [((label + ": " if label else "") + t["name"], t) for t in tests]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra-failures", type=int, default=0)
    parser.add_argument("logs", nargs="*")
    args = parser.parse_args()
    rows = [row for argument in args.logs for row in load(argument)]
    totals = [0, args.extra_failures, 0]
    width = max([len(name) for name, _ in rows] + [4])
    print(f"{'test':<{width}} {'result':<8} {'passed':>7} {'failed':>7} {'skipped':>8}")
    for name, test in rows:
        passed, failed, skipped, result = count(test)
        print(f"{name:<{width}} {result:<8} {passed:>7} {failed:>7} {skipped:>8}")
        for i, n in enumerate((passed, failed, skipped)):
            totals[i] += n
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
    return 1 if totals[1] or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
