"""forward() and backward() on PyTorch CUDA tensors, checked against attention computed by
PyTorch in fp32 from the same inputs. Skipped without PyTorch, without a CUDA device, or when
libffpa sees no device."""

import math

import pytest

import ffpa

try:
    import torch
except ImportError:  # every case below is then reported as skipped, one by one
    torch = None

pytestmark = pytest.mark.gpu

# Types by name, so that the cases can be listed without PyTorch.
TOLERANCE = {"float16": 1e-2, "bfloat16": 3e-2}


@pytest.fixture(scope="module", autouse=True)
def gpu():
    if torch is None:
        pytest.skip("PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    try:
        ffpa.Handle().close()
    except ffpa.NotInitializedError as error:
        pytest.skip(f"libffpa sees no device: {error.message}")


def inputs(b, hq, hkv, nq, nkv, dqk, dv, dtype, layout, seed=0):
    """Random q, k, v in ``layout``."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    dtype = getattr(torch, dtype)

    def tensor(h, n, d):
        shape = (b, n, h, d) if layout == "bnhd" else (b, h, n, d)
        return torch.randn(shape, generator=generator, device="cuda", dtype=dtype)
    return tensor(hq, nq, dqk), tensor(hkv, nkv, dqk), tensor(hkv, nkv, dv)


def reference(q, k, v, causal=False, scale=None, layout="bhnd"):
    """O and the log-sum-exp in fp32; a query row that sees no key gets O = 0, LSE = -inf."""
    if layout == "bnhd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    q, k, v = (x.float() for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    nq, nkv = s.shape[-2:]
    mode = ffpa.causal_mode(causal)
    if mode is not ffpa.CausalMode.NONE:
        offset = 0 if mode is ffpa.CausalMode.TOP_LEFT else nkv - nq
        visible = torch.ones(nq, nkv, dtype=torch.bool, device=s.device).tril(offset)
        s = s.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.softmax(s, dim=-1).nan_to_num(0.0) @ v
    return (o.transpose(1, 2) if layout == "bnhd" else o), lse


def assert_close(actual, expected, dtype):
    tolerance = TOLERANCE[dtype]  # dtype by name
    torch.testing.assert_close(actual.float(), expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
@pytest.mark.parametrize("causal", [False, True])
def test_forward(dtype, layout, causal):
    q, k, v = inputs(2, 4, 2, 128, 128, 128, 128, dtype, layout)
    o, lse = ffpa.forward(q, k, v, causal=causal, lse=True, layout=layout)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (2, 4, 128)
    expected_o, expected_lse = reference(q, k, v, causal, layout=layout)
    assert_close(o, expected_o, dtype)
    torch.testing.assert_close(lse, expected_lse, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("nq, nkv", [(64, 160), (160, 64)])
def test_bottom_right_mask_and_rows_without_keys(nq, nkv):
    q, k, v = inputs(1, 2, 1, nq, nkv, 64, 64, "float16", "bhnd", seed=1)
    o, lse = ffpa.forward(q, k, v, causal="bottom_right", lse=True)
    expected_o, expected_lse = reference(q, k, v, "bottom_right")
    assert_close(o, expected_o, "float16")
    torch.testing.assert_close(lse, expected_lse, atol=1e-3, rtol=1e-3)  # -inf where no key


def test_large_head_dims_and_scale():
    q, k, v = inputs(1, 4, 4, 96, 96, 576, 512, "float16", "bnhd", seed=2)
    o = ffpa.forward(q, k, v, causal=True, scale=0.03, layout="bnhd")
    assert o.shape == (1, 96, 4, 512)
    assert_close(o, reference(q, k, v, True, 0.03, "bnhd")[0], "float16")


def test_strided_views_and_given_output():
    # q, k and v sliced out of one fused projection [B, N, 3, H, D].
    qkv = torch.randn(2, 80, 3, 4, 64, device="cuda", dtype=torch.float16)
    q, k, v = qkv.unbind(dim=2)
    out = torch.empty(2, 4, 80, 64, device="cuda", dtype=torch.float16).transpose(1, 2)
    result = ffpa.forward(q, k, v, layout="bnhd", out=out)
    assert result is out
    assert_close(out, reference(q.contiguous(), k.contiguous(), v.contiguous(),
                                layout="bnhd")[0], "float16")


def test_tensors_that_require_grad_are_read_directly():
    q, k, v = (x.requires_grad_() for x in inputs(1, 2, 2, 32, 32, 64, 64, "bfloat16", "bhnd"))
    o = ffpa.forward(q, k, v)
    assert not o.requires_grad
    assert_close(o, reference(q.detach(), k.detach(), v.detach())[0], "bfloat16")


def test_side_stream():
    q, k, v = inputs(1, 2, 2, 64, 64, 128, 128, "float16", "bhnd", seed=3)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        o = ffpa.forward(q, k, v)
    assert ffpa._attention._handles[q.device.index].stream == stream.cuda_stream
    o2 = ffpa.forward(q, k, v, stream=stream)
    stream.synchronize()
    assert_close(o, reference(q, k, v)[0], "float16")
    assert torch.equal(o, o2)


class OnlyDLPack:
    """Exposes a tensor through DLPack only."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        return self.tensor.__dlpack__()

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


class OnlyInterface:
    """Exposes a tensor through __cuda_array_interface__ only."""

    def __init__(self, tensor):
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


def test_dlpack_and_array_interface_objects():
    q, k, v = inputs(1, 2, 2, 48, 48, 64, 64, "float16", "bhnd", seed=4)
    expected = reference(q, k, v)[0]
    assert_close(ffpa.forward(*map(OnlyDLPack, (q, k, v))), expected, "float16")
    assert_close(ffpa.forward(*map(OnlyInterface, (q, k, v))), expected, "float16")


def test_bfloat16_through_the_array_interface():
    q, k, v = inputs(1, 2, 2, 48, 48, 64, 64, "bfloat16", "bhnd", seed=5)
    try:
        wrapped = [OnlyInterface(x) for x in (q, k, v)]
    except (KeyError, TypeError) as error:
        pytest.skip(f"this PyTorch exports no bfloat16 array interface: {error!r}")
    assert_close(ffpa.forward(*wrapped), reference(q, k, v)[0], "bfloat16")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout, causal", [("bhnd", False), ("bnhd", True)])
def test_backward(dtype, layout, causal):
    q, k, v = inputs(2, 4, 2, 64, 96, 128, 64, dtype, layout, seed=6)
    do = torch.randn_like(ffpa.forward(q, k, v, layout=layout))
    o, lse = ffpa.forward(q, k, v, causal=causal, lse=True, layout=layout)
    dq, dk, dv = ffpa.backward(q, k, v, o, do, lse, causal=causal, layout=layout)
    leaves = [x.detach().float().requires_grad_() for x in (q, k, v)]
    expected_o, _ = reference(*leaves, causal, layout=layout)
    expected_o.backward(do.float())
    for name, got, leaf in zip(("dq", "dk", "dv"), (dq, dk, dv), leaves):
        assert got.shape == leaf.shape and got.dtype == q.dtype, name
        error = (got.float() - leaf.grad).abs().max().item()
        assert error <= 3 * TOLERANCE[dtype] * max(leaf.grad.abs().max().item(), 1.0), name


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout, causal", [("bhnd", True), ("bnhd", "bottom_right")])
def test_attention_under_autograd(dtype, layout, causal):
    q, k, v = (x.requires_grad_() for x in inputs(2, 4, 2, 64, 96, 128, 64, dtype, layout, seed=7))
    o = ffpa.attention(q, k, v, causal=causal, layout=layout)
    assert o.requires_grad and o.dtype == q.dtype
    do = torch.randn_like(o)
    (o * do).sum().backward()  # the gradient reaches the library as do, through autograd
    leaves = [x.detach().float().requires_grad_() for x in (q, k, v)]
    expected_o, _ = reference(*leaves, causal, layout=layout)
    assert_close(o.detach(), expected_o.detach(), dtype)
    expected_o.backward(do.float())
    for name, x, leaf in zip(("dq", "dk", "dv"), (q, k, v), leaves):
        assert x.grad.shape == x.shape and x.grad.dtype == x.dtype, name
        error = (x.grad.float() - leaf.grad).abs().max().item()
        assert error <= 3 * TOLERANCE[dtype] * max(leaf.grad.abs().max().item(), 1.0), name


def test_packed_sequences_under_autograd():
    """A packed variable-length batch (attention slices from cu_seqlens-style offsets) through
    ffpa.attention, each sequence checked against its own causal attention."""
    offsets, tokens, heads, dim = [0, 40, 64, 160], 160, 4, 128
    generator = torch.Generator(device="cuda").manual_seed(8)
    q, k, v = (torch.randn(1, tokens, heads, dim, generator=generator, device="cuda",
                           dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    with ffpa.Handle() as handle:
        attn = ffpa.AttentionDesc()
        attn.set_slices(ffpa.AttentionSlices(handle).set_from_offsets(offsets, mask=ffpa.SliceMask.CAUSAL))
        o = ffpa.attention(q, k, v, attn=attn, handle=handle, layout="bnhd")
        do = torch.randn_like(o)
        (o * do).sum().backward()
        torch.cuda.synchronize()
    for start, end in zip(offsets, offsets[1:]):
        leaves = [x.detach()[:, start:end].float().requires_grad_() for x in (q, k, v)]
        expected_o, _ = reference(*leaves, True, layout="bnhd")
        assert_close(o.detach()[:, start:end], expected_o.detach(), "bfloat16")
        expected_o.backward(do[:, start:end].float())
        for name, x, leaf in zip(("dq", "dk", "dv"), (q, k, v), leaves):
            error = (x.grad[:, start:end].float() - leaf.grad).abs().max().item()
            assert error <= 3 * TOLERANCE["bfloat16"] * max(leaf.grad.abs().max().item(), 1.0), name
