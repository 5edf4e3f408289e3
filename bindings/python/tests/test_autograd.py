"""attention() under PyTorch's autograd, on the CPU: the library's forward and backward are
replaced by float64 references of what they compute (the same formulas: P from the saved
log-sum-exp, delta = rowsum(dO * O)), so that gradcheck checks the plumbing (which tensors are
kept, the order of the gradients, layouts, grouped heads, masks, the gradient handed over) against
numerical derivatives. What the GPU computes is checked in test_gpu_torch.py. Skipped without
PyTorch (Debian: python3-torch)."""

import math

import pytest

import ffpa
from ffpa import _attention

torch = pytest.importorskip("torch")


def to_bhnd(layout, *tensors):
    return [x.transpose(1, 2) if layout == "bnhd" else x for x in tensors]


def probabilities(q, k, lse, causal, scale):
    """P = exp(scale * q k^T - lse) in [B, H, Nq, Nkv], k's heads repeated for each query head."""
    group = q.shape[1] // k.shape[1]
    s = (q @ k.repeat_interleave(group, dim=1).transpose(-1, -2)) * scale
    nq, nkv = s.shape[-2:]
    mode = ffpa.causal_mode(causal)
    if mode is not ffpa.CausalMode.NONE:
        offset = 0 if mode is ffpa.CausalMode.TOP_LEFT else nkv - nq
        s = s.masked_fill(~torch.ones(nq, nkv, dtype=torch.bool).tril(offset), float("-inf"))
    if lse is None:
        lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0), lse


def fake_forward(q, k, v, *, causal=False, scale=None, lse=False, layout="bhnd"):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    qb, kb, vb = to_bhnd(layout, q, k, v)
    p, row_lse = probabilities(qb, kb, None, causal, scale)
    o = p @ vb.repeat_interleave(qb.shape[1] // kb.shape[1], dim=1)
    o = to_bhnd(layout, o)[0].contiguous()
    return (o, row_lse) if lse else o


def fake_backward(q, k, v, o, do, lse, *, causal=False, scale=None, layout="bhnd"):
    assert do.stride(-1) == 1, "the library takes unit stride on D"
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    qb, kb, vb, ob, dob = to_bhnd(layout, q, k, v, o, do)
    group = qb.shape[1] // kb.shape[1]
    p, _ = probabilities(qb, kb, lse, causal, scale)
    dp = dob @ vb.repeat_interleave(group, dim=1).transpose(-1, -2)
    ds = p * (dp - (dob * ob).sum(-1, keepdim=True))
    dq = scale * ds @ kb.repeat_interleave(group, dim=1)

    def per_kv_head(x):  # [B, Hq, Nkv, D] summed over the query heads of each group
        return x.unflatten(1, (kb.shape[1], group)).sum(2)

    dk = per_kv_head(scale * ds.transpose(-1, -2) @ qb)
    dv = per_kv_head(p.transpose(-1, -2) @ dob)
    return tuple(to_bhnd(layout, g)[0].contiguous() for g in (dq, dk, dv))


@pytest.fixture
def calls(monkeypatch):
    """The library's entry points replaced by the references; records each call's options."""
    recorded = []

    def passed_through(kwargs):  # what the references do not look at
        return {name: value for name, value in kwargs.items() if name not in ("attn", "handle")}

    def forward(*args, **kwargs):
        recorded.append(("forward", kwargs))
        return fake_forward(*args, **passed_through(kwargs))

    def backward(*args, **kwargs):
        recorded.append(("backward", kwargs))
        return fake_backward(*args, **passed_through(kwargs))

    monkeypatch.setattr(_attention, "forward", forward)
    monkeypatch.setattr(_attention, "backward", backward)
    return recorded


def inputs(b, hq, hkv, nq, nkv, dqk, dv, layout, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def tensor(h, n, d):
        shape = (b, n, h, d) if layout == "bnhd" else (b, h, n, d)
        return torch.randn(shape, generator=generator, dtype=torch.float64, requires_grad=True)
    return tensor(hq, nq, dqk), tensor(hkv, nkv, dqk), tensor(hkv, nkv, dv)


@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
@pytest.mark.parametrize("causal", [False, "top_left", "bottom_right"])
@pytest.mark.parametrize("hq, hkv, nq, nkv", [(2, 2, 5, 5), (4, 2, 3, 6), (4, 1, 6, 4)])
def test_gradients_match_numerical_derivatives(calls, layout, causal, hq, hkv, nq, nkv):
    q, k, v = inputs(1, hq, hkv, nq, nkv, 4, 3, layout)

    def function(q, k, v):
        return ffpa.attention(q, k, v, causal=causal, scale=0.7, layout=layout)
    assert torch.autograd.gradcheck(function, (q, k, v), eps=1e-6, atol=1e-6)
    forward_options = [options for name, options in calls if name == "forward"]
    backward_options = [options for name, options in calls if name == "backward"]
    assert forward_options and backward_options
    assert all(o == {"causal": causal, "scale": 0.7, "lse": True, "layout": layout} for o in forward_options)
    assert all(o == {"causal": causal, "scale": 0.7, "layout": layout} for o in backward_options)


def test_a_broadcast_gradient_reaches_the_library_with_unit_stride(calls):
    q, k, v = inputs(2, 2, 2, 4, 4, 8, 8, "bnhd", seed=1)
    ffpa.attention(q, k, v, causal=True, layout="bnhd").sum().backward()  # dO: one element, broadcast
    expected = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    qb, kb, vb = to_bhnd("bnhd", *expected)
    p, _ = probabilities(qb, kb, None, True, 1 / math.sqrt(8))
    to_bhnd("bnhd", p @ vb)[0].sum().backward()
    for got, want in zip((q, k, v), expected):
        torch.testing.assert_close(got.grad, want.grad)


def test_only_the_gradients_asked_for(calls):
    q, k, v = inputs(1, 2, 2, 4, 4, 8, 8, "bhnd", seed=2)
    k.requires_grad_(False)
    v.requires_grad_(False)
    ffpa.attention(q, k, v).sum().backward()
    assert q.grad is not None and k.grad is None and v.grad is None


def test_without_gradients_it_is_the_forward(calls):
    q, k, v = inputs(1, 2, 2, 4, 4, 8, 8, "bhnd", seed=3)
    with torch.no_grad():
        o = ffpa.attention(q, k, v, causal=True)
    assert not o.requires_grad
    q, k, v = (x.detach() for x in (q, k, v))
    assert not ffpa.attention(q, k, v).requires_grad
    assert [name for name, _ in calls] == ["forward", "forward"]
    assert all("lse" not in options for _, options in calls)  # nothing kept for a backward


def test_a_descriptor_and_a_handle_reach_both_calls(calls):
    q, k, v = inputs(1, 2, 2, 4, 4, 8, 8, "bhnd", seed=4)
    attn, handle = object(), object()  # passed through as they are (the library checks them)
    ffpa.attention(q, k, v, attn=attn, handle=handle).sum().backward()
    assert [name for name, _ in calls] == ["forward", "backward"]
    for _, options in calls:
        assert options["attn"] is attn and options["handle"] is handle


def test_second_derivatives_are_refused(calls):
    q, k, v = inputs(1, 2, 2, 4, 4, 8, 8, "bhnd", seed=5)
    # (o ** 2).sum(): dO = 2 o carries a graph, as in a gradient penalty.
    (dq,) = torch.autograd.grad((ffpa.attention(q, k, v) ** 2).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        dq.sum().backward()
