"""ab_compare.py: calls of two builds interleave in alternating order, the table names both and
gives B's time over A's, and the bindings' package loads twice in one process, each copy bound
to its own copy of libffpa (FFPA_TEST_LIBRARY, set by the Meson test)."""
import os
import pathlib
import shutil
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ab_compare  # noqa: E402


def test_calls_alternate_and_each_gets_its_own_median():
    order = []
    times = {"a": [5.0, 1.0, 9.0, 2.0, 3.0], "b": [4.0, 4.0, 4.0, 8.0, 6.0]}

    def timed(call, i):
        order.append(call)
        return times[call][i]

    medians = ab_compare.interleaved_medians(["a", "b"], 5, timed)
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]
    assert medians == [3.0, 4.0]


def test_rows_get_rates_and_ratios_and_the_table_names_both_builds():
    row = ab_compare.finish({"d": 512, "dtype": "bf16", "a_ms": 8.0, "b_ms": 10.0, "a_check": "ok",
                             "b_check": "ok", "a_bwd_ms": 50.0, "b_bwd_ms": 40.0}, 4.4e12)
    assert row["ratio"] == pytest.approx(1.25)
    assert row["bwd_ratio"] == pytest.approx(0.8)
    assert row["a_tflops"] == pytest.approx(550.0)
    assert row["b_bwd_tflops"] == pytest.approx(2.5 * 4.4e12 / 40e-3 / 1e12)
    text = ab_compare.table([row], ("new", "old"), backward=True)
    lines = text.splitlines()
    assert lines[0].startswith("| d | dtype | new ms | old ms | new TFLOPS | old TFLOPS | new/old | new check |")
    assert "bwd new/old" in lines[0]
    assert lines[2].startswith("| 512 | bf16 | 8.000 | 10.000 | 550.0 | 440.0 | 1.250x | ok | ok | 50.000 | 40.000 |")
    missing = ab_compare.finish({"d": 320, "dtype": "bf16", "a_check": "ERROR"}, 1e12)
    assert missing["ratio"] is None
    assert "| 320 | bf16 | - | - | - | - | - | ERROR | - |" in ab_compare.table([missing], ("A", "B"), False)


def test_both_libraries_are_required_and_options_are_checked(capsys):
    with pytest.raises(SystemExit) as exit_info:
        ab_compare.parse_args(["--a", "x"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        ab_compare.parse_args(["--a", "x", "--b", "y", "--dtype", "f64"])
    args = ab_compare.parse_args(["--a", "x", "--b", "y", "--D", "512,1024", "--bwd"])
    assert args.D == [512, 1024] and args.bwd and args.dtype == ["bf16"] and args.H == 32
    capsys.readouterr()


def test_a_directory_names_its_library(tmp_path):
    assert ab_compare.library_file(tmp_path) == str(tmp_path / "libffpa.so.0")
    assert ab_compare.library_file(tmp_path / "libffpa.so.0") == str(tmp_path / "libffpa.so.0")


def test_two_copies_of_the_library_load_side_by_side(tmp_path):
    built = os.environ.get("FFPA_TEST_LIBRARY")
    if not built:
        pytest.skip("FFPA_TEST_LIBRARY is not set (the Meson test sets it)")
    paths = []
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        paths.append(str(shutil.copy(built, tmp_path / side / "libffpa.so.0")))
    before = os.environ.get("FFPA_LIBRARY")
    first = ab_compare.load_package("ffpa_test_a", paths[0])
    second = ab_compare.load_package("ffpa_test_b", paths[1])
    assert os.environ.get("FFPA_LIBRARY") == before  # restored
    assert first is not second and first.Handle is not second.Handle
    lib_a, lib_b = first.library(), second.library()
    assert lib_a._name == paths[0] and lib_b._name == paths[1]
    assert lib_a._handle != lib_b._handle  # two loaded objects, not one shared
    assert lib_a.ffpaGetVersion() == lib_b.ffpaGetVersion() > 0


def test_ab_baseline_writes_the_tree_of_a_commit(tmp_path):
    import subprocess
    repo = HERE.parents[1]
    if not (repo / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    script = repo / "tools" / "ab-baseline"
    done = subprocess.run([str(script), "HEAD", str(tmp_path / "base")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    committed = subprocess.run(["git", "-C", str(repo), "show", "HEAD:meson.build"], capture_output=True,
                               text=True).stdout
    assert (tmp_path / "base" / "meson.build").read_text() == committed
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert (tmp_path / "base" / ".ab-ref").read_text().startswith(head)
    refused = subprocess.run([str(script), "no-such-ref"], capture_output=True, text=True)
    assert refused.returncode == 2 and "is not a commit" in refused.stderr


def test_without_pytorch_it_exits_77(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert ab_compare.main(["--a", "x", "--b", "y", "--out", str(tmp_path)]) == 77
    assert "needs PyTorch with a CUDA GPU" in capsys.readouterr().err
