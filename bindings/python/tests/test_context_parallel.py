"""Context parallelism on a described device: objects made for descriptions, their facts and
shards, the arguments refused, and the ring plans of a descriptor they are attached to."""

import ctypes

import pytest

import ffpa

BF16 = ffpa.DataType.BFLOAT16


def local_shards(n=1024, heads=8, dim=512):
    """Descriptors of one rank's shards: q, k, v, o, lse (packed, [1, H, n, D])."""
    q = ffpa.TensorDesc.bhnd(BF16, 1, heads, n, dim)
    return q, q, q, q, ffpa.TensorDesc.lse(1, heads, n)


def test_info_and_shards(described):
    with ffpa.ContextParallel.for_description(described, 4, 1) as zigzag:
        assert zigzag.info == ffpa.ContextParallelInfo(4, 1, ffpa.Sharding.ZIGZAG)
        assert zigzag.info.sharding is ffpa.Sharding.ZIGZAG  # the default, as an enum
        # Chunks 1 and 6 of 8 chunks of 512 tokens.
        assert zigzag.shard(1024) == [(512, 1024), (3072, 3584)]
    contiguous = ffpa.ContextParallel.for_description(described, 4, 3, ffpa.Sharding.CONTIGUOUS)
    assert contiguous.info == (4, 3, ffpa.Sharding.CONTIGUOUS)
    assert contiguous.shard(1000) == [(3000, 4000)]
    by_name = ffpa.ContextParallel.for_description(described, 2, 0, sharding="Contiguous")
    assert by_name.info.sharding is ffpa.Sharding.CONTIGUOUS
    assert by_name.shard(7) == [(0, 7)]  # odd lengths are fine without zigzag


def test_creation_errors_name_the_argument(described):
    with pytest.raises(ffpa.BadParamError, match="ranks is 0") as caught:
        ffpa.ContextParallel.for_description(described, 0, 0)
    assert caught.value.status is ffpa.Status.BAD_PARAM_OUT_OF_BOUND
    with pytest.raises(ffpa.BadParamError, match=r"rank is 4.*0 to ranks - 1 \(3\)"):
        ffpa.ContextParallel.for_description(described, 4, 4)
    with pytest.raises(ffpa.BadParamError, match="sharding is 7"):
        ffpa.ContextParallel.for_description(described, 4, 0, sharding=7)
    with pytest.raises(ValueError, match="allowed: contiguous, zigzag"):
        ffpa.ContextParallel.for_description(described, 4, 0, sharding="ring")
    with pytest.raises(ValueError, match="ranks is 4294967300"):  # not wrapped to 4 by ctypes
        ffpa.ContextParallel.for_description(described, (1 << 32) + 4, 0)


def test_shard_errors(described):
    zigzag = ffpa.ContextParallel.for_description(described, 4, 1)
    with pytest.raises(ffpa.BadParamError, match="localLength is 1023.*must be even") as caught:
        zigzag.shard(1023)
    assert caught.value.status is ffpa.Status.BAD_PARAM_SHAPE_MISMATCH
    with pytest.raises(ffpa.BadParamError, match="localLength is 0"):
        zigzag.shard(0)
    with pytest.raises(TypeError, match="local_length takes an integer"):
        zigzag.shard(1024.0)
    zigzag.close()
    with pytest.raises(ffpa.BadParamError):  # closed: the library sees a null object
        zigzag.info


class FakeCommunicator:
    """Stands in for CuPy's NcclCommunicator: the ncclComm_t address in ``comm``."""
    comm = 0x7f0000001000


@pytest.mark.parametrize("comm", [0, None, ctypes.c_void_p()])
def test_a_null_communicator_is_refused(described, comm):
    with pytest.raises(ffpa.BadParamError, match="comm") as caught:
        ffpa.ContextParallel(described, comm)
    assert caught.value.status is ffpa.Status.BAD_PARAM_NULL_POINTER


@pytest.mark.parametrize("comm", [0x7f0000001000, ctypes.c_void_p(0x7f0000001000),
                                  FakeCommunicator()])
def test_a_real_object_needs_a_handle_that_executes(described, comm):
    # The described device is refused before the communicator is ever read.
    with pytest.raises(ffpa.NotInitializedError) as caught:
        ffpa.ContextParallel(described, comm, ffpa.Sharding.CONTIGUOUS)
    assert caught.value.status is ffpa.Status.NOT_INITIALIZED_NO_DEVICE


def test_communicator_arguments_checked_in_python(described):
    with pytest.raises(TypeError, match="comm takes an integer"):
        ffpa.ContextParallel(described, "0x1000")
    with pytest.raises(ValueError, match="comm is -1"):
        ffpa.ContextParallel(described, -1)


def test_without_nccl_creation_is_not_supported():
    if "NCCL no" not in ffpa.build_info():
        pytest.skip("this libffpa was built with NCCL (a fake communicator would be read)")
    try:
        handle = ffpa.Handle()
    except ffpa.NotInitializedError:
        pytest.skip("no GPU: a handle that executes is needed")
    with handle, pytest.raises(ffpa.NotSupportedError, match="without NCCL"):
        ffpa.ContextParallel(handle, FakeCommunicator.comm)


def test_causal_zigzag_ring_plan(described):
    shards = local_shards()
    attn = ffpa.AttentionDesc(causal="bottom_right")
    plain = described.describe_forward_plan(attn, *shards)
    plain_bytes = described.forward_workspace_size(attn, *shards)
    assert "context parallel" not in plain.text

    ring = ffpa.ContextParallel.for_description(described, 4, 1, ffpa.Sharding.ZIGZAG)
    attn.set_context_parallel(ring)
    ring.close()  # the descriptor keeps its own reference
    plan = described.describe_forward_plan(attn, *shards)
    assert "context parallel: rank 1 of 4, zigzag sharding, 4 ring steps" in plan.text, plan.text
    assert "step 1: K/V of rank 0\n  queries [0, 1024) keys [0, 512) full: " in plan.text
    assert plan.text.count("  queries [") == 5
    ring_bytes = described.forward_workspace_size(attn, *shards)
    kv = 2 * 8 * 1024 * 512 * 2  # one K/V block in bf16
    assert ring_bytes > plain_bytes and ring_bytes >= 2 * kv
    assert f"workspace: {ring_bytes} bytes" in plan.text

    q = shards[0]
    backward = described.describe_backward_plan(attn, q, q, q, q, q, shards[4], q, q, q)
    assert "step 1: K/V of rank 0" in backward.text

    attn.set_context_parallel(None)
    assert described.describe_forward_plan(attn, *shards).text == plain.text
    assert described.forward_workspace_size(attn, *shards) == plain_bytes


def test_a_causal_ring_needs_as_many_queries_as_keys(described):
    attn = ffpa.AttentionDesc(causal=True)
    attn.set_context_parallel(ffpa.ContextParallel.for_description(described, 3, 2, "contiguous"))
    q = ffpa.TensorDesc.bhnd(ffpa.DataType.FLOAT16, 2, 8, 100, 512)
    k = ffpa.TensorDesc.bhnd(ffpa.DataType.FLOAT16, 2, 2, 300, 512)
    with pytest.raises(ffpa.BadParamError, match=r"Nq = 100, Nkv = 300"):
        described.forward_workspace_size(attn, q, k, k, q, ffpa.TensorDesc.lse(2, 8, 100))
    attn.causal = False  # without a mask, local Nq and Nkv may differ
    plan = described.describe_forward_plan(attn, q, k, k, q, ffpa.TensorDesc.lse(2, 8, 100))
    assert plan.text.count("  queries [0, 100) keys [0, 300) full: ") == 3


def test_slices_mask_the_whole_sequence_of_a_ring(described):
    shards = local_shards(n=256, heads=8)  # 2 ranks of 256 tokens
    attn = ffpa.AttentionDesc()
    # Rank 0 of a zigzag ring holds global tokens [0, 128) and [384, 512).
    attn.set_context_parallel(ffpa.ContextParallel.for_description(described, 2, 0, "zigzag"))
    slices = ffpa.AttentionSlices(described)
    # Two causal documents of the whole sequence: [0, 200) and [200, 512).
    attn.set_slices(slices.set_from_offsets([0, 200, 512], mask=ffpa.SliceMask.CAUSAL))
    text = described.describe_forward_plan(attn, *shards).text
    assert "step 0: K/V of rank 0\n  queries [0, 256) keys [0, 256) 2 slices: " in text
    # Chunk 3's rows see document 1's keys [200, 384) of rank 1: local keys [72, 256).
    assert "step 1: K/V of rank 1\n  queries [128, 256) keys [72, 256) 2 slices: " in text
    # The slices may reach past the local rows, not past the whole sequence.
    attn.set_slices(slices.set_from_offsets([0, 200, 513], mask=ffpa.SliceMask.CAUSAL))
    with pytest.raises(ffpa.BadParamError, match="on each of 2 context-parallel ranks") as caught:
        described.forward_workspace_size(attn, *shards)
    assert caught.value.status is ffpa.Status.BAD_PARAM_SHAPE_MISMATCH
