"""forward() and backward() on CuPy arrays, checked against attention computed by CuPy in fp32.
Skipped without CuPy, without a CUDA device, or when libffpa sees no device."""

import math

import pytest

import ffpa

try:
    import cupy
except ImportError:  # every case below is then reported as skipped, one by one
    cupy = None

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def gpu():
    if cupy is None:
        pytest.skip("CuPy is not installed")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("CuPy sees no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as error:
        pytest.skip(f"CuPy sees no CUDA device: {error}")
    try:
        ffpa.Handle().close()
    except ffpa.NotInitializedError as error:
        pytest.skip(f"libffpa sees no device: {error.message}")


def reference(q, k, v, causal):
    """O, the log-sum-exp and the probabilities in fp32, for [B, H, N, D] arrays with Hq = Hkv."""
    q, k, v = (x.astype(cupy.float32) for x in (q, k, v))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = cupy.where(cupy.tril(cupy.ones((n, n), dtype=bool)), s, -cupy.inf)
    top = s.max(axis=-1, keepdims=True)
    e = cupy.exp(s - top)
    total = e.sum(axis=-1, keepdims=True)
    p = e / total
    return p @ v, (top + cupy.log(total))[..., 0], p


@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
def test_forward(layout):
    rng = cupy.random.default_rng(0)
    shape = (2, 64, 4, 128) if layout == "bnhd" else (2, 4, 64, 128)
    q, k, v = (rng.standard_normal(shape, dtype=cupy.float32).astype(cupy.float16)
               for _ in range(3))
    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.Stream.null.synchronize()  # the inputs were made on the null stream
    o, lse = ffpa.forward(q, k, v, causal=True, lse=True, layout=layout, stream=stream)
    stream.synchronize()
    assert isinstance(o, cupy.ndarray) and o.shape == shape and o.dtype == cupy.float16
    if layout == "bnhd":
        q, k, v, o = (x.transpose(0, 2, 1, 3) for x in (q, k, v, o))
    expected_o, expected_lse, _ = reference(q, k, v, True)
    assert float(abs(o.astype(cupy.float32) - expected_o).max()) < 1e-2
    assert float(abs(lse - expected_lse).max()) < 1e-3


def test_backward():
    rng = cupy.random.default_rng(1)
    q, k, v, do = (rng.standard_normal((1, 2, 48, 64), dtype=cupy.float32).astype(cupy.float16)
                   for _ in range(4))
    o, lse = ffpa.forward(q, k, v, lse=True)
    dq, dk, dv = ffpa.backward(q, k, v, o, do, lse)
    cupy.cuda.get_current_stream().synchronize()
    f32 = [x.astype(cupy.float32) for x in (q, k, v, do)]
    expected_o, _, p = reference(q, k, v, False)
    dp = f32[3] @ f32[2].transpose(0, 1, 3, 2)
    ds = p * (dp - (f32[3] * expected_o).sum(axis=-1, keepdims=True)) / math.sqrt(64)
    expected = {"dq": ds @ f32[1], "dk": ds.transpose(0, 1, 3, 2) @ f32[0],
                "dv": p.transpose(0, 1, 3, 2) @ f32[3]}
    for name, got in zip(("dq", "dk", "dv"), (dq, dk, dv)):
        want = expected[name]
        error = float(abs(got.astype(cupy.float32) - want).max())
        assert error <= 3e-2 * max(float(abs(want).max()), 1.0), name
