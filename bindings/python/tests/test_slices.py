"""Attention slices on a described device: the list object, its checks, and a packed batch that
plans on the sm80 kernels, forward and backward."""

import pytest

import ffpa

BF16 = ffpa.DataType.BFLOAT16


def packed_tensors(tokens=32, heads=4, dim=512):
    q = ffpa.TensorDesc.bnhd(BF16, 1, heads, tokens, dim)
    lse = ffpa.TensorDesc(ffpa.DataType.FLOAT32, (1, heads, tokens), (tokens * heads, 1, heads))
    return q, lse


def test_slices_from_offsets_and_ranges(described):
    with ffpa.AttentionSlices(described) as slices:
        slices.set_from_offsets([0, 5, 16, 32], mask=ffpa.SliceMask.CAUSAL)
        assert slices.info == ffpa.SlicesInfo(3, 32, 32, 15 + 66 + 136)
        slices.set([(0, 8, 0, 8, ffpa.SliceMask.CAUSAL), (0, 7, 1, 8, ffpa.SliceMask.INVERSE_CAUSAL)])
        assert slices.info.visible_pairs == 64
        slices.set([(0, 4, 10, 20)])  # FULL when the mask is left out
        assert slices.info == ffpa.SlicesInfo(1, 4, 20, 40)


def test_slices_errors_name_the_culprit(described):
    slices = ffpa.AttentionSlices(described)
    with pytest.raises(ffpa.BadParamError, match="never set"):
        slices.info
    with pytest.raises(ffpa.BadParamError, match="both give query row 0 key 0"):
        slices.set([(0, 8, 0, 8, ffpa.SliceMask.CAUSAL), (0, 8, 0, 8, ffpa.SliceMask.INVERSE_CAUSAL)])
    with pytest.raises(ffpa.BadParamError, match=r"queryRanges\[0\] is \[3, 3\)"):
        slices.set([(3, 3, 0, 1)])
    with pytest.raises(ffpa.BadParamError, match="queryOffsets\\[0\\] is 2"):
        slices.set_from_offsets([2, 5])
    with pytest.raises(ValueError, match="expected"):
        slices.set([(0, 1, 0)])
    with pytest.raises(ffpa.BadParamError, match="count is 0"):
        slices.set([])


def test_packed_batch_plans_sm80_forward_and_backward(described):
    q, lse = packed_tensors()
    attn = ffpa.AttentionDesc()
    plain = described.describe_forward_plan(attn, q, q, q, q, lse)
    slices = ffpa.AttentionSlices(described).set_from_offsets([0, 5, 16, 32], mask=ffpa.SliceMask.CAUSAL)
    attn.set_slices(slices)
    slices.close()  # the descriptor keeps its own reference
    sliced = described.describe_forward_plan(attn, q, q, q, q, lse)
    assert sliced.kernel.startswith("sm80.forward")
    assert "slices=3" in sliced.text
    backward = described.describe_backward_plan(attn, q, q, q, q, q, lse, q, q, q)
    assert backward.kernel.startswith("sm80.backward")
    attn.set_slices(None)
    assert described.describe_forward_plan(attn, q, q, q, q, lse).text == plain.text
    attn.set_slices(ffpa.AttentionSlices(described, [(0, 40, 0, 8)]))
    with pytest.raises(ffpa.BadParamError, match="reach query row 39"):
        described.forward_workspace_size(attn, q, q, q, q, lse)
