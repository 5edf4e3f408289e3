"""Workspace sizes, plan descriptions and the plan cache on a described device."""

import pytest

import ffpa

F16 = ffpa.DataType.FLOAT16


def forward_problem(b=1, hq=8, hkv=8, nq=128, nkv=128, d=128, dtype=F16):
    """Descriptors of a packed forward problem with log-sum-exp."""
    q = ffpa.TensorDesc.bhnd(dtype, b, hq, nq, d)
    k = ffpa.TensorDesc.bhnd(dtype, b, hkv, nkv, d)
    return q, k, k, q, ffpa.TensorDesc.lse(b, hq, nq)


def test_forward_workspace_and_plan(described):
    described.set_policy(ffpa.Knob.REFERENCE_BACKEND, True)  # the path that needs a workspace
    attn = ffpa.AttentionDesc(causal=True)
    problem = forward_problem()
    size = described.forward_workspace_size(attn, *problem)
    assert size > 0
    plan = described.describe_forward_plan(attn, *problem)
    assert plan.kernel and plan.workspace == size
    assert "config" in plan.items and "causal=top-left" in plan.items["problem"]
    assert str(plan) == plan.text and plan.text.startswith("problem: forward fp16")
    without_lse = described.forward_workspace_size(attn, *problem[:4])
    assert without_lse > 0


def test_backward_workspace_and_plan(described):
    attn = ffpa.AttentionDesc()
    q, k, v, o, lse = forward_problem(hkv=2)
    size = described.backward_workspace_size(attn, q, k, v, o, o, lse, q, k, v)
    plan = described.describe_backward_plan(attn, q, k, v, o, o, lse, q, k, v)
    assert size > 0 and plan.workspace == size and "Hkv=2" in plan.items["problem"]


def test_plan_parsing():
    plan = ffpa.Plan.parse("kernel: a\nconfig: b c\nskipped: x: too big\nskipped: y: no\n"
                           "workspace: 4096 bytes\n")
    assert plan.kernel == "a" and plan.items["config"] == "b c" and plan.workspace == 4096
    assert plan.skipped == ("x: too big", "y: no")


@pytest.mark.parametrize("change, status, fragment", [
    (dict(k=ffpa.TensorDesc.bhnd(F16, 1, 8, 128, 64)), ffpa.Status.BAD_PARAM_SHAPE_MISMATCH,
     "kDesc"),
    (dict(v=ffpa.TensorDesc.bhnd(ffpa.DataType.BFLOAT16, 1, 8, 128, 128)),
     ffpa.Status.BAD_PARAM_TYPE_MISMATCH, "vDesc is bf16"),
    (dict(lse=ffpa.TensorDesc.lse(1, 8, 64)), ffpa.Status.BAD_PARAM_SHAPE_MISMATCH, "lseDesc"),
])
def test_problem_errors(described, change, status, fragment):
    problem = dict(zip("qkvo", forward_problem()[:4]), lse=forward_problem()[4])
    problem.update(change)
    with pytest.raises(ffpa.BadParamError) as caught:
        described.forward_workspace_size(ffpa.AttentionDesc(), *problem.values())
    assert caught.value.status is status and fragment in caught.value.message


def test_head_dimension_limit(described):
    with pytest.raises(ffpa.NotSupportedError) as caught:
        described.forward_workspace_size(ffpa.AttentionDesc(), *forward_problem(d=2048))
    assert caught.value.status is ffpa.Status.NOT_SUPPORTED_SHAPE
    assert "FFPA_MAX_HEAD_DIM" in caught.value.message


def test_execution_on_a_described_device_checks_arguments_first(described):
    described.set_policy(ffpa.Knob.REFERENCE_BACKEND, True)  # the path that needs a workspace
    attn = ffpa.AttentionDesc()
    q, k, v, o, lse = forward_problem()
    size = described.forward_workspace_size(attn, q, k, v, o, lse)
    base = 1 << 40
    pointers = [base + i * (1 << 30) for i in range(6)]
    arguments = [q, pointers[0], k, pointers[1], v, pointers[2], o, pointers[3]]
    with pytest.raises(ffpa.NotInitializedError, match="described device"):
        described.forward(attn, *arguments, lse=lse, lse_ptr=pointers[4],
                          workspace=pointers[5], workspace_size=size)
    with pytest.raises(ffpa.BadParamError) as caught:
        described.forward(attn, *arguments, lse=lse, lse_ptr=pointers[4],
                          workspace=pointers[5], workspace_size=size - 1)
    assert caught.value.status is ffpa.Status.BAD_PARAM_SIZE_INSUFFICIENT
    arguments[1] += 2
    with pytest.raises(ffpa.BadParamError) as caught:
        described.forward(attn, *arguments, workspace=pointers[5], workspace_size=size)
    assert caught.value.status is ffpa.Status.BAD_PARAM_MISALIGNED_POINTER

    grads = [q, base + 10 * (1 << 30), k, base + 11 * (1 << 30), v, base + 12 * (1 << 30)]
    bsize = described.backward_workspace_size(attn, q, k, v, o, o, lse, q, k, v)
    forward_arguments = [q, pointers[0], k, pointers[1], v, pointers[2], o, pointers[3]]
    with pytest.raises(ffpa.NotInitializedError):
        described.backward(attn, *forward_arguments, o, base + 13 * (1 << 30), lse, pointers[4],
                           *grads, workspace=pointers[5], workspace_size=bsize)


def test_plan_cache_stats(described):
    assert described.plan_cache_stats() == ffpa.PlanCacheStats(0, 0, 0, 0, 1024)
    attn = ffpa.AttentionDesc()
    for _ in range(3):
        described.forward_workspace_size(attn, *forward_problem(nq=64, nkv=64))
    stats = described.plan_cache_stats()
    assert (stats.hits, stats.misses, stats.size) == (2, 1, 1)
    described.clear_plan_cache()
    assert described.plan_cache_stats() == ffpa.PlanCacheStats(0, 0, 0, 0, 1024)
    described.set_policy("plan_cache_capacity", 1)
    described.forward_workspace_size(attn, *forward_problem(nq=64, nkv=64))
    described.forward_workspace_size(attn, *forward_problem(nq=96, nkv=96))
    assert described.plan_cache_stats() == ffpa.PlanCacheStats(0, 2, 1, 1, 1)
