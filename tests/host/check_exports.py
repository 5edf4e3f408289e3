#!/usr/bin/env python3
"""Checks the exported interface of libffpa.so: only ffpa* symbols, every function the header
declares, under the version node named after the SONAME. Prints a doctest-style summary line."""
import re
import subprocess
import sys

from check_report import report


def dynamic_symbols(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True, capture_output=True,
                         text=True).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] != "A":  # "A" is the version node itself
            symbols.append(parts[2])
    return symbols


def soname(library):
    out = subprocess.run(["readelf", "-d", library], check=True, capture_output=True, text=True).stdout
    found = re.search(r"Library soname: \[([^\]]+)\]", out)
    return found.group(1) if found else None


def main(library, header):
    declared = set(re.findall(r"FFPA_API\s+[^;(]*?\b(ffpa\w+)\s*\(", open(header).read()))
    symbols = dynamic_symbols(library)
    names = {s.split("@")[0] for s in symbols}
    checks = {
        "only ffpa* symbols are exported": [s for s in names if not s.startswith("ffpa")],
        "every declared function is exported": sorted(declared - names),
        "nothing undeclared is exported": sorted(names - declared),
        "every symbol is versioned libffpa.so.0": [s for s in symbols if not s.endswith("@@libffpa.so.0")],
        "the SONAME is libffpa.so.0": [] if soname(library) == "libffpa.so.0" else [soname(library)],
        "the header declares the API": [] if len(declared) >= 25 else [f"only {len(declared)} found"],
    }
    return report(checks, limit=20)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
