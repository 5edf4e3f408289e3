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


SOURCE_HEADER = ["# Address", "Source", "Warp Stall Sampling (All Samples)",
                 "Warp Stall Sampling (Not-issued Samples)", "Instructions Executed"]


def test_a_source_page_gives_the_costliest_instructions_and_opcodes(tmp_path):
    rows = [SOURCE_HEADER,
            ["0x7f00", "@!P0 SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4+0x10], R3 ;", "600", "590", "1,024"],
            ["0x7f10", "MEMBAR.ALL.GPU ;", "250", "250", "512"],
            ["0x7f20", "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4+0x20], R5 ;", "100", "90", "512"],
            ["0x7f30", "FMUL R2, R2, R3 ;", "50", "10", "4,096"]]
    page = write(tmp_path / "hopper-fwd-d1024.source.csv", rows,
                 preamble="==PROF== Disconnected\n" + quoted(
                     ["Kernel Name", "void ffpa::kernels::sm90::clusterForwardKernel<ffpa::kernels::Bf16Tag, "
                      "(int)1024>(ffpa::sm90::ForwardParams)", ""]) + "\n")
    text = ncu_digest.source_digest([page], top=2)
    assert "### hopper-fwd-d1024: `sm90::clusterForwardKernel<Bf16Tag, (int)1024>` (1000 samples)" in text
    # Both mbarrier waits under one heading, the predicate dropped; only the two largest shown.
    assert "| mbarrier wait (try-wait and its retry branch) | 70.0 |" in text
    assert "| MEMBAR.ALL.GPU | 25.0 |" in text
    assert "FMUL" not in text
    assert "| 0x7f00 | `@!P0 SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4+0x10], R3 ;` | 60.0 |" in text


def test_a_waiting_warp_sampled_at_the_retry_branch_is_charged_to_its_wait(tmp_path):
    rows = [SOURCE_HEADER,
            ["0x100", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R9+UR26], R6 ;", "5", "5", "1"],
            ["0x110", "VIADD R0, R10, UR20 ;", "5", "5", "1"],
            ["0x120", "@!P0 BRA 0x900 ;", "80", "80", "1"],
            ["0x130", "@!P1 BRA 0x200 ;", "10", "10", "1"]]
    text = ncu_digest.source_digest([write(tmp_path / "w.source.csv", rows)], top=3)
    assert "| mbarrier wait (try-wait and its retry branch) | 85.0 |" in text
    assert "| 0x120 | `@!P0 BRA 0x900 ;` (retries `SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R9+UR26], R6 ;`) | 80.0 |" in text
    # The branch after the wait's own branch is a branch.
    assert "| BRA | 10.0 |" in text


def test_a_source_page_of_two_kernels_and_pages_without_samples(tmp_path, capsys):
    rows = [SOURCE_HEADER, ["0x10", "BAR.SYNC 0x1, 0x100 ;", "3", "3", "1"]]
    two = write(tmp_path / "bwd.source.csv", rows + rows)
    text = ncu_digest.source_digest([two])
    assert "### bwd: `kernel 1` (3 samples)" in text and "### bwd: `kernel 2` (3 samples)" in text
    assert "| BAR.SYNC | 100.0 |" in text
    bare = write(tmp_path / "bare.source.csv", [["# Address", "Source"], ["0x10", "NOP ;"]])
    with pytest.raises(ncu_digest.ReportError, match="without warp-state samples"):
        ncu_digest.source_digest([bare])
    empty = write(tmp_path / "empty.source.csv", [["a", "b"], ["1", "2"]])
    assert ncu_digest.main(["--source", str(empty)]) == 1
    assert "no source page" in capsys.readouterr().err
