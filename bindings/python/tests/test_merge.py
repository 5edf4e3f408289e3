"""merge(), apply_sinks() and sinks_backward() on a described device, with fake arrays: every
argument reaches the library, which checks them all before it would touch a GPU."""

import pytest

import ffpa

from conftest import FakeArray

F16 = ffpa.DataType.FLOAT16
F32 = ffpa.DataType.FLOAT32


def parts(count, shape=(1, 4, 64, 128), typestr="<f2"):
    outputs = [FakeArray(shape, typestr) for _ in range(count)]
    lses = [FakeArray(shape[:3], "<f4") for _ in range(count)]
    return outputs, lses


def test_merge_passes_every_argument(fake_backend, described):
    outputs, lses = parts(3)
    with pytest.raises(ffpa.NotInitializedError, match="described device"):
        ffpa.merge(outputs, lses, lse=True, dtype=F32, handle=described)
    assert fake_backend.allocations == [("empty", (1, 4, 64, 128), F32),
                                        ("empty", (1, 4, 64), F32)]
    assert described.stream == fake_backend.stream


def test_merge_reports_argument_errors(fake_backend, described):
    outputs, lses = parts(2)
    with pytest.raises(ValueError, match="one log-sum-exp per output"):
        ffpa.merge(outputs, lses[:1], handle=described)
    with pytest.raises(ValueError, match="part 1 differs"):
        ffpa.merge([outputs[0], FakeArray((1, 4, 64, 128), "<f4")], lses, handle=described)
    many, many_lses = parts(ffpa.MAX_MERGE_PARTIALS + 1)
    with pytest.raises(ffpa.BadParamError, match="count is 33"):
        ffpa.merge(many, many_lses, handle=described)
    with pytest.raises(ffpa.BadParamError, match="overlaps"):
        ffpa.merge(outputs, lses, out=FakeArray((1, 4, 64, 128), ptr=outputs[1].ptr + 64),
                   handle=described)
    # In place: the output is the first partial, with its type and strides.
    with pytest.raises(ffpa.NotInitializedError):
        ffpa.merge(outputs, lses, out=outputs[0], handle=described)


def test_low_level_merge_names_the_missing_address(described):
    o = ffpa.TensorDesc.bhnd(F16, 1, 4, 64, 128)
    lse = ffpa.TensorDesc.lse(1, 4, 64)
    base = 1 << 40
    with pytest.raises(ffpa.BadParamError, match=r"partialLse\[1\] is NULL"):
        described.merge(o, [base, base + (1 << 30)], lse, [base + (2 << 30)], o, base + (3 << 30))


def test_sinks_pass_every_argument(fake_backend, described):
    o, do = FakeArray((1, 4, 64, 128)), FakeArray((1, 4, 64, 128))
    lse = FakeArray((1, 4, 64), "<f4")
    sinks = FakeArray((4,), "<f4")
    with pytest.raises(ffpa.NotInitializedError):
        ffpa.apply_sinks(o, lse, sinks, handle=described)
    with pytest.raises(ffpa.NotInitializedError):
        ffpa.sinks_backward(sinks, o, do, lse, handle=described)
    assert fake_backend.allocations[-1] == ("empty", (4,), F32)
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        ffpa.apply_sinks(o, lse, FakeArray((3,), "<f4"), handle=described)
    with pytest.raises(ValueError, match="fp32"):
        ffpa.apply_sinks(o, lse, FakeArray((4,), "<f2"), handle=described)
    with pytest.raises(ffpa.BadParamError, match="dSinks overlaps lse"):
        ffpa.sinks_backward(sinks, o, do, lse, out=FakeArray((4,), "<f4", ptr=lse.ptr + 16),
                            handle=described)
