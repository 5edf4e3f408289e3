#!/usr/bin/env python3
"""libffpa against PyTorch's scaled_dot_product_attention: one run, the same tensors.

    python3 tools/bench/side_by_side.py [--build DIR | --lib PATH] [--out DIR] [options]

For each dtype and head dim, on the same [B, H, N, D] tensors: libffpa's forward (each --acc mode)
through the ctypes package in bindings/python, and SDPA with EFFICIENT_ATTENTION, and with
FLASH_ATTENTION and CUDNN_ATTENTION where d <= 256 (a backend that refuses a shape is left out
of that row). With --bwd, the backward passes too. Timing: CUDA events around each call on one
stream, warm-up first, the median of --iters calls over --rotate input sets used in turn.
libffpa's output (and with --bwd its dQ, dK, dV) is checked against fp32 attention computed a
head at a time (FAIL in the table when off), so that every row is checked whichever SDPA backend
takes the shape. Also times a cuBLAS bf16 GEMM of 8192^3 (torch.matmul) as the ceiling.

Writes DIR/side_by_side.md (Markdown), DIR/side_by_side.csv and DIR/side_by_side.png (TFLOPS
by head dim). Exit status: 0 done, 1 a check or a call failed, 2 bad options, 77 no PyTorch
with CUDA.

Everything but run() needs only the standard library, so that the options, FLOP counts, tables
and plots are tested on machines without PyTorch.
"""
import argparse
import csv
import math
import os
import pathlib
import statistics
import sys
import warnings

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import png_plot  # noqa: E402  (after the path is set)

DTYPES = ("f16", "bf16")
ACCUMULATORS = ("f32", "qk_f16", "pv_f16", "f16")
CAUSAL = ("none", "top-left", "bottom-right")
# SDPA backends: (short name, torch.nn.attention.SDPBackend member, largest head dim tried).
BACKENDS = (("efficient", "EFFICIENT_ATTENTION", None), ("flash", "FLASH_ATTENTION", 256),
            ("cudnn", "CUDNN_ATTENTION", 256))
DEFAULT_DIMS = "64,128,256,320:1024:64"
GEMM_SIZE = 8192
# A spin kernel of about a millisecond ahead of each timed call keeps the GPU busy while the host
# enqueues the call, so that host-side overhead (Python, ctypes, PyTorch dispatch) is not timed.
SPIN_CYCLES = 2_000_000


# --- Options --------------------------------------------------------------------------------------

def head_dims(text):
    """"320,512", "320:1024:64" (first:last:step) or a mix, each from 1 to 1024."""
    dims = []
    for part in text.split(","):
        pieces = part.split(":")
        try:
            numbers = [int(p) for p in pieces]
        except ValueError:
            numbers = []
        if len(numbers) == 1:
            dims.append(numbers[0])
        elif len(numbers) == 3 and numbers[2] > 0 and numbers[0] <= numbers[1]:
            dims.extend(range(numbers[0], numbers[1] + 1, numbers[2]))
        else:
            raise argparse.ArgumentTypeError(
                f"{part!r}: expected head dims as a list (320,512) or ranges first:last:step "
                "(320:1024:64) with first <= last")
    if not dims or not all(1 <= d <= 1024 for d in dims):
        raise argparse.ArgumentTypeError(f"{text!r}: head dims go from 1 to 1024")
    return dims


def choices_list(allowed):
    """An argparse type: a comma-separated list of words out of `allowed`."""
    def parse(text):
        values = [v.strip() for v in text.split(",") if v.strip()]
        wrong = [v for v in values if v not in allowed]
        if wrong or not values:
            raise argparse.ArgumentTypeError(
                f"{text!r}: allowed: {', '.join(allowed)} (comma-separated)")
        return values
    return parse


def positive(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r}: an integer of at least {minimum}")
        return value
    return parse


def policy(text):
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE, e.g. FFPA_POLICY_STAGES=2")
    if name.upper().removeprefix("FFPA_POLICY_") == "ACCUMULATOR":
        raise argparse.ArgumentTypeError(f"{text!r}: the accumulator is set with --acc")
    return name, value


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Without --lib, libffpa is taken from FFPA_LIBRARY, else from DIR/src of --build "
               "(default: build), else found by the loader.")
    parser.add_argument("--B", type=positive(1), default=1, help="batch (default 1)")
    parser.add_argument("--H", type=positive(1), default=48, help="heads (default 48)")
    parser.add_argument("--N", type=positive(1), default=8192, help="sequence length (default 8192)")
    parser.add_argument("--D", type=head_dims, default=head_dims(DEFAULT_DIMS),
                        help=f"head dims: 320,512 or 320:1024:64 or both (default {DEFAULT_DIMS})")
    parser.add_argument("--dtype", type=choices_list(DTYPES), default=list(DTYPES),
                        help="f16, bf16 (default both)")
    parser.add_argument("--acc", type=choices_list(ACCUMULATORS), default=["f32"],
                        help="libffpa's accumulator modes: f32, qk_f16, pv_f16, f16 (default f32); "
                             "bf16 runs f32 only")
    parser.add_argument("--causal", choices=CAUSAL, default="none",
                        help="mask (default none); with Nq = Nkv both alignments are the same")
    parser.add_argument("--policy", type=policy, action="append", default=[],
                        help="NAME=VALUE: a libffpa knob as ffpa-info --knobs lists it (repeatable)")
    parser.add_argument("--bwd", action="store_true", help="also time the backward passes")
    parser.add_argument("--warmup", type=positive(0), default=3, help="untimed calls first (default 3)")
    parser.add_argument("--iters", type=positive(1), default=10, help="timed calls (default 10)")
    parser.add_argument("--rotate", type=positive(1), default=2,
                        help="input sets used in turn so that L2 does not hold them (default 2)")
    parser.add_argument("--lib", help="libffpa.so.0, or its directory")
    parser.add_argument("--build", default=str(REPO / "build"), help="Meson build directory")
    parser.add_argument("--out", default="bench-results", help="output directory (default bench-results)")
    args = parser.parse_args(argv)
    if not any(accumulators_for(dtype, args.acc) for dtype in args.dtype):
        parser.error("--acc: the fp16-accumulation modes need --dtype f16")
    return args


def library_path(args, environ):
    """The libffpa to load: --lib, else FFPA_LIBRARY, else the build directory's, else None
    (the loader's search path)."""
    if args.lib:
        return args.lib
    if environ.get("FFPA_LIBRARY"):
        return environ["FFPA_LIBRARY"]
    built = pathlib.Path(args.build) / "src" / "libffpa.so.0"
    return str(built) if built.exists() else None


# --- Numbers ----------------------------------------------------------------------------------------

def forward_flops(b, h, nq, nkv, dqk, dv, causal):
    """The standard count: 2 * B * H * Nq * Nkv * (Dqk + Dv), halved with a causal mask."""
    return 2.0 * b * h * nq * nkv * (dqk + dv) * (0.5 if causal != "none" else 1.0)


def backward_flops(forward):
    return 2.5 * forward


def tflops(flops, ms):
    return flops / (ms * 1e9) if ms else None


def accumulators_for(dtype, accumulators):
    """The fp16-accumulation modes exist for fp16 inputs only."""
    return [a for a in accumulators if a == "f32" or dtype == "f16"]


def backends_for(d):
    return [(name, member) for name, member, largest in BACKENDS if largest is None or d <= largest]


def tolerance(accumulator):
    """The largest |O_ffpa - O_fp32| a row may show, as a fraction of max |O_fp32|: fp16
    accumulation rounds every partial sum to 11 bits."""
    return 2e-2 if accumulator == "f32" else 5e-2


def verdict(max_abs, largest, accumulator):
    return "ok" if max_abs <= tolerance(accumulator) * largest else "FAIL"  # NaN fails


# The largest max |dX_ffpa - dX_fp32| / max |dX_fp32| of a gradient: a sanity check of the
# backward (bf16/fp16 rounding of P and dS, and sums over N that may cancel), not an accuracy test
# (the device tests are).
GRADIENT_TOLERANCE = 5e-2


def gradient_verdict(ratios):
    """ok when each gradient's max error over its max magnitude is within GRADIENT_TOLERANCE."""
    return "ok" if all(r <= GRADIENT_TOLERANCE for r in ratios) else "FAIL"  # NaN fails


def finish_row(row, flops):
    """Adds TFLOPS and speedups to a row of measured milliseconds (None where not measured)."""
    row["ffpa_tflops"] = tflops(flops, row.get("ffpa_ms"))
    row["ffpa_bwd_tflops"] = tflops(backward_flops(flops), row.get("ffpa_bwd_ms"))
    for name, _, _ in BACKENDS:
        row[f"{name}_tflops"] = tflops(flops, row.get(f"{name}_ms"))
        row[f"{name}_bwd_tflops"] = tflops(backward_flops(flops), row.get(f"{name}_bwd_ms"))
    for name in ("efficient", "flash"):
        mine, theirs = row.get("ffpa_ms"), row.get(f"{name}_ms")
        row[f"vs_{name}"] = theirs / mine if mine and theirs else None
    mine, theirs = row.get("ffpa_bwd_ms"), row.get("efficient_bwd_ms")
    row["bwd_vs_efficient"] = theirs / mine if mine and theirs else None
    return row


# --- Tables and plot ----------------------------------------------------------------------------------

# (header, row key, format of a number)
COLUMNS = [("d", "d", "{}"), ("dtype", "dtype", "{}"), ("acc", "acc", "{}"),
           ("ffpa ms", "ffpa_ms", "{:.3f}"), ("ffpa TFLOPS", "ffpa_tflops", "{:.1f}"),
           ("efficient TFLOPS", "efficient_tflops", "{:.1f}"), ("flash TFLOPS", "flash_tflops", "{:.1f}"),
           ("cudnn TFLOPS", "cudnn_tflops", "{:.1f}"), ("ffpa/efficient", "vs_efficient", "{:.2f}x"),
           ("ffpa/flash", "vs_flash", "{:.2f}x"), ("max abs vs fp32", "max_abs", "{:.2e}"),
           ("check", "check", "{}")]
BACKWARD_COLUMNS = [("ffpa bwd ms", "ffpa_bwd_ms", "{:.3f}"), ("ffpa bwd TFLOPS", "ffpa_bwd_tflops", "{:.1f}"),
                    ("efficient bwd TFLOPS", "efficient_bwd_tflops", "{:.1f}"),
                    ("flash bwd TFLOPS", "flash_bwd_tflops", "{:.1f}"),
                    ("cudnn bwd TFLOPS", "cudnn_bwd_tflops", "{:.1f}"),
                    ("bwd ffpa/efficient", "bwd_vs_efficient", "{:.2f}x"),
                    ("bwd max rel vs fp32", "bwd_max_rel", "{:.2e}"), ("bwd check", "bwd_check", "{}")]
KERNEL_COLUMN = [("ffpa kernel", "kernel", "{}")]

# Launch settings a plan's config names that its kernel's name does not (the Hopper forward's
# consumer overlap, and its row split's turns): the kernel column shows them, so that an
# autotuned run says what won.
LABELLED_SETTINGS = ("overlap", "pingpong")


def kernel_label(plan):
    """The plan's kernel, followed by the LABELLED_SETTINGS its config names ("name=value")."""
    config = plan.items.get("config", "").split()
    settings = [word for word in config if word.split("=", 1)[0] in LABELLED_SETTINGS]
    return " ".join([plan.kernel, *settings])



def columns(backward):
    return COLUMNS + (BACKWARD_COLUMNS if backward else []) + KERNEL_COLUMN


def cell(row, key, fmt):
    value = row.get(key)
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return fmt.format(value)


def markdown_table(rows, cols):
    lines = ["| " + " | ".join(header for header, _, _ in cols) + " |",
             "|" + "|".join("---:" if fmt != "{}" else "---" for _, _, fmt in cols) + "|"]
    for row in rows:
        cells = [cell(row, key, fmt).replace("|", "\\|") for _, key, fmt in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_csv(path, rows, cols):
    """Raw numbers (no rounding), empty where not measured."""
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow([header for header, _, _ in cols])
        for row in rows:
            writer.writerow(["" if row.get(key) is None else row[key] for _, key, _ in cols])


def plot_panels(rows, dtypes):
    """One panel per dtype: forward TFLOPS by head dim, for libffpa (each accumulator mode) and
    each SDPA backend that ran."""
    panels = []
    for dtype in dtypes:
        subset = [r for r in rows if r["dtype"] == dtype]
        dims = sorted({r["d"] for r in subset})
        modes = list(dict.fromkeys(r["acc"] for r in subset))
        series = {}
        for mode in modes:
            label = "libffpa" if modes == ["f32"] else f"libffpa {mode}"
            by_dim = {r["d"]: r.get("ffpa_tflops") for r in subset if r["acc"] == mode}
            series[label] = [by_dim.get(d) for d in dims]
        for name, _, _ in BACKENDS:
            by_dim = {r["d"]: r.get(f"{name}_tflops") for r in subset}
            values = [by_dim.get(d) for d in dims]
            if any(v is not None for v in values):
                series[f"SDPA {name}"] = values
        panels.append((f"{dtype} forward TFLOPS", dims, series))
    return panels


def plot(path, panels, title):
    """matplotlib where it is installed, else png_plot. Returns which one drew."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        png_plot.line_chart(path, panels, title)
        return "png_plot"
    figure, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    for ax, (name, dims, series) in zip(axes[0], panels):
        positions = list(range(len(dims)))  # head dims are not evenly spaced: one slot each
        for label, values in series.items():
            ax.plot(positions, [math.nan if v is None else v for v in values], marker="o", label=label)
        ax.set_xticks(positions)
        ax.set_xticklabels([str(d) for d in dims])
        ax.set_xlabel("head dim")
        ax.set_ylabel("TFLOPS")
        ax.set_ylim(bottom=0)
        ax.set_title(name)
        ax.grid(True, alpha=0.3)
        ax.legend()
    figure.suptitle(title)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return "matplotlib"


def report_header(args, device, versions, gemm_tflops):
    return (f"# libffpa and PyTorch SDPA side by side\n\n"
            f"{device}; {versions}\n\n"
            f"B={args.B} H={args.H} N={args.N} causal={args.causal}; forward FLOPs "
            f"2*B*H*N*N*(Dqk+Dv){', halved for the mask' if args.causal != 'none' else ''}, backward 2.5x; "
            f"median of {args.iters} calls after {args.warmup} warm-up, {args.rotate} input sets in turn\n\n"
            f"Ceiling: cuBLAS bf16 GEMM {GEMM_SIZE}^3 (torch.matmul) at {gemm_tflops:.0f} TFLOPS\n\n"
            f"check: max |O_ffpa - O_fp32| within {tolerance('f32'):g} (f32 accumulation) or "
            f"{tolerance('f16'):g} (fp16 accumulation) times max |O_fp32|, O_fp32 being attention in fp32 "
            f"a head at a time; bwd check: max |dX_ffpa - dX_fp32| within {GRADIENT_TOLERANCE:g} times "
            f"max |dX_fp32| for each of dQ, dK, dV (bwd max rel: the largest of the three ratios)\n\n")


# --- The run on the GPU ---------------------------------------------------------------------------------

def time_call(torch, stream, call, argument):
    """Milliseconds of call(argument) on `stream`, between CUDA events, behind a spin kernel (so
    that the host's enqueueing is not timed)."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(SPIN_CYCLES)
    start.record(stream)
    call(argument)
    stop.record(stream)
    stop.synchronize()
    return start.elapsed_time(stop)


def run(args):
    """Measures every row; returns (rows, notes, header)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import ffpa

    device = torch.device("cuda")
    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16}
    stream = torch.cuda.current_stream()
    is_causal = args.causal != "none"
    attn = ffpa.AttentionDesc(causal=args.causal)
    notes = []

    def time_calls(call, sets):
        for i in range(args.warmup):
            call(sets[i % len(sets)])
        return statistics.median(time_call(torch, stream, call, sets[(args.warmup + i) % len(sets)])
                                 for i in range(args.iters))

    a = torch.randn(GEMM_SIZE, GEMM_SIZE, device=device, dtype=torch.bfloat16)
    b = torch.randn(GEMM_SIZE, GEMM_SIZE, device=device, dtype=torch.bfloat16)
    gemm_tflops = tflops(2.0 * GEMM_SIZE ** 3, time_calls(lambda s: torch.matmul(*s), [(a, b)]))
    print(f"cuBLAS bf16 GEMM {GEMM_SIZE}^3: {gemm_tflops:.0f} TFLOPS", flush=True)
    del a, b

    handles = {}
    for mode in args.acc:
        handle = ffpa.Handle()
        handle.stream = stream.cuda_stream
        for name, value in args.policy:
            handle.set_policy(name, int(value) if value.lstrip("-").isdigit() else value)
        handle.set_policy("ACCUMULATOR", mode)
        handles[mode] = handle

    rows = []
    generator = torch.Generator(device=device)
    for dtype_name in args.dtype:
        dtype = dtypes[dtype_name]
        for d in args.D:
            generator.manual_seed(16 * d + args.dtype.index(dtype_name))
            shape = (args.B, args.H, args.N, d)

            def uniform(bound):
                return torch.empty(shape, device=device, dtype=dtype).uniform_(-bound, bound, generator=generator)

            # Q and K in [-2, 2) give a peaked softmax, as real attention has; V and dO in [-1, 1).
            sets = [(uniform(2), uniform(2), uniform(1), uniform(1) if args.bwd else None)
                    for _ in range(args.rotate)]
            flops = forward_flops(args.B, args.H, args.N, args.N, d, d, args.causal)
            sdpa = {}
            expected = reference_attention(torch, *sets[0], is_causal)
            for name, member in backends_for(d):
                try:
                    with sdpa_kernel(getattr(SDPBackend, member)), warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the refusal's reasons come as warnings
                        sdpa[f"{name}_ms"] = time_calls(
                            lambda s: F.scaled_dot_product_attention(s[0], s[1], s[2], is_causal=is_causal), sets)
                        if args.bwd:
                            sdpa[f"{name}_bwd_ms"] = time_sdpa_backward(torch, F, sets, is_causal, time_calls)
                except RuntimeError as error:
                    notes.append(f"d={d} {dtype_name}: SDPA {name} refused: {str(error).splitlines()[0]}")
            for mode in accumulators_for(dtype_name, args.acc):
                row = {"d": d, "dtype": dtype_name, "acc": mode, **sdpa}
                try:
                    measure_ffpa(ffpa, torch, handles[mode], attn, sets, expected, args, time_calls, row)
                except (ffpa.FfpaError, RuntimeError) as error:  # RuntimeError: PyTorch's (CUDA) errors
                    row["check"] = "ERROR"
                    notes.append(f"d={d} {dtype_name} acc={mode}: {str(error).splitlines()[0]}")
                rows.append(finish_row(row, flops))
                print(f"{dtype_name} d={d} acc={mode}: ffpa {cell(row, 'ffpa_tflops', '{:.1f}')} TFLOPS, "
                      f"efficient {cell(row, 'efficient_tflops', '{:.1f}')}, check {row.get('check', '-')}",
                      flush=True)
            del sets, expected
            torch.cuda.empty_cache()
    for handle in handles.values():
        handle.close()
    versions = f"PyTorch {torch.__version__}; {ffpa.build_info()}"
    return rows, notes, report_header(args, torch.cuda.get_device_name(), versions, gemm_tflops)


def reference_attention(torch, q, k, v, d_o, is_causal):
    """Attention in fp32, one (batch, head) at a time, so that only one head's scores are held
    whatever the head dim: (O, None) or, with d_o, (O, (dQ, dK, dV)), all fp32. The causal mask
    is SDPA's (top-left; the same as bottom-right here, where Nq = Nkv)."""
    batch, heads, seq_q, dim = q.shape
    seq_kv = k.shape[2]
    out = torch.empty(batch, heads, seq_q, v.shape[3], device=q.device, dtype=torch.float32)
    grads = None if d_o is None else [torch.empty(x.shape, device=x.device, dtype=torch.float32) for x in (q, k, v)]
    hidden = None
    if is_causal:
        hidden = torch.ones(seq_q, seq_kv, device=q.device, dtype=torch.bool).triu(1)
    for b in range(batch):
        for h in range(heads):
            with torch.enable_grad():
                leaves = [x[b, h].float().requires_grad_(grads is not None) for x in (q, k, v)]
                scores = (leaves[0] @ leaves[1].T) * dim ** -0.5
                if hidden is not None:
                    scores = scores.masked_fill(hidden, -math.inf)
                o = torch.softmax(scores, dim=-1) @ leaves[2]
                if grads is not None:
                    for grad, value in zip(grads, torch.autograd.grad(o, leaves, d_o[b, h].float())):
                        grad[b, h] = value
            out[b, h] = o.detach()
    return out, grads


def time_sdpa_backward(torch, F, sets, is_causal, time_calls):
    """The backward of one forward per input set, run again and again (retain_graph)."""
    graphs = []
    for q, k, v, do in sets:
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        graphs.append((F.scaled_dot_product_attention(*leaves, is_causal=is_causal), leaves, do))
    return time_calls(lambda g: torch.autograd.grad(g[0], g[1], g[2], retain_graph=True), graphs)


def ffpa_calls(ffpa, torch, handle, attn, sets, with_backward):
    """libffpa's forward(i) and backward(i) on input set i, through descriptors prepared once so
    that each call is one ctypes call; outputs and gradients poisoned (NaN), so that an element a
    call leaves unwritten shows in a check. Returns (forward, backward or None, outs, grads,
    kernel); backward(i) reads the O and LSE the forward of set i left."""
    q = sets[0][0]
    desc = ffpa.array_view(q).tensor_desc()
    outs = [torch.full_like(q, math.nan) for _ in sets]
    lses = [torch.empty(q.shape[:3], device=q.device, dtype=torch.float32) for _ in sets]
    lse_desc = ffpa.array_view(lses[0]).tensor_desc()
    nbytes = handle.forward_workspace_size(attn, desc, desc, desc, desc, lse_desc)
    workspace = torch.empty(max(nbytes, 1), device=q.device, dtype=torch.uint8)
    kernel = kernel_label(handle.describe_forward_plan(attn, desc, desc, desc, desc, lse_desc))

    # Per input set: the addresses of Q, K, V, dO, O and LSE.
    ptrs = [[t.data_ptr() if t is not None else 0 for t in (*s, o, lse)] for s, o, lse in zip(sets, outs, lses)]

    def forward(i):
        q, k, v, _, o, lse = ptrs[i]
        handle.forward(attn, desc, q, desc, k, desc, v, desc, o, lse=lse_desc, lse_ptr=lse,
                       workspace=workspace.data_ptr(), workspace_size=nbytes)

    if not with_backward:
        return forward, None, outs, None, kernel
    grads = [torch.full_like(q, math.nan) for _ in range(3)]
    back_bytes = handle.backward_workspace_size(attn, desc, desc, desc, desc, desc, lse_desc, desc, desc, desc)
    back = torch.empty(max(back_bytes, 1), device=q.device, dtype=torch.uint8)

    def backward(i):
        q, k, v, do, o, lse = ptrs[i]
        handle.backward(attn, desc, q, desc, k, desc, v, desc, o, desc, do, lse_desc, lse, desc,
                        grads[0].data_ptr(), desc, grads[1].data_ptr(), desc, grads[2].data_ptr(),
                        workspace=back.data_ptr(), workspace_size=back_bytes)

    return forward, backward, outs, grads, kernel


def gradient_ratios(grads, expected_grads):
    """max |dX - dX_fp32| / max |dX_fp32| for each of dQ, dK, dV."""
    return [(mine.float() - theirs).abs().max().item() / theirs.abs().max().item()
            for mine, theirs in zip(grads, expected_grads)]


def measure_ffpa(ffpa, torch, handle, attn, sets, expected, args, time_calls, row):
    """libffpa's forward (and backward) on the same tensors (ffpa_calls)."""
    forward, backward, outs, grads, row["kernel"] = ffpa_calls(ffpa, torch, handle, attn, sets, args.bwd)
    indices = list(range(len(sets)))
    expected_o, expected_grads = expected
    forward(0)
    difference = (outs[0].float() - expected_o).abs().max().item()
    row["max_abs"] = difference
    row["check"] = verdict(difference, expected_o.abs().max().item(), row["acc"])
    row["ffpa_ms"] = time_calls(forward, indices)
    if args.bwd:
        for i in indices:
            forward(i)  # each backward reads the O and LSE of its own input set
        backward(0)
        ratios = gradient_ratios(grads, expected_grads)
        row["bwd_max_rel"] = max(ratios, key=lambda r: math.inf if math.isnan(r) else r)
        row["bwd_check"] = gradient_verdict(ratios)
        row["ffpa_bwd_ms"] = time_calls(backward, indices)


def missing_cuda_torch():
    """None when PyTorch is installed and sees a CUDA GPU, else what is missing (for a message)."""
    try:
        import torch
    except ImportError as error:
        return str(error)
    return None if torch.cuda.is_available() else f"PyTorch {torch.__version__} sees no CUDA GPU"


def main(argv=None):
    args = parse_args(argv)
    path = library_path(args, os.environ)
    if path:
        os.environ["FFPA_LIBRARY"] = path
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    missing = missing_cuda_torch()
    if missing:
        print(f"side_by_side.py: needs PyTorch with a CUDA GPU ({missing}); nothing to time", file=sys.stderr)
        return 77
    import ffpa
    try:
        rows, notes, header = run(args)
    except ffpa.LibraryNotFound as error:
        print(f"side_by_side.py: {error} (see --lib and --build)", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    cols = columns(args.bwd)
    table = markdown_table(rows, cols)
    notes_text = "".join(f"- {note}\n" for note in notes)
    with open(os.path.join(args.out, "side_by_side.md"), "w") as out:
        out.write(header + table + ("\n" + notes_text if notes else ""))
    write_csv(os.path.join(args.out, "side_by_side.csv"), rows, cols)
    drawn = plot(os.path.join(args.out, "side_by_side.png"), plot_panels(rows, args.dtype),
                 f"libffpa and PyTorch SDPA, B={args.B} H={args.H} N={args.N}")
    print("\n" + header + table + notes_text)
    print(f"wrote {args.out}/side_by_side.md, .csv and .png (plot by {drawn})")
    return 1 if any(r.get(key) in ("FAIL", "ERROR") for r in rows for key in ("check", "bwd_check")) else 0


if __name__ == "__main__":
    sys.exit(main())
