"""forward() and backward(): attention on device arrays in one call."""

import functools
import threading

from . import _backends
from ._arrays import _layout, array_view
from ._descriptors import AttentionDesc, TensorDesc, causal_mode
from ._handle import Handle
from ._types import CausalMode, DataType

_handles = {}
_handles_lock = threading.Lock()


def default_handle(backend):
    """The handle this module keeps for the backend's device, created on first use with that
    device current. It lives until the process ends."""
    ordinal = backend.ordinal
    with _handles_lock:
        handle = _handles.get(ordinal)
        if handle is None:
            with backend.device_scope():
                handle = Handle()
            bound = handle.device.ordinal
            if bound != ordinal:
                handle.close()
                raise RuntimeError(f"a handle for CUDA device {ordinal} was bound to device "
                                   f"{bound}: the CUDA runtimes disagree on the current device")
            _handles[ordinal] = handle
        return handle


def _check_device(handle, view):
    if view.device is not None and handle.device.ordinal != view.device:
        raise ValueError(f"the handle is bound to CUDA device {handle.device.ordinal}, "
                         f"the tensors are on device {view.device}")


# Descriptors are never modified once made, so calls (and threads) can share them; caching them
# takes a dozen library calls off every forward() and backward().
@functools.lru_cache(maxsize=256)
def _cached_tensor_desc(dtype, dims, strides):
    return TensorDesc(dtype, dims, strides)


@functools.lru_cache(maxsize=64)
def _cached_attention_desc(scale, causal):
    return AttentionDesc(scale=scale, causal=causal)


def _attention(scale, causal, attn=None):
    """The attention descriptor of a call: ``attn`` as given, else one cached per scale and mask."""
    if attn is None:
        return _cached_attention_desc(None if scale is None else float(scale), causal_mode(causal))
    if not isinstance(attn, AttentionDesc):
        raise TypeError(f"attn={attn!r}: expected an AttentionDesc")
    if scale is not None or causal_mode(causal) is not CausalMode.NONE:
        raise ValueError(f"attn= carries the scale and the mask; causal={causal!r} and scale={scale!r} "
                         "beside it would be ignored: set them on the AttentionDesc")
    return attn


def _desc(view, layout="bhnd"):
    return _cached_tensor_desc(view.dtype, *view.dims_and_strides(layout))


def _shape(layout, b, h, n, d):
    return (b, n, h, d) if layout == "bnhd" else (b, h, n, d)


def _writable(view, name):
    if view.readonly:
        raise ValueError(f"{name} is read-only")
    return view


def forward(q, k, v, *, causal=False, scale=None, lse=False, layout="bhnd", out=None,
            handle=None, stream=None, attn=None):
    """Attention forward: ``softmax(scale * q @ k^T + mask) @ v``.

    ``q``, ``k``, ``v`` are CUDA arrays (PyTorch tensors, CuPy arrays, or objects with
    ``__cuda_array_interface__`` or ``__dlpack__``) of shape ``[B, H, N, D]``
    (``layout="bhnd"``) or ``[B, N, H, D]`` (``layout="bnhd"``); any strides with unit stride
    on D. ``k`` and ``v`` may have fewer heads than ``q`` (grouped-query attention) and ``v`` a
    different D. ``causal`` is False, True (top-left, as PyTorch's ``is_causal``),
    ``"top_left"`` or ``"bottom_right"``; ``scale`` defaults to ``1/sqrt(D)``.

    Returns the output, allocated with the inputs' library in the same layout (or ``out``), and
    with ``lse=True`` also the fp32 log-sum-exp ``[B, H, N]``. The work is enqueued on
    ``stream`` (an int, a torch or CuPy stream), by default the library's current stream, and
    the call returns without waiting.

    ``attn``, an :class:`AttentionDesc`, replaces ``causal`` and ``scale`` with everything a
    descriptor holds: attention slices (packed variable-length batches, flexible masks), per-batch
    key lengths, context parallelism. Give ``handle`` then too when the slices were made for a
    handle's device (the default handle is that of the tensors' device).
    """
    attn = _attention(scale, causal, attn)
    layout = _layout(layout)
    views = [array_view(x) for x in (q, k, v)]
    backend = _backends.backend_for(views[0])
    descs = [_desc(view, layout) for view in views]
    b, hq, nq, _ = descs[0].dims
    dv = descs[2].dims[3]
    if handle is None:
        handle = default_handle(backend)
    else:
        _check_device(handle, views[0])
    with backend.on_stream(stream) as stream_ptr:
        o = out if out is not None else backend.empty(_shape(layout, b, hq, nq, dv), views[0].dtype)
        o_view = _writable(array_view(o), "out")
        o_desc = _desc(o_view, layout)
        lse_array = backend.empty((b, hq, nq), DataType.FLOAT32) if lse else None
        lse_view = array_view(lse_array) if lse else None
        lse_desc = _desc(lse_view) if lse else None
        nbytes = handle.forward_workspace_size(attn, *descs, o_desc, lse_desc)
        # `workspace` holds the memory until the call below has enqueued the work.
        workspace, workspace_ptr = backend.workspace(nbytes) if nbytes else (None, 0)
        with handle._lock:
            handle.stream = stream_ptr
            handle.forward(attn, descs[0], views[0].ptr, descs[1], views[1].ptr,
                           descs[2], views[2].ptr, o_desc, o_view.ptr,
                           lse=lse_desc, lse_ptr=lse_view.ptr if lse else 0,
                           workspace=workspace_ptr, workspace_size=nbytes)
    return (o, lse_array) if lse else o


def backward(q, k, v, o, do, lse, *, causal=False, scale=None, layout="bhnd", dq=None,
             dk=None, dv=None, handle=None, stream=None, attn=None):
    """Attention backward: the gradients ``(dq, dk, dv)`` from the forward's inputs, its output
    ``o`` and log-sum-exp ``lse`` (from ``forward(..., lse=True)``), and the output gradient
    ``do``.

    ``causal``, ``scale`` and ``layout`` (or ``attn``) must be those of the forward. The
    gradients are allocated like ``q``, ``k`` and ``v`` in ``layout`` unless given; the work is
    enqueued on ``stream`` as for :func:`forward`.
    """
    attn = _attention(scale, causal, attn)
    layout = _layout(layout)
    views = [array_view(x) for x in (q, k, v, o, do)]
    lse_view = array_view(lse)
    backend = _backends.backend_for(views[0])
    descs = [_desc(view, layout) for view in views]
    lse_desc = _desc(lse_view)
    if handle is None:
        handle = default_handle(backend)
    else:
        _check_device(handle, views[0])
    with backend.on_stream(stream) as stream_ptr:
        grads, grad_views = [], []
        for grad, view, desc, name in zip((dq, dk, dv), views[:3], descs[:3], ("dq", "dk", "dv")):
            if grad is None:  # shaped and typed like its tensor, packed in the layout
                grad = backend.empty(_shape(layout, *desc.dims), view.dtype)
            grads.append(grad)
            grad_views.append(_writable(array_view(grad), name))
        grad_descs = [_desc(view, layout) for view in grad_views]
        nbytes = handle.backward_workspace_size(attn, *descs, lse_desc, *grad_descs)
        # `workspace` holds the memory until the call below has enqueued the work.
        workspace, workspace_ptr = backend.workspace(nbytes) if nbytes else (None, 0)
        arguments = []
        for desc, view in zip(descs + [lse_desc] + grad_descs, views + [lse_view] + grad_views):
            arguments += [desc, view.ptr]
        with handle._lock:
            handle.stream = stream_ptr
            handle.backward(attn, *arguments, workspace=workspace_ptr, workspace_size=nbytes)
    return tuple(grads)
