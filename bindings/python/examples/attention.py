"""Attention through libffpa from Python.

With PyTorch and a GPU: a forward and a backward pass on bf16 tensors, checked against PyTorch's
own attention in fp32. Anywhere else: the plan libffpa would use for the same problem on a
described H100, which needs no GPU.

    PYTHONPATH=<libffpa>/bindings/python python3 attention.py
"""
import sys

import ffpa

B, H, N, D = 1, 8, 1024, 512


def plan_on_a_described_gpu():
    h100 = ffpa.DeviceDesc(sm_version=90, sm_count=132, shared_mem_per_block_optin=227 * 1024,
                           shared_mem_per_sm=228 * 1024, global_mem_bytes=80 << 30,
                           name="H100 (described)")
    with ffpa.Handle(device=h100) as handle:
        qkvo = ffpa.TensorDesc.bhnd(ffpa.DataType.BFLOAT16, B, H, N, D)
        attn = ffpa.AttentionDesc(causal=True)
        print(handle.describe_forward_plan(attn, qkvo, qkvo, qkvo, qkvo))


def run_on_the_gpu(torch):
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    o, lse = ffpa.forward(q, k, v, causal=True, lse=True)
    do = torch.randn_like(o)
    dq, dk, dv = ffpa.backward(q, k, v, o, do, lse, causal=True)

    # The same in PyTorch, in fp32, for comparison.
    q32, k32, v32 = (x.detach().float().requires_grad_() for x in (q, k, v))
    o32 = torch.nn.functional.scaled_dot_product_attention(q32, k32, v32, is_causal=True)
    o32.backward(do.float())
    for name, mine, reference in (("o", o, o32), ("dq", dq, q32.grad), ("dk", dk, k32.grad),
                                  ("dv", dv, v32.grad)):
        error = ((mine.float() - reference).norm() / reference.norm()).item()
        print(f"{name}: relative error {error:.2e} against PyTorch in fp32")
        if not error < 2e-2:
            sys.exit(f"{name} differs from PyTorch")


def main():
    print(ffpa.build_info())
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        torch, gpu = None, False
    if gpu:
        run_on_the_gpu(torch)
    else:
        print("no PyTorch with a GPU here: the plan for a described H100 instead")
        plan_on_a_described_gpu()


if __name__ == "__main__":
    main()
