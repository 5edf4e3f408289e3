"""Tensor and attention descriptors."""

import pytest

import ffpa

F16, BF16, F32 = ffpa.DataType.FLOAT16, ffpa.DataType.BFLOAT16, ffpa.DataType.FLOAT32


def test_packed_layouts():
    bhnd = ffpa.TensorDesc.bhnd(F16, 2, 3, 5, 8)
    assert (bhnd.dtype, bhnd.dims, bhnd.strides) == (F16, (2, 3, 5, 8), (120, 40, 8, 1))
    bnhd = ffpa.TensorDesc.bnhd(BF16, 2, 3, 5, 8)
    assert bnhd.strides == (120, 8, 24, 1)
    lse = ffpa.TensorDesc.lse(2, 3, 5)
    assert (lse.dtype, lse.dims, lse.strides) == (F32, (2, 3, 5), (15, 5, 1))
    packed = ffpa.TensorDesc(F16, (2, 3, 5, 8))
    assert packed.strides == (120, 40, 8, 1)
    assert repr(packed) == "TensorDesc(FLOAT16, dims=(2, 3, 5, 8), strides=(120, 40, 8, 1))"


@pytest.mark.parametrize("dims, strides, status", [
    ((1, 2, 3, 4), (24, 12, 4, 0), ffpa.Status.BAD_PARAM_STRIDE),
    ((1, 2, 3, 4), (1, 1, 1, 1), ffpa.Status.BAD_PARAM_STRIDE),
    ((1, 2, 3, 4, 5), None, ffpa.Status.BAD_PARAM_OUT_OF_BOUND),
    ((1, 0, 3, 4), None, ffpa.Status.BAD_PARAM_OUT_OF_BOUND),
    ((1, 2), None, ffpa.Status.BAD_PARAM_OUT_OF_BOUND),
])
def test_invalid_tensors_are_refused(dims, strides, status):
    with pytest.raises(ffpa.BadParamError) as caught:
        ffpa.TensorDesc(F16, dims, strides)
    assert caught.value.status is status
    assert caught.value.message.startswith("ffpaSetTensorDescriptor")


def test_unknown_type_and_stride_count():
    with pytest.raises(ffpa.BadParamError):
        ffpa.TensorDesc(7, (1, 2, 3, 4))
    with pytest.raises(ValueError, match="4 dims but 1 strides"):
        ffpa.TensorDesc(F16, (1, 2, 3, 4), (1,))


def test_closed_descriptors_refuse_use():
    desc = ffpa.TensorDesc.bhnd(F16, 1, 1, 1, 16)
    with desc:
        pass
    with pytest.raises(ffpa.BadParamError):
        desc.dims


def test_attention_attributes():
    attn = ffpa.AttentionDesc()
    assert attn.scale is None and attn.causal is ffpa.CausalMode.NONE
    attn.scale = 0.125
    attn.causal = "bottom-right"
    assert attn.scale == 0.125 and attn.causal is ffpa.CausalMode.BOTTOM_RIGHT
    assert repr(attn) == "AttentionDesc(scale=0.125, causal=BOTTOM_RIGHT)"
    assert ffpa.AttentionDesc(causal=True).causal is ffpa.CausalMode.TOP_LEFT
    for bad in (0.0, -1.0, float("inf"), float("nan"), 1e300):
        with pytest.raises(ffpa.BadParamError) as caught:
            ffpa.AttentionDesc(scale=bad)
        assert caught.value.status is ffpa.Status.BAD_PARAM_OUT_OF_BOUND


def test_attention_key_lengths():
    attn = ffpa.AttentionDesc()
    assert attn.key_lengths is None
    attn.key_lengths = 0x7F0000001000  # a device address; planning never reads the counts
    assert attn.key_lengths == 0x7F0000001000
    attn.key_lengths = None
    assert attn.key_lengths is None


@pytest.mark.parametrize("value, mode", [
    (False, ffpa.CausalMode.NONE), (None, ffpa.CausalMode.NONE),
    (True, ffpa.CausalMode.TOP_LEFT), ("top_left", ffpa.CausalMode.TOP_LEFT),
    ("BOTTOM_RIGHT", ffpa.CausalMode.BOTTOM_RIGHT), (2, ffpa.CausalMode.BOTTOM_RIGHT),
])
def test_causal_mode(value, mode):
    assert ffpa.causal_mode(value) is mode


def test_causal_mode_refuses_other_names():
    with pytest.raises(ValueError, match="allowed: none, top_left, bottom_right"):
        ffpa.causal_mode("diagonal")
