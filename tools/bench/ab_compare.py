#!/usr/bin/env python3
"""Two builds of libffpa against each other, their calls interleaved in one process.

    python3 tools/bench/ab_compare.py --a LIB --b LIB [--label-a NAME --label-b NAME]
        [--D DIMS] [--dtype ...] [--B/--H/--N] [--causal MODE] [--bwd] [--policy NAME=VALUE]
        [--warmup N] [--iters N] [--rotate N] [--out DIR]

A kernel change of a few percent hides in the spread between two runs of the same kernel on the
lent GPU (the Hopper forward at d = 512 measured 541 and 575 TFLOPS minutes apart). So both
libraries are loaded into this process (the bindings' package twice, each copy bound to its own
libffpa.so.0), and every timed iteration calls both on the same tensors, in alternating order
(A B, B A, ...), each call between CUDA events: clocks, temperature and the L2's contents then
weigh on both alike. Each output (and with --bwd each gradient) is checked against fp32 attention
as side_by_side.py checks its rows.

Writes DIR/ab_compare.md: per dtype and head dim, the median ms and TFLOPS of A and of B and
A/B as a speed ratio (above 1: A is faster). Exit status: 0 done, 1 a check or a call failed,
2 bad options, 77 no PyTorch with CUDA.
"""
import argparse
import importlib.util
import os
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
PACKAGE = REPO / "bindings" / "python" / "ffpa"
sys.path.insert(0, str(HERE))
import side_by_side as sbs  # noqa: E402  (after the path is set)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", required=True, help="libffpa.so.0 of build A (or its directory)")
    parser.add_argument("--b", required=True, help="libffpa.so.0 of build B (or its directory)")
    parser.add_argument("--label-a", default="A", help="A's name in the table (default A)")
    parser.add_argument("--label-b", default="B", help="B's name in the table (default B)")
    parser.add_argument("--B", type=sbs.positive(1), default=1, help="batch (default 1)")
    parser.add_argument("--H", type=sbs.positive(1), default=32, help="heads (default 32)")
    parser.add_argument("--N", type=sbs.positive(1), default=8192, help="sequence length (default 8192)")
    parser.add_argument("--D", type=sbs.head_dims, default=sbs.head_dims("320:1024:64"),
                        help="head dims: a list and start:stop:step ranges (default 320:1024:64)")
    parser.add_argument("--dtype", type=sbs.choices_list(sbs.DTYPES), default=["bf16"],
                        help="f16, bf16 or both (default bf16)")
    parser.add_argument("--causal", choices=sbs.CAUSAL, default="none", help="mask (default none)")
    parser.add_argument("--policy", type=sbs.policy, action="append", default=[],
                        help="NAME=VALUE set on both handles; repeatable")
    parser.add_argument("--bwd", action="store_true", help="time the backward passes too")
    parser.add_argument("--warmup", type=sbs.positive(0), default=2, help="untimed calls of each first (default 2)")
    parser.add_argument("--iters", type=sbs.positive(1), default=10, help="timed calls of each (default 10)")
    parser.add_argument("--rotate", type=sbs.positive(1), default=2, help="input sets used in turn (default 2)")
    parser.add_argument("--out", default="bench-results/ab", help="output directory (default bench-results/ab)")
    return parser.parse_args(argv)


def library_file(path):
    """The library file of --a or --b: the path itself, or libffpa.so.0 in that directory."""
    path = pathlib.Path(path)
    return str(path / "libffpa.so.0") if path.is_dir() else str(path)


def load_package(name, library):
    """The bindings' package imported as module `name`, bound to the libffpa file `library`: a
    second copy of the package has its own loaded library, so that two builds live side by side
    (each ctypes.CDLL of a different file is a separate RTLD_LOCAL object)."""
    spec = importlib.util.spec_from_file_location(name, PACKAGE / "__init__.py",
                                                  submodule_search_locations=[str(PACKAGE)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    saved = os.environ.get("FFPA_LIBRARY")
    os.environ["FFPA_LIBRARY"] = str(library)
    try:
        module.library()  # loads now, while FFPA_LIBRARY names this build
    finally:
        if saved is None:
            del os.environ["FFPA_LIBRARY"]
        else:
            os.environ["FFPA_LIBRARY"] = saved
    return module


def speed_ratio(ms_a, ms_b):
    """How much faster A is than B (B's time over A's), or None where either is missing."""
    if not ms_a or not ms_b:
        return None
    return ms_b / ms_a


def interleaved_medians(calls, iters, timed):
    """Median ms of each of `calls` (functions of the iteration index) over `iters` iterations,
    each iteration calling all of them, in reversed order every other iteration. `timed(call, i)`
    times one call."""
    times = [[] for _ in calls]
    for i in range(iters):
        order = list(range(len(calls)))
        if i % 2:
            order.reverse()
        for which in order:
            times[which].append(timed(calls[which], i))
    return [statistics.median(t) for t in times]


COLUMNS = [("d", "d", "{}"), ("dtype", "dtype", "{}"),
           ("a_ms", "{a} ms", "{:.3f}"), ("b_ms", "{b} ms", "{:.3f}"),
           ("a_tflops", "{a} TFLOPS", "{:.1f}"), ("b_tflops", "{b} TFLOPS", "{:.1f}"),
           ("ratio", "{a}/{b}", "{:.3f}x"), ("a_check", "{a} check", "{}"), ("b_check", "{b} check", "{}")]
BACKWARD_COLUMNS = [("a_bwd_ms", "{a} bwd ms", "{:.3f}"), ("b_bwd_ms", "{b} bwd ms", "{:.3f}"),
                    ("a_bwd_tflops", "{a} bwd TFLOPS", "{:.1f}"), ("b_bwd_tflops", "{b} bwd TFLOPS", "{:.1f}"),
                    ("bwd_ratio", "bwd {a}/{b}", "{:.3f}x"), ("a_bwd_check", "{a} bwd check", "{}"),
                    ("b_bwd_check", "{b} bwd check", "{}")]


def finish(row, flops):
    """Adds TFLOPS and ratios to a row of times."""
    for side in ("a", "b"):
        if row.get(f"{side}_ms"):
            row[f"{side}_tflops"] = sbs.tflops(flops, row[f"{side}_ms"])
        if row.get(f"{side}_bwd_ms"):
            row[f"{side}_bwd_tflops"] = sbs.tflops(sbs.backward_flops(flops), row[f"{side}_bwd_ms"])
    row["ratio"] = speed_ratio(row.get("a_ms"), row.get("b_ms"))
    row["bwd_ratio"] = speed_ratio(row.get("a_bwd_ms"), row.get("b_bwd_ms"))
    return row


def table(rows, labels, backward):
    """The Markdown table of `rows`, headings named after the two builds."""
    a, b = labels
    cols = COLUMNS + (BACKWARD_COLUMNS if backward else [])
    head = [title.format(a=a, b=b) for _, title, _ in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        cells = []
        for key, _, fmt in cols:
            value = row.get(key)
            cells.append("-" if value is None else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def prepare(module, torch, args, sets):
    """One build's handle, with the --policy settings, and its calls over the input sets
    (side_by_side.ffpa_calls): (forward, backward or None, outs, grads, kernel, close)."""
    handle = module.Handle()
    handle.stream = torch.cuda.current_stream().cuda_stream
    for name, value in args.policy:
        handle.set_policy(name, int(value) if value.lstrip("-").isdigit() else value)
    calls = sbs.ffpa_calls(module, torch, handle, module.AttentionDesc(causal=args.causal), sets, args.bwd)
    return (*calls, handle.close)


def run(args):
    import torch

    sides = {"a": load_package("ffpa_ab_a", library_file(args.a)),
             "b": load_package("ffpa_ab_b", library_file(args.b))}
    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16}
    stream = torch.cuda.current_stream()
    is_causal = args.causal != "none"

    def timed(call, i):
        return sbs.time_call(torch, stream, call, (args.warmup + i) % args.rotate)

    rows, notes = [], []
    generator = torch.Generator(device="cuda")
    for dtype_name in args.dtype:
        for d in args.D:
            generator.manual_seed(16 * d + args.dtype.index(dtype_name))
            shape = (args.B, args.H, args.N, d)

            def uniform(bound):
                return torch.empty(shape, device="cuda", dtype=dtypes[dtype_name]).uniform_(
                    -bound, bound, generator=generator)

            sets = [(uniform(2), uniform(2), uniform(1), uniform(1) if args.bwd else None)
                    for _ in range(args.rotate)]
            expected_o, expected_grads = sbs.reference_attention(torch, *sets[0], is_causal)
            row = {"d": d, "dtype": dtype_name}
            try:
                prepared = {side: prepare(module, torch, args, sets) for side, module in sides.items()}
                for side, (forward, backward, outs, grads, kernel, _) in prepared.items():
                    forward(0)
                    difference = (outs[0].float() - expected_o).abs().max().item()
                    row[f"{side}_check"] = sbs.verdict(difference, expected_o.abs().max().item(), "f32")
                    row[f"{side}_kernel"] = kernel
                    for i in range(args.warmup):
                        forward(i % len(sets))
                row["a_ms"], row["b_ms"] = interleaved_medians(
                    [prepared["a"][0], prepared["b"][0]], args.iters, timed)
                if args.bwd:
                    for side, (forward, backward, outs, grads, _, _) in prepared.items():
                        for i in range(len(sets)):
                            forward(i)  # each backward reads the O and LSE of its own input set
                        backward(0)
                        row[f"{side}_bwd_check"] = sbs.gradient_verdict(sbs.gradient_ratios(grads, expected_grads))
                        for i in range(args.warmup):
                            backward(i % len(sets))
                    row["a_bwd_ms"], row["b_bwd_ms"] = interleaved_medians(
                        [prepared["a"][1], prepared["b"][1]], args.iters, timed)
                for *_, close in prepared.values():
                    close()
            except (sides["a"].FfpaError, sides["b"].FfpaError, RuntimeError) as error:  # RuntimeError: CUDA's
                row.setdefault("a_check", "ERROR")
                row.setdefault("b_check", "ERROR")
                notes.append(f"d={d} {dtype_name}: {str(error).splitlines()[0]}")
            rows.append(finish(row, sbs.forward_flops(args.B, args.H, args.N, args.N, d, d, args.causal)))
            ratio = row.get("ratio")
            print(f"{dtype_name} d={d}: {args.label_a} {row.get('a_ms')} ms, {args.label_b} {row.get('b_ms')} ms, "
                  f"{args.label_a}/{args.label_b} {'-' if ratio is None else f'{ratio:.3f}x'} "
                  f"({row.get('a_kernel', '?')} / {row.get('b_kernel', '?')})", flush=True)
            del sets
            torch.cuda.empty_cache()
    header = (f"# {args.label_a} against {args.label_b}\n\n{torch.cuda.get_device_name()}; B={args.B} H={args.H} "
              f"N={args.N} causal={args.causal}; calls interleaved, median of {args.iters} of each after "
              f"{args.warmup} warm-up, {args.rotate} input sets in turn; {args.label_a}/{args.label_b}: "
              f"{args.label_b}'s time over {args.label_a}'s\n\n")
    return rows, notes, header


def main(argv=None):
    args = parse_args(argv)
    missing = sbs.missing_cuda_torch()
    if missing:
        print(f"ab_compare.py: needs PyTorch with a CUDA GPU ({missing}); nothing to time", file=sys.stderr)
        return 77
    rows, notes, header = run(args)
    text = header + table(rows, (args.label_a, args.label_b), args.bwd) + "".join(f"- {n}\n" for n in notes)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ab_compare.md"), "w") as out:
        out.write(text)
    print("\n" + text)
    failed = any(row.get(k) in ("FAIL", "ERROR") for row in rows
                 for k in ("a_check", "b_check", "a_bwd_check", "b_bwd_check"))
    return 1 if failed or notes else 0


if __name__ == "__main__":
    sys.exit(main())
