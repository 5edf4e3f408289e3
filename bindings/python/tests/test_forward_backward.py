"""forward() and backward() without a GPU: a fake array library allocates, and a handle for a
described device checks every argument before refusing to execute."""

import sys

import pytest

import ffpa
from ffpa import _attention
from conftest import FakeArray, FakeBackend

F16 = ffpa.DataType.FLOAT16


def qkv(layout="bhnd", b=1, hq=8, hkv=2, nq=64, nkv=96, dqk=128, dv=64, typestr="<f2"):
    def shape(h, n, d):
        return (b, n, h, d) if layout == "bnhd" else (b, h, n, d)
    return (FakeArray(shape(hq, nq, dqk), typestr), FakeArray(shape(hkv, nkv, dqk), typestr),
            FakeArray(shape(hkv, nkv, dv), typestr))


@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
def test_forward_passes_every_argument(fake_backend, described, layout):
    described.set_policy(ffpa.Knob.REFERENCE_BACKEND, True)  # the path that needs a workspace
    messages = []
    described.set_policy("log_level", "info")  # the plan line shows the problem the library saw
    ffpa.set_log_callback(lambda level, message: messages.append(message))
    try:
        with pytest.raises(ffpa.NotInitializedError, match="described device"):
            ffpa.forward(*qkv(layout), causal="bottom_right", scale=0.1, lse=True, layout=layout,
                         handle=described)
    finally:
        ffpa.set_log_callback(None)
    problem = "plan: forward fp16 B=1 Hq=8 Hkv=2 Nq=64 Nkv=96 Dqk=128 Dv=64 causal=bottom-right lse"
    assert any(m.startswith(problem) for m in messages), messages
    out_shape = (1, 64, 8, 64) if layout == "bnhd" else (1, 8, 64, 64)
    assert fake_backend.allocations[:2] == [("empty", out_shape, F16),
                                           ("empty", (1, 8, 64), ffpa.DataType.FLOAT32)]
    assert fake_backend.allocations[2][0] == "workspace" and fake_backend.allocations[2][1] > 0
    assert described.stream == FakeBackend.stream


def test_forward_reports_argument_errors(fake_backend, described):
    q, k, v = qkv()
    misaligned = FakeArray((1, 8, 64, 128), ptr=q.ptr + 2)
    with pytest.raises(ffpa.BadParamError) as caught:
        ffpa.forward(misaligned, k, v, handle=described)
    assert caught.value.status is ffpa.Status.BAD_PARAM_MISALIGNED_POINTER
    with pytest.raises(ffpa.BadParamError) as caught:
        ffpa.forward(q, FakeArray((1, 2, 96, 64)), v, handle=described)
    assert caught.value.status is ffpa.Status.BAD_PARAM_SHAPE_MISMATCH
    with pytest.raises(ValueError, match="out is read-only"):
        ffpa.forward(q, k, v, out=FakeArray((1, 8, 64, 64), readonly=True), handle=described)


def test_forward_uses_the_given_output_and_stream(fake_backend, described):
    described.set_policy(ffpa.Knob.REFERENCE_BACKEND, True)  # the path that needs a workspace
    q, k, v = qkv()
    out = FakeArray((1, 8, 64, 64))
    with pytest.raises(ffpa.NotInitializedError):
        ffpa.forward(q, k, v, out=out, handle=described, stream=0x1200)
    assert [a[0] for a in fake_backend.allocations] == ["workspace"]
    assert described.stream == 0x1200


def test_backward_passes_every_argument(fake_backend, described):
    q, k, v = qkv("bnhd")
    o, do = FakeArray((1, 64, 8, 64)), FakeArray((1, 64, 8, 64))
    lse = FakeArray((1, 8, 64), "<f4")
    with pytest.raises(ffpa.NotInitializedError, match="described device"):
        ffpa.backward(q, k, v, o, do, lse, causal=True, layout="bnhd", handle=described)
    assert fake_backend.allocations[:3] == [("empty", (1, 64, 8, 128), F16),
                                           ("empty", (1, 96, 2, 128), F16),
                                           ("empty", (1, 96, 2, 64), F16)]
    assert fake_backend.allocations[3][0] == "workspace"
    with pytest.raises(ffpa.BadParamError) as caught:  # the log-sum-exp must be fp32
        ffpa.backward(q, k, v, o, do, FakeArray((1, 8, 64), "<f2"), layout="bnhd",
                      handle=described)
    assert caught.value.status is ffpa.Status.BAD_PARAM_TYPE_MISMATCH


def test_descriptors_are_shared_between_calls(fake_backend, described):
    q, k, v = qkv()
    _attention._cached_tensor_desc.cache_clear()
    for _ in range(3):
        with pytest.raises(ffpa.NotInitializedError):
            ffpa.forward(q, k, v, handle=described)
    info = _attention._cached_tensor_desc.cache_info()
    assert info.misses == 4 and info.hits == 8  # q, k, v, o


def test_handle_on_another_device_is_refused(fake_backend):
    q, k, v = qkv()
    with ffpa.Handle(device=ffpa.DeviceDesc(ordinal=1)) as other:
        fake_backend_device = ffpa.array_view(q)
        fake_backend_device.device = 0
        with pytest.raises(ValueError, match="bound to CUDA device 1"):
            ffpa.forward(fake_backend_device, k, v, handle=other)


def test_default_handle_needs_a_device(fake_backend):
    q, k, v = qkv()
    try:
        ffpa.forward(q, k, v)
    except ffpa.NotInitializedError as error:
        assert error.status is ffpa.Status.NOT_INITIALIZED_NO_DEVICE
    else:
        pytest.skip("a GPU is present")


def test_without_an_array_library_nothing_can_be_allocated():
    if "torch" in sys.modules or "cupy" in sys.modules:
        pytest.skip("PyTorch or CuPy is loaded")
    with pytest.raises(TypeError, match="PyTorch or CuPy"):
        ffpa.forward(*qkv())


def test_an_attention_descriptor_replaces_causal_and_scale(fake_backend, described):
    messages = []
    described.set_policy("log_level", "info")
    ffpa.set_log_callback(lambda level, message: messages.append(message))
    q = FakeArray((1, 32, 4, 128))  # a packed batch: [1, T, H, D], layout bnhd
    attn = ffpa.AttentionDesc(scale=0.25)
    attn.set_slices(ffpa.AttentionSlices(described).set_from_offsets([0, 5, 16, 32],
                                                                     mask=ffpa.SliceMask.CAUSAL))
    try:
        with pytest.raises(ffpa.NotInitializedError, match="described device"):
            ffpa.forward(q, q, q, layout="bnhd", attn=attn, handle=described)
    finally:
        ffpa.set_log_callback(None)
    assert any(m.startswith("plan: forward") and "slices=3" in m for m in messages), messages
    with pytest.raises(ValueError, match="causal=True and scale=None beside it"):
        ffpa.forward(q, q, q, causal=True, attn=attn, handle=described)
    with pytest.raises(ValueError, match="scale=0.5 beside it"):
        ffpa.backward(q, q, q, q, q, q, scale=0.5, attn=attn, handle=described)
    with pytest.raises(TypeError, match="expected an AttentionDesc"):
        ffpa.forward(q, q, q, attn="causal")
