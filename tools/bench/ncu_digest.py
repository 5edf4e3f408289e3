#!/usr/bin/env python3
"""Digest of Nsight Compute profiles: what limits each libffpa kernel, as a Markdown table.

    ncu_digest.py CASE.csv [CASE.csv ...]
    ncu_digest.py --source CASE.source.csv [...]

Each file is the raw page of one ncu report (`ncu --import R.ncu-rep --csv --page raw
--print-units base`): a header row of metric names, maybe a row of units, then a row per
profiled kernel. The file's stem names the case (e.g. hopper-fwd-d512). Printed: per kernel, the
headline rates (SM, tensor pipe, issue slots, L2, DRAM, L1/shared memory, achieved occupancy) and
the stall reasons that cost most cycles per issued instruction.

With --source, each file is the source page of a report (`ncu --import R.ncu-rep --csv --page
source --print-source sass`): a row per SASS instruction with its warp-state samples. Printed:
per kernel, the instructions where most samples found a warp waiting, and the samples per opcode
(an mbarrier wait, SYNCS.PHASECHK, versus a MEMBAR, a BAR or the wgmma wait, WARPGROUP.DEPBAR).

Metric names change between Nsight Compute versions (the tensor pipe of wgmma has been
sm__pipe_tensor_op_gmma_* and sm__pipe_tensor_*), so columns are found by pattern, and a metric
the report lacks shows as "-".
"""
import argparse
import csv
import pathlib
import re
import sys

# (heading, patterns tried in order: the first metric column matching one is shown)
HEADLINES = [
    ("SM %", [r"^sm__throughput\.avg\.pct_of_peak_sustained_elapsed$"]),
    ("tensor %", [
        r"^sm__pipe_tensor_op_gmma_cycles_active\.avg\.pct_of_peak_sustained_active$",
        r"^sm__pipe_tensor_cycles_active\.avg\.pct_of_peak_sustained_active$",
        r"^sm__pipe_tensor_op_hmma_cycles_active\.avg\.pct_of_peak_sustained_active$",
        r"^sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_(active|elapsed)$",
        r"^sm__inst_executed_pipe_tensor.*pct_of_peak_sustained_active$",
    ]),
    ("issue %", [r"^smsp__issue_active\.avg\.pct_of_peak_sustained_active$",
                 r"^sm__inst_issued\.avg\.pct_of_peak_sustained_active$"]),
    ("L2 %", [r"^lts__throughput\.avg\.pct_of_peak_sustained_elapsed$"]),
    ("DRAM %", [r"^gpu__dram_throughput\.avg\.pct_of_peak_sustained_elapsed$",
                r"^dram__throughput\.avg\.pct_of_peak_sustained_elapsed$"]),
    ("L1/shared %", [r"^l1tex__throughput\.avg\.pct_of_peak_sustained_active$"]),
    ("occupancy %", [r"^sm__warps_active\.avg\.pct_of_peak_sustained_active$"]),
]
DURATION = [r"^gpu__time_duration\.sum$"]
REGISTERS = [r"^launch__registers_per_thread$"]
# Stall reasons: cycles a warp spent stalled for the reason, per instruction issued.
STALL = re.compile(r"^smsp__average_warps?_(?:latency_)?issue_stalled_(\w+?)_per_issue_active\.ratio$")
STALL_ALT = re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+)\.ratio$")
# Older reports: the share of active warps' cycles stalled for the reason (shown with a %).
STALL_PCT = re.compile(r"^smsp__warp_issue_stalled_(\w+?)_per_warp_active\.pct$")
# Not causes: the issuing state, and being eligible while another warp issued.
NOT_A_STALL = {"selected", "not_selected"}


class ReportError(Exception):
    pass


def number(text):
    """A cell as a float (ncu may group digits with commas), or None."""
    text = (text or "").strip().replace(",", "")
    if not text or text.lower() in {"n/a", "nan"}:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def read_report(path):
    """The kernels of one raw-page CSV: a dict of metric name -> cell per kernel."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.strip() and not line.startswith("==")]
    rows = list(csv.reader(lines))
    if not rows:
        raise ReportError(f"{path}: no rows (was the kernel profiled?)")
    header = rows[0]
    if "Kernel Name" not in header:
        raise ReportError(f"{path}: no 'Kernel Name' column: not an ncu raw page")
    kernels = []
    for row in rows[1:]:
        cells = dict(zip(header, row))
        # The units row has no ID.
        if not (cells.get("ID") or "").strip():
            continue
        kernels.append(cells)
    if not kernels:
        raise ReportError(f"{path}: no profiled kernel")
    return kernels


def first_match(cells, patterns):
    for pattern in patterns:
        regex = re.compile(pattern)
        for name, value in cells.items():
            if regex.match(name) and number(value) is not None:
                return number(value)
    return None


def short_kernel_name(name):
    """'void ffpa::kernels::sm90::forwardKernel<ffpa::kernels::Bf16Tag, 512>(ffpa::...)' ->
    'sm90::forwardKernel<Bf16Tag, 512>'."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    # Drop the parameter list: the last top-level parenthesis group.
    depth = 0
    for i, ch in enumerate(name):
        if ch in "<":
            depth += 1
        elif ch in ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            name = name[:i]
            break
    name = name.replace("ffpa::kernels::", "").replace("ffpa::", "")
    return re.sub(r"\s+", " ", name)


def stalls(cells, count):
    """The `count` largest stall reasons as (reason, text), from per-instruction ratios where the
    report has them, else from percentages of active warps."""
    for patterns, unit in (((STALL, STALL_ALT), ""), ((STALL_PCT,), "%")):
        found = {}
        for name, value in cells.items():
            match = next((m for m in (p.match(name) for p in patterns) if m), None)
            if not match or match.group(1) in NOT_A_STALL:
                continue
            v = number(value)
            if v is not None and v > 0:
                found.setdefault(match.group(1), v)
        if found:
            top = sorted(found.items(), key=lambda kv: -kv[1])[:count]
            return [(reason, f"{value:.2f}{unit}") for reason, value in top]
    return []


def fmt(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f}"


def digest(paths, stall_count=4):
    head = ["case", "kernel", "ms", "regs"] + [h for h, _ in HEADLINES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    stall_lines = ["| case | kernel | stall reasons (cycles per issued instruction) |", "|---|---|---|"]
    for path in paths:
        case = pathlib.Path(path).stem
        for cells in read_report(path):
            kernel = short_kernel_name(cells.get("Kernel Name", "?"))
            duration = first_match(cells, DURATION)
            # --print-units base: nanoseconds.
            ms = None if duration is None else duration / 1e6
            registers = first_match(cells, REGISTERS)
            row = [case, f"`{kernel}`", fmt(ms, 3), fmt(registers, 0)]
            row += [fmt(first_match(cells, patterns)) for _, patterns in HEADLINES]
            lines.append("| " + " | ".join(row) + " |")
            top = ", ".join(f"{reason} {value}" for reason, value in stalls(cells, stall_count)) or "-"
            stall_lines.append(f"| {case} | `{kernel}` | {top} |")
    return "\n".join(lines) + "\n\n" + "\n".join(stall_lines) + "\n"


# Columns of the source page, by pattern: the SASS text, its address, and the warp-state samples
# (all samples first: a warp waiting at an instruction is sampled there whether or not it issued).
SOURCE_TEXT = [r"^Source$", r"^SASS$", r"Source"]
SOURCE_ADDRESS = [r"^#?\s*Address$", r"Address"]
SOURCE_SAMPLES = [r"Warp Stall Sampling \(All", r"Sampling.*All", r"Stall Sampl", r"Sampl"]


def find_column(header, patterns):
    for pattern in patterns:
        regex = re.compile(pattern, re.IGNORECASE)
        for index, name in enumerate(header):
            if regex.search(name.strip()):
                return index
    return None


def read_source_page(path):
    """The kernels of one source-page CSV: (kernel name, [(address, sass, samples)]), in address
    order. A "Kernel Name" row names the next kernel; a row with an Address and a Source column
    is its header; lines that are not CSV rows (ncu's own) are skipped."""
    kernels = []
    name, columns = None, None
    with open(path, newline="") as f:
        for line in f:
            if not line.strip():
                continue
            if not line.startswith('"'):
                continue
            row = next(csv.reader([line]))
            if row[0].strip() == "Kernel Name" and len(row) > 1:
                name = short_kernel_name(row[1])
                continue
            text, address = find_column(row, SOURCE_TEXT), find_column(row, SOURCE_ADDRESS)
            if text is not None and address is not None and number(row[address]) is None:
                samples = find_column(row, SOURCE_SAMPLES)
                if samples is None:
                    raise ReportError(f"{path}: a source page without warp-state samples")
                columns = (address, text, samples)
                kernels.append((name or f"kernel {len(kernels) + 1}", []))
                name = None
                continue
            if columns and len(row) > max(columns):
                count = number(row[columns[2]])
                if count is not None:
                    kernels[-1][1].append((row[columns[0]].strip(), row[columns[1]].strip(), count))
    if not kernels:
        raise ReportError(f"{path}: no source page (no header with Address and Source)")
    return kernels


def opcode(sass):
    """'@!P0 SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3 ;' -> 'SYNCS.PHASECHK.TRANS64.TRYWAIT'."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].rstrip(";") if words else "?"


# An mbarrier wait is a try-wait and a branch to its retry loop: a warp that waits is sampled at
# the branch, which says nothing by itself. Such a branch is charged to the wait before it.
MBARRIER_WAIT = "SYNCS.PHASECHK"
WAIT_LOOKBACK = 4


def waited_on(rows, index):
    """The try-wait that the branch at rows[index] retries (the first branch at most
    WAIT_LOOKBACK instructions after it), or None."""
    if opcode(rows[index][1]) != "BRA":
        return None
    for back in range(index - 1, max(-1, index - 1 - WAIT_LOOKBACK), -1):
        if opcode(rows[back][1]).startswith(MBARRIER_WAIT):
            return rows[back][1]
        if opcode(rows[back][1]) == "BRA":  # the wait's own branch came first
            return None
    return None


def source_digest(paths, top=12):
    out = []
    for path in paths:
        case = pathlib.Path(path).name.split(".")[0]
        for kernel, rows in read_source_page(path):
            total = sum(count for _, _, count in rows)
            out.append(f"### {case}: `{kernel}` ({total:.0f} samples)\n")
            if total <= 0:
                out.append("no samples\n")
                continue
            by_opcode = {}
            for index, (_, sass, count) in enumerate(rows):
                key = "mbarrier wait (try-wait and its retry branch)" if (
                    waited_on(rows, index) or opcode(sass).startswith(MBARRIER_WAIT)) else opcode(sass)
                by_opcode[key] = by_opcode.get(key, 0.0) + count
            out.append("| opcode | samples % |\n|---|---:|")
            for name, count in sorted(by_opcode.items(), key=lambda kv: -kv[1])[:top]:
                out.append(f"| {name} | {100 * count / total:.1f} |")
            out.append("\n| address | instruction | samples % |\n|---|---|---:|")
            ranked = sorted(range(len(rows)), key=lambda i: -rows[i][2])[:top]
            for index in ranked:
                address, sass, count = rows[index]
                wait = waited_on(rows, index)
                shown = f"`{sass[:70]}`" + (f" (retries `{wait[:60]}`)" if wait else "")
                out.append(f"| {address} | {shown} | {100 * count / total:.1f} |")
            out.append("")
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="+", help="raw-page CSV files, one per case (source pages with --source)")
    parser.add_argument("--stalls", type=int, default=4, help="stall reasons per kernel (default 4)")
    parser.add_argument("--source", action="store_true", help="the files are source pages: samples per instruction")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(source_digest(args.reports) if args.source else digest(args.reports, args.stalls))
    except (OSError, ReportError) as error:
        print(f"ncu_digest.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
