#!/usr/bin/env python3
"""The plots of docs/benchmarks.rst, drawn from the page's own tables.

    python3 tools/bench/docs_figures.py PAGE OUTDIR

Each figure in FIGURES names a ``list-table`` of PAGE (by its ``:name:`` option), the column that
gives the x axis and the columns drawn as lines; OUTDIR/<figure>.png is written for each. The
tables are the one record of what was measured, so a plot cannot drift from its table: a new
measurement edits the table, and the next documentation build redraws the plot.

A cell is plotted by its leading number ("370 (95%)" gives 370); an empty cell or "-" is a gap
in the line. A table or column that is missing, or a cell that is neither a number nor empty, is
an error (exit status 1, with a message naming the table and the cell), so that an edit of the
page cannot silently drop a plot. Needs only the standard library (png_plot draws).
"""
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import png_plot  # noqa: E402  (after the path is set)

# figure name: (title, [(panel title, table name, x column, {legend label: column})])
FIGURES = {
    "hopper-forward": (
        "H100, bf16 forward, B=1 H=32 N=8192: TFLOPS",
        [("non-causal and causal", "bench-hopper-forward", "d",
          {"libffpa": "TFLOPS", "libffpa causal": "causal (bottom-right)", "SDPA efficient": "SDPA efficient"})]),
    "hopper-backward": (
        "H100, bf16 backward, B=1 H=32 N=8192: TFLOPS",
        [("backward", "bench-hopper-backward", "d", {"libffpa": "TFLOPS", "SDPA efficient": "SDPA efficient"})]),
    "mma-sync-forward": (
        "H100, mma.sync kernels, fp16 forward, B=1 H=48 N=8192: TFLOPS",
        [("fp32 accumulation", "bench-mma-sync-forward", "d",
          {"libffpa": "f32", "libffpa before the rework": "f32 before the rework",
           "SDPA efficient": "SDPA efficient"})]),
}

USAGE = "usage: docs_figures.py PAGE OUTDIR"
_NUMBER = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)")


class PageError(Exception):
    """A table or cell of the page that a figure needs is missing or unreadable."""


def list_tables(text):
    """{name: [row, ...]} for every ``list-table`` with a ``:name:`` option in reStructuredText
    `text`, each row a list of cell strings (the header row first)."""
    tables = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith(".. list-table::"):
            i += 1
            continue
        i += 1
        name, rows = None, []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
            stripped = lines[i].strip()
            if stripped.startswith(":name:"):
                name = stripped[len(":name:"):].strip()
            elif stripped.startswith("* - "):
                rows.append([stripped[len("* - "):].strip()])
            elif stripped == "* -":
                rows.append([""])
            elif stripped.startswith("- ") and rows:
                rows[-1].append(stripped[2:].strip())
            elif stripped == "-" and rows:
                rows[-1].append("")
            i += 1
        if name:
            if name in tables:
                raise PageError(f"two list-tables are named {name!r}")
            tables[name] = rows
    return tables


def number(cell, where):
    """The leading number of `cell` (None for an empty cell or "-")."""
    if cell in ("", "-"):
        return None
    match = _NUMBER.match(cell)
    if not match:
        raise PageError(f"{where}: {cell!r} is not a number")
    return float(match.group(1))


def panel(tables, table_name, x_column, columns):
    """(x labels, {label: values}) of one panel, from table `table_name`."""
    rows = tables.get(table_name)
    if not rows:
        raise PageError(f"no list-table named {table_name!r} (with a :name: option) on the page")
    header, body = rows[0], rows[1:]
    for wanted in [x_column, *columns.values()]:
        if wanted not in header:
            raise PageError(f"table {table_name!r} has no column {wanted!r} (columns: {', '.join(header)})")
    for row in body:
        if len(row) != len(header):
            raise PageError(f"table {table_name!r}: a row has {len(row)} cells, the header {len(header)}")
    labels = [row[header.index(x_column)] for row in body]
    series = {}
    for label, column in columns.items():
        at = header.index(column)
        series[label] = [number(row[at], f"table {table_name!r}, column {column!r}, row {row[0]!r}") for row in body]
    return labels, series


def draw(page_text, outdir):
    """Writes OUTDIR/<figure>.png for every figure; returns the paths."""
    tables = list_tables(page_text)
    written = []
    for figure, (title, panels) in FIGURES.items():
        drawn = []
        for panel_title, table_name, x_column, columns in panels:
            labels, series = panel(tables, table_name, x_column, columns)
            drawn.append((panel_title, labels, series))
        path = pathlib.Path(outdir) / f"{figure}.png"
        png_plot.line_chart(str(path), drawn, title)
        written.append(path)
    return written


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(USAGE, file=sys.stderr)
        return 2
    page, outdir = argv
    try:
        draw(pathlib.Path(page).read_text(encoding="utf-8"), outdir)
    except PageError as error:
        print(f"{page}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
