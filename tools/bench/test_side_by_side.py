"""side_by_side.py without a GPU: options, FLOP counts, the check's verdict, the Markdown and CSV
tables, the plot panels and the PNG writer."""
import math
import pathlib
import struct
import sys
import zlib

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import png_plot  # noqa: E402
import side_by_side as sbs  # noqa: E402


def refused(capsys, *argv):
    """The message of an option parse that must fail with exit status 2."""
    with pytest.raises(SystemExit) as stop:
        sbs.parse_args(list(argv))
    assert stop.value.code == 2
    return capsys.readouterr().err


def test_defaults_are_the_benchmark_sweep():
    args = sbs.parse_args([])
    assert (args.B, args.H, args.N) == (1, 48, 8192)
    assert args.D == [64, 128, 256] + list(range(320, 1025, 64))
    assert args.dtype == ["f16", "bf16"] and args.acc == ["f32"] and args.causal == "none"
    assert not args.bwd and args.iters >= 1 and args.rotate >= 2


def test_options_are_parsed():
    args = sbs.parse_args(["--B", "2", "--H", "16", "--N", "1024", "--D", "128,320:448:64", "--dtype", "bf16",
                           "--acc", "f32", "--causal", "bottom-right", "--policy", "FFPA_POLICY_STAGES=2",
                           "--policy", "prefetch_qkv=0", "--bwd", "--iters", "5", "--warmup", "0",
                           "--rotate", "3", "--out", "results"])
    assert (args.B, args.H, args.N, args.D) == (2, 16, 1024, [128, 320, 384, 448])
    assert args.policy == [("FFPA_POLICY_STAGES", "2"), ("prefetch_qkv", "0")]
    assert (args.bwd, args.iters, args.warmup, args.rotate, args.out) == (True, 5, 0, 3, "results")


@pytest.mark.parametrize("argv, message", [
    (["--D", "2000"], "head dims go from 1 to 1024"),
    (["--D", "512:320:64"], "first <= last"),
    (["--D", "abc"], "320:1024:64"),
    (["--dtype", "fp8"], "allowed: f16, bf16"),
    (["--acc", "f64"], "allowed: f32, qk_f16, pv_f16, f16"),
    (["--acc", "qk_f16", "--dtype", "bf16"], "need --dtype f16"),
    (["--causal", "left"], "none"),
    (["--iters", "0"], "at least 1"),
    (["--policy", "STAGES"], "NAME=VALUE"),
    (["--policy", "FFPA_POLICY_ACCUMULATOR=f16"], "--acc"),
])
def test_bad_options_name_what_is_allowed(capsys, argv, message):
    assert message in refused(capsys, *argv)


def test_library_path_prefers_lib_then_environment_then_build(tmp_path):
    built = tmp_path / "src" / "libffpa.so.0"
    built.parent.mkdir()
    built.touch()
    args = sbs.parse_args(["--build", str(tmp_path)])
    assert sbs.library_path(args, {}) == str(built)
    assert sbs.library_path(args, {"FFPA_LIBRARY": "/env/lib"}) == "/env/lib"
    assert sbs.library_path(sbs.parse_args(["--build", str(tmp_path), "--lib", "/x.so"]), {}) == "/x.so"
    assert sbs.library_path(sbs.parse_args(["--build", str(tmp_path / "none")]), {}) is None


def test_flops_are_the_standard_count():
    assert sbs.forward_flops(1, 48, 8192, 8192, 512, 512, "none") == 4 * 48 * 8192 * 8192 * 512
    assert sbs.forward_flops(2, 4, 100, 300, 576, 512, "none") == 2 * 2 * 4 * 100 * 300 * (576 + 512)
    assert sbs.forward_flops(1, 1, 64, 64, 64, 64, "top-left") == sbs.forward_flops(1, 1, 64, 64, 64, 64, "none") / 2
    assert sbs.backward_flops(10.0) == 25.0
    assert sbs.tflops(2e12, 1000.0) == pytest.approx(2.0)
    assert sbs.tflops(1.0, None) is None


def test_backends_and_accumulators_per_row():
    assert [name for name, _ in sbs.backends_for(256)] == ["efficient", "flash", "cudnn"]
    assert [name for name, _ in sbs.backends_for(320)] == ["efficient"]
    assert sbs.accumulators_for("bf16", ["f32", "f16"]) == ["f32"]
    assert sbs.accumulators_for("f16", ["f32", "f16"]) == ["f32", "f16"]


def test_verdict_is_relative_to_the_largest_output():
    assert sbs.verdict(0.019, 1.0, "f32") == "ok"
    assert sbs.verdict(0.021, 1.0, "f32") == "FAIL"
    assert sbs.verdict(0.04, 1.0, "pv_f16") == "ok"
    assert sbs.verdict(math.nan, 1.0, "f32") == "FAIL"
    assert sbs.verdict(0.0, math.nan, "f32") == "FAIL"


def sample_rows():
    rows = [{"d": 128, "dtype": "f16", "acc": "f32", "ffpa_ms": 2.0, "efficient_ms": 3.0, "flash_ms": 1.0,
             "max_abs": 1e-3, "check": "ok", "kernel": "sm80.forward.f16.d128"},
            {"d": 512, "dtype": "f16", "acc": "f32", "ffpa_ms": 4.0, "efficient_ms": 8.0, "max_abs": 0.5,
             "check": "FAIL", "kernel": "a|b"},
            {"d": 512, "dtype": "bf16", "acc": "f32", "check": "ERROR"}]
    for row in rows:
        sbs.finish_row(row, 4e12)
    return rows


def test_rows_get_tflops_and_speedups():
    first, second, failed = sample_rows()
    assert first["ffpa_tflops"] == pytest.approx(2000.0)
    assert first["vs_efficient"] == pytest.approx(1.5) and first["vs_flash"] == pytest.approx(0.5)
    assert first["cudnn_tflops"] is None and first["ffpa_bwd_tflops"] is None
    assert second["vs_efficient"] == pytest.approx(2.0) and second["vs_flash"] is None
    assert failed["ffpa_tflops"] is None and failed["vs_efficient"] is None


def test_markdown_table():
    text = sbs.markdown_table(sample_rows(), sbs.columns(backward=False))
    lines = text.splitlines()
    assert lines[0].startswith("| d | dtype | acc | ffpa ms | ffpa TFLOPS | efficient TFLOPS | flash TFLOPS")
    assert lines[0].endswith("| ffpa/efficient | ffpa/flash | max abs vs fp32 | check | ffpa kernel |")
    assert lines[1].startswith("|---|---|---|---:|")
    assert lines[2] == ("| 128 | f16 | f32 | 2.000 | 2000.0 | 1333.3 | 4000.0 | - | 1.50x | 0.50x | 1.00e-03 | ok "
                        "| sm80.forward.f16.d128 |")
    assert "| 2.00x | - | 5.00e-01 | FAIL | a\\|b |" in lines[3]
    assert lines[4].startswith("| 512 | bf16 | f32 | - | - |")
    assert len({line.count(" | ") for line in lines[2:]}) == 1
    with_backward = sbs.markdown_table(sample_rows(), sbs.columns(backward=True)).splitlines()[0]
    assert "| ffpa bwd TFLOPS | efficient bwd TFLOPS |" in with_backward


def test_csv_keeps_raw_numbers(tmp_path):
    path = tmp_path / "t.csv"
    sbs.write_csv(path, sample_rows(), sbs.columns(backward=False))
    lines = path.read_text().splitlines()
    assert lines[0].split(",")[:5] == ["d", "dtype", "acc", "ffpa ms", "ffpa TFLOPS"]
    assert lines[1].split(",")[:6] == ["128", "f16", "f32", "2.0", "2000.0", "1333.3333333333333"]
    assert lines[3].startswith("512,bf16,f32,,,")


def test_plot_panels_one_per_dtype():
    panels = sbs.plot_panels(sample_rows(), ["f16", "bf16"])
    assert [name for name, _, _ in panels] == ["f16 forward TFLOPS", "bf16 forward TFLOPS"]
    _, dims, series = panels[0]
    assert dims == [128, 512]
    assert series["libffpa"] == [pytest.approx(2000.0), pytest.approx(1000.0)]
    assert series["SDPA flash"] == [pytest.approx(4000.0), None]
    assert "SDPA cudnn" not in series
    assert panels[1][2] == {"libffpa": [None]}


def read_png(path):
    """Width, height and RGB rows of an 8-bit RGB PNG without filters; checks every CRC."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, {}
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind, body = data[position + 4:position + 8], data[position + 8:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        chunks[kind] = chunks.get(kind, b"") + body
        position += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 2) and b"IEND" in chunks
    raw = zlib.decompress(chunks[b"IDAT"])
    assert len(raw) == height * (1 + 3 * width)
    rows = [raw[y * (1 + 3 * width) + 1:(y + 1) * (1 + 3 * width)] for y in range(height)]
    return width, height, rows


def test_png_writer_draws_every_series(tmp_path):
    path = tmp_path / "plot.png"
    png_plot.line_chart(path, sbs.plot_panels(sample_rows(), ["f16", "bf16"]), "libffpa 0.1 B=1 H=48")
    width, height, rows = read_png(path)
    assert width == 2 * 640 and height > 440
    pixels = {bytes(row[i:i + 3]) for row in rows for i in range(0, len(row), 3)}
    for colour in png_plot.COLOURS[:2]:  # libffpa and SDPA efficient
        assert bytes(colour) in pixels


def test_plot_falls_back_to_the_png_writer(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    path = tmp_path / "side_by_side.png"
    assert sbs.plot(path, sbs.plot_panels(sample_rows(), ["f16"]), "title") == "png_plot"
    read_png(path)


def test_nice_axis_tops():
    assert [png_plot.nice_top(v) for v in (0.0, 3.0, 180.0, 501.0, 1000.0)] == [1.0, 5.0, 200.0, 1000.0, 1000.0]


def test_without_pytorch_it_exits_77(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setenv("FFPA_LIBRARY", "/nonexistent/libffpa.so.0")
    assert sbs.main(["--D", "128"]) == 77
    assert "needs PyTorch with a CUDA GPU" in capsys.readouterr().err


def test_gradient_verdict_needs_every_gradient_within_tolerance():
    assert sbs.gradient_verdict([0.01, 0.049, 0.0]) == "ok"
    assert sbs.gradient_verdict([0.01, 0.051, 0.0]) == "FAIL"
    assert sbs.gradient_verdict([0.01, math.nan, 0.0]) == "FAIL"


def test_backward_table_has_its_check():
    rows = sample_rows()
    rows[0].update(bwd_max_rel=0.01, bwd_check="ok")
    table = sbs.markdown_table(rows, sbs.columns(True))
    header = table.splitlines()[0]
    assert "bwd max rel vs fp32" in header and "bwd check" in header
    assert "| 1.00e-02 | ok |" in table.splitlines()[2]


class _Plan:
    def __init__(self, kernel, config):
        self.kernel = kernel
        self.items = {"kernel": kernel, "config": config}


def test_kernel_label_names_the_settings_the_kernel_name_does_not():
    hopper = _Plan("sm90.forward.bf16.d512", "Br=64 Bc=64 columns=256+256 split=even overlap=1 smem=209992")
    assert sbs.kernel_label(hopper) == "sm90.forward.bf16.d512 overlap=1"
    rows = _Plan("sm90.forward.bf16.d128.row_split", "Br=128 Bc=64 rows=64+64 columns=128 pingpong=0 k_buffers=2")
    assert sbs.kernel_label(rows) == "sm90.forward.bf16.d128.row_split pingpong=0"
    mma_sync = _Plan("sm80.forward.f16.d128.acc_f32.v_s2r", "Br=128 Bc=32 stages=2")
    assert sbs.kernel_label(mma_sync) == "sm80.forward.f16.d128.acc_f32.v_s2r"
