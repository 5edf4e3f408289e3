"""The report of the Python host checks: one line per check, then doctest's summary line, which
tools/test-summary.py adds up with the other suites."""


def report(checks, limit=None):
    """Prints each check (name -> the problems found, empty when it passed); returns the exit status."""
    failed = 0
    for name, problems in checks.items():
        if not problems:
            print(f"ok: {name}")
            continue
        failed += 1
        print(f"FAILED: {name}")
        for problem in problems[:limit]:
            print(f"    {problem}")
    print(f"[doctest] test cases: {len(checks)} | {len(checks) - failed} passed | {failed} failed | 0 skipped")
    return 1 if failed else 0
