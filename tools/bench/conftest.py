"""pytest of side_by_side.py: ends with the summary line every test of libffpa prints, which
tools/test-summary.py adds up."""


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    skipped = len(stats.get("skipped", []))
    terminalreporter.write_line(f"[doctest] test cases: {passed + failed + skipped} | {passed} passed | "
                                f"{failed} failed | {skipped} skipped")
