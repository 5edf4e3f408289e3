"""attention(): the forward and backward as one function that PyTorch's autograd differentiates."""

import functools

from . import _attention


@functools.lru_cache(maxsize=None)
def _function_class():
    """The torch.autograd.Function, made on first use: importing ffpa does not import PyTorch."""
    import torch

    class Attention(torch.autograd.Function):
        """The forward keeps q, k, v, the output and its log-sum-exp for the backward, which
        computes the three gradients in one call of the library."""

        @staticmethod
        def forward(ctx, q, k, v, options):
            o, lse = _attention.forward(q, k, v, lse=True, **options)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.options = options
            return o

        @staticmethod
        @torch.autograd.function.once_differentiable  # the gradients come back without a graph
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            # The gradient autograd hands over may be any view (o.sum() gives one broadcast from
            # a single element, with zero strides): the library takes unit stride on D.
            grads = _attention.backward(q, k, v, o, do.contiguous(), lse, **ctx.options)
            return tuple(g if needed else None for g, needed in zip(grads, ctx.needs_input_grad)) + (None,)

    return Attention


def attention(q, k, v, *, causal=False, scale=None, layout="bhnd", attn=None, handle=None):
    """Attention that PyTorch's autograd differentiates: ``softmax(scale * q @ k^T + mask) @ v``.

    Takes PyTorch CUDA tensors (fp16 or bf16) and these arguments of :func:`forward` (``attn``
    for slices or key lengths, with the ``handle`` they were made for); returns the output.
    Where a gradient is wanted (autograd on and any of ``q``, ``k``, ``v`` requiring it), the
    call keeps the inputs, the output and its fp32 log-sum-exp, and ``.backward()`` computes
    ``dq``, ``dk`` and ``dv`` with :func:`backward` on the stream autograd runs it on (for
    grouped-query attention, ``dk`` and ``dv`` are summed over the query heads of a group).
    Otherwise it is :func:`forward`. The backward uses ``attn`` and ``handle`` as they are when
    it runs: leave them unchanged, and open, until then (one descriptor per micro-batch when
    their slices differ). Second derivatives are refused: differentiating its gradients again
    raises.
    """
    import torch

    options = {"causal": causal, "scale": scale, "layout": layout}
    options.update({name: value for name, value in (("attn", attn), ("handle", handle)) if value is not None})
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return _function_class().apply(q, k, v, options)
    return _attention.forward(q, k, v, **options)
