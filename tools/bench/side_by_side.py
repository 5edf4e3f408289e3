#!/usr/bin/env python3
"""libffpa against PyTorch's scaled_dot_product_attention, in one run, on the same inputs.

    FFPA_LIBRARY=build/libffpa.so.0 PYTHONPATH=bindings/python python3 tools/bench/side_by_side.py \
        [--B 1] [--H 48] [--N 8192] [--D 64,128,256,320:1024:64] [--dtype f16,bf16] [--causal]
        [--iters 20] [--out DIR]

For each head dim and dtype: libffpa's forward (default policies), SDPA with EFFICIENT_ATTENTION
and, where d <= 256, FLASH_ATTENTION and CUDNN_ATTENTION (a backend that refuses a shape is
left out). CUDA events, warm-up, median of --iters calls over rotated input sets. libffpa's output
is checked against SDPA's (FAIL in the table when off). Writes DIR/side_by_side.md, .csv and .png
(TFLOPS by head dim), and prints the Markdown table and a cuBLAS bf16 GEMM ceiling.
"""
import argparse
import csv
import math
import os
import statistics
import struct
import sys
import zlib

BACKENDS = ("EFFICIENT_ATTENTION", "FLASH_ATTENTION", "CUDNN_ATTENTION")


def head_dims(text):
    dims = []
    for part in text.split(","):
        if ":" in part:
            first, last, step = (int(x) for x in part.split(":"))
            dims.extend(range(first, last + 1, step))
        else:
            dims.append(int(part))
    return dims


def forward_flops(b, h, nq, nkv, dqk, dv, causal):
    return 2.0 * b * h * nq * nkv * (dqk + dv) * (0.5 if causal else 1.0)


def markdown(rows, columns):
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_png(path, series, labels, width=900, height=500):
    """A line plot (one colour per series, y from 0) as an RGB PNG, with zlib only."""
    pixels = [[(255, 255, 255)] * width for _ in range(height)]
    colours = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189)]
    top = max([v for values in series.values() for v in values if v] + [1.0])
    margin = 40

    def point(i, value):
        x = margin + i * (width - 2 * margin) // max(len(labels) - 1, 1)
        y = height - margin - int((height - 2 * margin) * value / top)
        return x, y

    for x in range(margin, width - margin):
        pixels[height - margin][x] = (0, 0, 0)
    for y in range(margin, height - margin):
        pixels[y][margin] = (0, 0, 0)
    for colour, values in zip(colours, series.values()):
        previous = None
        for i, value in enumerate(values):
            if not value:
                previous = None
                continue
            x, y = point(i, value)
            for dx in range(-2, 3):
                for dy in range(-2, 3):
                    pixels[min(max(y + dy, 0), height - 1)][min(max(x + dx, 0), width - 1)] = colour
            if previous:
                steps = max(abs(x - previous[0]), abs(y - previous[1]), 1)
                for s in range(steps):
                    px = previous[0] + (x - previous[0]) * s // steps
                    py = previous[1] + (y - previous[1]) * s // steps
                    pixels[py][px] = colour
            previous = (x, y)
    raw = b"".join(b"\x00" + bytes(c for p in row for c in p) for row in pixels)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                  + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def plot(path, series, labels, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        write_png(path, series, labels)
        return
    fig, ax = plt.subplots(figsize=(10, 5))
    for name, values in series.items():
        ax.plot(labels, [v if v else float("nan") for v in values], marker="o", label=name)
    ax.set_xlabel("head dim")
    ax.set_ylabel("TFLOPS")
    ax.set_title(title)
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--B", type=int, default=1)
    parser.add_argument("--H", type=int, default=48)
    parser.add_argument("--N", type=int, default=8192)
    parser.add_argument("--D", type=head_dims, default=head_dims("64,128,256,320:1024:64"))
    parser.add_argument("--dtype", default="f16,bf16")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rotate", type=int, default=2)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    import ffpa

    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16}
    os.makedirs(args.out, exist_ok=True)
    device = torch.device("cuda")

    def timed(fn, inputs):
        for i in range(3):
            fn(*inputs[i % len(inputs)])
        times = []
        for i in range(args.iters):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*inputs[i % len(inputs)])
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        return statistics.median(times)

    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    gemm_ms = timed(lambda x: x @ x, [(a,)])
    print(f"cuBLAS bf16 GEMM 8192^3: {2 * 8192 ** 3 / gemm_ms / 1e9:.0f} TFLOPS "
          f"({torch.cuda.get_device_name()})")
    del a

    rows = []
    for dname in args.dtype.split(","):
        dtype = dtypes[dname]
        for d in args.D:
            shape = (args.B, args.H, args.N, d)
            inputs = [tuple(torch.empty(shape, device=device, dtype=dtype).uniform_(-2 if j < 2 else -1, 2 if j < 2 else 1)
                            for j in range(3)) for _ in range(args.rotate)]
            flops = forward_flops(args.B, args.H, args.N, args.N, d, d, args.causal)
            row = {"dtype": dname, "d": d}
            mine = ffpa.forward(*inputs[0], causal=args.causal)
            try:
                ms = timed(lambda q, k, v: ffpa.forward(q, k, v, causal=args.causal), inputs)
                row["ffpa ms"] = f"{ms:.3f}"
                row["ffpa TFLOPS"] = round(flops / ms / 1e9, 1)
            except ffpa.FfpaError as error:
                row["ffpa ms"] = f"error: {error}"
            for backend in BACKENDS:
                if backend != "EFFICIENT_ATTENTION" and d > 256:
                    continue
                try:
                    with sdpa_kernel(getattr(SDPBackend, backend)):
                        ms = timed(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=args.causal),
                                   inputs)
                        if backend == "EFFICIENT_ATTENTION":
                            theirs = F.scaled_dot_product_attention(*inputs[0], is_causal=args.causal)
                            error = (mine.float() - theirs.float()).abs().max().item()
                            row["max abs vs SDPA"] = f"{error:.2e}"
                            row["check"] = "ok" if error <= 2e-2 and not math.isnan(error) else "FAIL"
                    row[backend + " TFLOPS"] = round(flops / ms / 1e9, 1)
                except RuntimeError:
                    pass
            for backend, short in (("EFFICIENT_ATTENTION", "efficient"), ("FLASH_ATTENTION", "flash")):
                if row.get(backend + " TFLOPS") and row.get("ffpa TFLOPS"):
                    row["vs " + short] = f"{row['ffpa TFLOPS'] / row[backend + ' TFLOPS']:.2f}x"
            rows.append(row)
            print(row, flush=True)
            del inputs, mine
            torch.cuda.empty_cache()

    columns = ["dtype", "d", "ffpa ms", "ffpa TFLOPS"] + [b + " TFLOPS" for b in BACKENDS] + [
        "vs efficient", "vs flash", "max abs vs SDPA", "check"]
    table = markdown(rows, columns)
    with open(os.path.join(args.out, "side_by_side.md"), "w") as out:
        out.write(f"{torch.cuda.get_device_name()}, B={args.B} H={args.H} N={args.N}"
                  f"{' causal' if args.causal else ''}, median of {args.iters}\n\n" + table)
    with open(os.path.join(args.out, "side_by_side.csv"), "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    for dname in args.dtype.split(","):
        subset = [r for r in rows if r["dtype"] == dname]
        series = {name: [r.get(key) for r in subset] for name, key in
                  (("libffpa", "ffpa TFLOPS"), ("SDPA efficient", "EFFICIENT_ATTENTION TFLOPS"),
                   ("SDPA flash", "FLASH_ATTENTION TFLOPS"), ("SDPA cuDNN", "CUDNN_ATTENTION TFLOPS"))}
        plot(os.path.join(args.out, f"side_by_side_{dname}.png"), series, [r["d"] for r in subset],
             f"{torch.cuda.get_device_name()} {dname}: forward TFLOPS")
    print(table)
    return 1 if any(r.get("check") == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
