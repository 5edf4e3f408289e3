#!/usr/bin/env python3
"""Checks that the public header keeps the ABI recorded for its major version.

    check_abi.py HEADER BASELINE_DIR [--cc "CC ARGS..."] [--update]

The ABI of ffpa.h is written as one fact per line: the type of every function and typedef, the
value of every enumerator, and the size, alignment and field offsets of every structure, as the
C compiler lays them out for this target (clang's AST names the declarations; a small C program
compiled with CC prints the numbers). BASELINE_DIR/libffpa.so.MAJOR.abi holds the facts of the
release the SONAME promises to stay compatible with. Within a major version:

- every fact of the baseline must still hold: nothing removed, renamed, renumbered, retyped or
  moved, since programs built against the older header would call or read it wrongly;
- a structure that starts with `structSize` may grow at its end (the library reads only the
  bytes the caller declares), so its size may increase, and fields may be added after the old
  ones;
- anything else new (functions, enumerators, typedefs, structures) is an addition, which a minor
  version allows: listed, not a failure.

--update writes the current facts as the baseline (for a release, or a new major version).
Prints a doctest-style summary line; exits 77 when clang is not installed.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from check_report import report


def ast_declarations(header):
    """The header's top-level declarations named ffpa*, from clang's JSON AST."""
    out = subprocess.run(["clang", "-x", "c", "-std=c11", "-fsyntax-only", "-Xclang", "-ast-dump=json", header],
                         check=True, capture_output=True, text=True).stdout
    return [node for node in json.loads(out)["inner"] if node.get("name", "").startswith("ffpa")]


def collect(declarations):
    """Facts known from the AST alone, and what the C program must measure."""
    facts = set()
    enumerators = []  # (enum tag, enumerator)
    records = {}  # tag -> [field names]
    sized_typedefs = []
    for node in declarations:
        kind, name = node["kind"], node["name"]
        if kind == "FunctionDecl":
            facts.add(f"function {name}: {node['type']['qualType']}")
        elif kind == "TypedefDecl":
            facts.add(f"typedef {name}: {node['type']['qualType']}")
            sized_typedefs.append(name)
        elif kind == "EnumDecl":
            enumerators += [(name, c["name"]) for c in node.get("inner", []) if c["kind"] == "EnumConstantDecl"]
        elif kind == "RecordDecl" and node.get("completeDefinition"):
            fields = [f for f in node.get("inner", []) if f["kind"] == "FieldDecl"]
            records[name] = [f["name"] for f in fields]
            for field in fields:
                facts.add(f"struct {name}.{field['name']}: {field['type']['qualType']}")
    return facts, enumerators, records, sized_typedefs


def measure(header, cc, enumerators, records, sized_typedefs):
    """Enumerator values, sizes, alignments and offsets as CC lays them out for this target."""
    lines = ['#include <stdalign.h>', '#include <stddef.h>', '#include <stdio.h>',
             f'#include "{os.path.abspath(header)}"', 'int main(void) {']
    for tag, name in enumerators:
        lines.append(f'  printf("enum {tag}.{name} = %lld\\n", (long long){name});')
    for name in sized_typedefs:
        lines.append(f'  printf("sizeof {name} = %zu, alignof = %zu\\n", sizeof({name}), alignof({name}));')
    for tag, fields in records.items():
        lines.append(f'  printf("struct {tag} size = %zu, alignof = %zu\\n", sizeof(struct {tag}), '
                     f'alignof(struct {tag}));')
        for field in fields:
            lines.append(f'  printf("struct {tag}.{field} offset = %zu\\n", offsetof(struct {tag}, {field}));')
    lines += ['  return 0;', '}']
    with tempfile.TemporaryDirectory() as work:
        source, program = os.path.join(work, "abi.c"), os.path.join(work, "abi")
        with open(source, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        subprocess.run(cc + ["-std=c11", "-o", program, source], check=True)
        return set(subprocess.run([program], check=True, capture_output=True, text=True).stdout.splitlines())


def current_facts(header, cc):
    facts, enumerators, records, sized_typedefs = collect(ast_declarations(header))
    return facts | measure(header, cc, enumerators, records, sized_typedefs), records


def major_version(header):
    found = re.search(r"#define FFPA_VERSION_MAJOR (\d+)", open(header, encoding="utf-8").read())
    return int(found.group(1))


def split_fact(fact):
    """(subject, value): "function ffpaCreate" and its type, "enum ....NAME" and its value..."""
    separator = " = " if " = " in fact else ": "
    subject, value = fact.split(separator, 1)
    return subject, value


def grew(subject, old, new, growable, typedef_tags):
    """Whether a changed size is a growable structure grown at its end (same alignment)."""
    words = subject.split()
    if words[0] == "struct" and words[-1] == "size":
        tag = words[1]
    elif words[0] == "sizeof":
        tag = typedef_tags.get(words[1])
    else:
        return False
    old_size, old_rest = old.split(", ", 1)
    new_size, new_rest = new.split(", ", 1)
    return tag in growable and old_rest == new_rest and int(new_size) >= int(old_size)


def compare(baseline, current, records):
    """Baseline facts that no longer hold (a growable structure may grow), and additions."""
    old = dict(split_fact(fact) for fact in baseline)
    new = dict(split_fact(fact) for fact in current)
    typedef_tags = {name.split()[1]: value.split()[1] for name, value in new.items()
                    if name.startswith("typedef ") and value.startswith("struct ") and "*" not in value}
    growable = {tag for tag, fields in records.items() if fields and fields[0] == "structSize"}
    broken = []
    for subject in sorted(old):
        if subject not in new:
            broken.append(f"removed: {subject} (was {old[subject]})")
        elif new[subject] != old[subject] and not grew(subject, old[subject], new[subject], growable,
                                                      typedef_tags):
            broken.append(f"changed: {subject}: was {old[subject]}, now {new[subject]}")
    added = [f"{subject}: {new[subject]}" for subject in sorted(set(new) - set(old))]
    return broken, added


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("header")
    parser.add_argument("baseline_dir")
    parser.add_argument("--cc", default=os.environ.get("CC", "cc"), help="the C compiler command")
    parser.add_argument("--update", action="store_true", help="write the current facts as the baseline")
    args = parser.parse_args()
    if shutil.which("clang") is None:
        print("clang is not installed: the header's declarations cannot be listed")
        print("[doctest] test cases: 1 | 0 passed | 0 failed | 1 skipped")
        return 77
    baseline_path = os.path.join(args.baseline_dir, f"libffpa.so.{major_version(args.header)}.abi")
    try:
        current, records = current_facts(args.header, shlex.split(args.cc))
    except subprocess.CalledProcessError as error:
        return report({"the header's declarations can be listed and measured":
                       [f"{shlex.join(error.cmd)} failed", error.stderr or ""]})
    if args.update:
        with open(baseline_path, "w", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in sorted(current)))
        print(f"wrote {len(current)} facts to {baseline_path}")
        return 0

    checks = {}
    if not os.path.exists(baseline_path):
        checks[f"a baseline exists for this major version ({baseline_path}; --update writes it)"] = ["missing"]
    else:
        with open(baseline_path, encoding="utf-8") as baseline_file:
            baseline = {line.rstrip("\n") for line in baseline_file if line.strip()}
        broken, added = compare(baseline, current, records)
        checks["every fact of the baseline still holds (or a growable structure grew)"] = broken
        checks["the header yields facts to compare"] = [] if len(current) >= 100 else [f"only {len(current)}"]
        for fact in added:
            print(f"added (compatible within a major version): {fact}")
    return report(checks)


if __name__ == "__main__":
    sys.exit(main())
