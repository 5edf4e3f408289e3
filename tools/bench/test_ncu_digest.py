"""ncu_digest.py: Nsight Compute raw pages (as `ncu --import ... --csv --page raw` writes them:
quoted cells, a units row, digit grouping) become one row per kernel with the headline rates
and the costliest stall reasons; metric names of other ncu versions are found too, and a file
that is not a raw page is refused with its name."""
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ncu_digest  # noqa: E402

HEADER = [
    "ID", "Process ID", "Kernel Name", "gpu__time_duration.sum", "launch__registers_per_thread",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio",
]
UNITS = ["", "", "", "nsecond", "register/thread", "%", "%", "%", "%", "%", "%", "%",
         "ratio", "ratio", "ratio", "ratio", "ratio", "ratio"]
KERNEL = "void ffpa::kernels::sm90::forwardKernel<ffpa::kernels::Bf16Tag, 512>(ffpa::sm90::ForwardParams)"


def quoted(cells):
    return ",".join('"' + c.replace('"', '""') + '"' for c in cells)


def write(path, rows, preamble=""):
    path.write_text(preamble + "\n".join(quoted(r) for r in rows) + "\n")
    return path


def test_a_kernel_row_gives_its_rates_and_top_stalls(tmp_path):
    row = ["0", "4242", KERNEL, "9,430,000", "168", "61.5", "72.25", "40.0", "55.0", "12.5", "48.0", "18.7",
           "1.50", "0.25", "1.00", "0.75", "3.10", "0.05"]
    report = write(tmp_path / "hopper-fwd-d512.csv", [HEADER, UNITS, row], preamble="==PROF== Disconnected\n")
    text = ncu_digest.digest([report], stall_count=3)
    lines = text.splitlines()
    assert lines[0].startswith("| case | kernel | ms | regs | SM % | tensor % |")
    assert lines[2] == ("| hopper-fwd-d512 | `sm90::forwardKernel<Bf16Tag, 512>` | 9.430 | 168 | 61.5 | 72.2 | "
                        "40.0 | 55.0 | 12.5 | 48.0 | 18.7 |")
    # Largest first; "selected" (issuing) is not a stall; only three asked for.
    assert "| hopper-fwd-d512 | `sm90::forwardKernel<Bf16Tag, 512>` | math_pipe_throttle 3.10, barrier 1.50, " \
           "wait 0.75 |" in lines


def test_several_kernels_and_missing_metrics(tmp_path):
    header = ["ID", "Kernel Name", "gpu__time_duration.sum", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]
    rows = [header, ["", "", "nsecond", "%"],
            ["0", "void ffpa::kernels::sm80::backwardRowStats<ffpa::kernels::HalfTag>(P)", "1000000", "n/a"],
            ["1", "void ffpa::kernels::sm90::keyGradientKernel<ffpa::kernels::Bf16Tag, 512, 2>(P)", "2500000", "80"]]
    text = ncu_digest.digest([write(tmp_path / "bwd.csv", rows)])
    assert "| bwd | `sm80::backwardRowStats<HalfTag>` | 1.000 | - | - | - |" in text
    # The newer name of the tensor pipe metric.
    assert "| bwd | `sm90::keyGradientKernel<Bf16Tag, 512, 2>` | 2.500 | - | - | 80.0 |" in text
    assert "| bwd | `sm80::backwardRowStats<HalfTag>` | - |" in text  # no stall metrics


def test_older_percentage_stalls_are_marked(tmp_path):
    header = ["ID", "Kernel Name", "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
              "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct"]
    text = ncu_digest.digest([write(tmp_path / "old.csv", [header, ["1", "k()", "8.09", "12.5"]])])
    assert "| old | `k` | short_scoreboard 12.50%, barrier 8.09% |" in text


@pytest.mark.parametrize("content, message", [
    ("", "no rows"),
    ('"a","b"\n"1","2"\n', "not an ncu raw page"),
    ('"ID","Kernel Name"\n"",""\n', "no profiled kernel"),
])
def test_a_file_that_is_not_a_profile_is_refused(tmp_path, content, message, capsys):
    path = tmp_path / "case.csv"
    path.write_text(content)
    with pytest.raises(ncu_digest.ReportError, match=message):
        ncu_digest.digest([path])
    assert ncu_digest.main([str(path)]) == 1
    assert "case.csv" in capsys.readouterr().err
