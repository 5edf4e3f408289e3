"""docs_figures.py: the benchmark page's tables are read back as they are written, every figure the
documentation build declares is drawn from the real page, and an edit that breaks a figure's
table fails with a message naming it."""
import pathlib
import re
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import docs_figures  # noqa: E402
import png_plot  # noqa: E402
from test_side_by_side import read_png  # noqa: E402

REPO = HERE.parents[1]

PAGE = """\
Intro text.

.. list-table::
   :name: small
   :header-rows: 1

   * - d
     - TFLOPS
     - other
   * - 64
     - 10.5
     - 370 (95%)
   * - 128
     -
     - -

.. list-table::
   :header-rows: 1

   * - unnamed
     - table
"""


def test_named_tables_are_read_cell_by_cell():
    tables = docs_figures.list_tables(PAGE)
    assert tables == {"small": [["d", "TFLOPS", "other"], ["64", "10.5", "370 (95%)"], ["128", "", "-"]]}


def test_a_panel_takes_leading_numbers_and_leaves_gaps():
    labels, series = docs_figures.panel(docs_figures.list_tables(PAGE), "small", "d", {"a": "TFLOPS", "b": "other"})
    assert labels == ["64", "128"]
    assert series == {"a": [10.5, None], "b": [370.0, None]}


@pytest.mark.parametrize("table, column, message", [
    ("missing", "TFLOPS", "no list-table named 'missing'"),
    ("small", "GFLOPS", "has no column 'GFLOPS'"),
])
def test_a_missing_table_or_column_is_named(table, column, message):
    with pytest.raises(docs_figures.PageError, match=message):
        docs_figures.panel(docs_figures.list_tables(PAGE), table, "d", {"a": column})


def test_a_cell_that_is_not_a_number_is_named():
    page = PAGE.replace("10.5", "fast")
    with pytest.raises(docs_figures.PageError, match=r"column 'TFLOPS', row '64': 'fast' is not a number"):
        docs_figures.panel(docs_figures.list_tables(page), "small", "d", {"a": "TFLOPS"})


def test_two_tables_of_one_name_are_refused():
    twice = PAGE + "\n" + PAGE[PAGE.index(".. list-table::"):]
    with pytest.raises(docs_figures.PageError, match="two list-tables are named 'small'"):
        docs_figures.list_tables(twice)


def test_the_page_draws_every_figure_the_build_declares(tmp_path):
    page = (REPO / "docs" / "benchmarks.rst").read_text(encoding="utf-8")
    written = docs_figures.draw(page, tmp_path)
    assert sorted(p.name for p in written) == sorted(f"{name}.png" for name in docs_figures.FIGURES)
    # docs/meson.build lists the same files as the outputs of its figure target, and the page
    # shows each of them.
    build = (REPO / "docs" / "meson.build").read_text(encoding="utf-8")
    declared = re.search(r"docs-benchmark-figures'.*?output: \[([^\]]*)\]", build, re.S).group(1)
    assert sorted(re.findall(r"'([^']+)'", declared)) == sorted(p.name for p in written)
    for path in written:
        assert f".. image:: {path.name}" in page
        width, height, rows = read_png(path)
        assert width >= 640 and height > 440
        pixels = {bytes(row[i:i + 3]) for row in rows for i in range(0, len(row), 3)}
        _, panels = docs_figures.FIGURES[path.stem]
        lines = sum(len(columns) for _, _, _, columns in panels)
        for colour in png_plot.COLOURS[:lines]:  # each line's colour is drawn
            assert bytes(colour) in pixels


def test_every_plotted_column_has_a_measurement():
    tables = docs_figures.list_tables((REPO / "docs" / "benchmarks.rst").read_text(encoding="utf-8"))
    for _, panels in docs_figures.FIGURES.values():
        for _, table, x_column, columns in panels:
            labels, series = docs_figures.panel(tables, table, x_column, columns)
            assert labels and all(label.isdigit() for label in labels)
            for label, values in series.items():
                assert any(v is not None and v > 0 for v in values), (table, label)


def test_the_command_line_fails_with_the_table_named(tmp_path, capsys):
    page = tmp_path / "page.rst"
    page.write_text("No tables here.\n", encoding="utf-8")
    assert docs_figures.main([str(page), str(tmp_path)]) == 1
    assert "no list-table named" in capsys.readouterr().err
    assert docs_figures.main([]) == 2
