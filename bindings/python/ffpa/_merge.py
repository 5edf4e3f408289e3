"""merge(), apply_sinks() and sinks_backward(): partial results and attention sinks on device
arrays in one call."""

from . import _backends
from ._arrays import _layout, array_view
from ._attention import _check_device, _desc, _shape, _writable, default_handle
from ._types import DataType


def _handle_for(handle, backend, view):
    if handle is None:
        return default_handle(backend)
    _check_device(handle, view)
    return handle


def _sinks_view(sinks, heads):
    view = array_view(sinks)
    if view.dtype is not DataType.FLOAT32 or view.shape != (heads,) or view.strides != (1,):
        raise ValueError(f"sinks must be a contiguous fp32 array of shape ({heads},) (one logit per "
                         f"head); got {view.dtype.name} {view.shape} with strides {view.strides}")
    return view


def merge(outputs, lses, *, lse=False, dtype=None, layout="bhnd", out=None, handle=None,
          stream=None):
    """Merges partial attention results computed over disjoint key sets:
    ``LSE = log(sum_i exp(LSE_i))`` and ``O = sum_i exp(LSE_i - LSE) * O_i``, in fp32.

    ``outputs`` are up to 32 arrays of one shape, type and strides (``[B, H, N, D]`` read as
    ``layout``), each normalised over its own keys; ``lses`` their fp32 log-sum-exps
    ``[B, H, N]`` (from ``forward(..., lse=True)``), of one layout too. Returns the merged output
    (of ``dtype``, by default the partials' type; or ``out``), with ``lse=True`` also the merged
    log-sum-exp. Parts whose log-sum-exp is -inf are not read. Enqueued on ``stream`` as for
    :func:`forward`; returns without waiting.
    """
    layout = _layout(layout)
    views = [array_view(x) for x in outputs]
    lse_views = [array_view(x) for x in lses]
    if not views or len(views) != len(lse_views):
        raise ValueError(f"merge takes one log-sum-exp per output, at least one: got {len(views)} "
                         f"outputs and {len(lse_views)} log-sum-exps")
    partial_desc = _desc(views[0], layout)
    partial_lse_desc = _desc(lse_views[0])

    def layout_of(view, view_layout="bhnd"):
        return (view.dtype, *view.dims_and_strides(view_layout))

    for i, (view, lse_view) in enumerate(zip(views, lse_views)):
        if (layout_of(view, layout) != layout_of(views[0], layout)
                or layout_of(lse_view) != layout_of(lse_views[0])):
            raise ValueError(f"part {i} differs from part 0 in shape, type or strides; the partials "
                             f"share one layout")
    backend = _backends.backend_for(views[0])
    handle = _handle_for(handle, backend, views[0])
    b, h, n, d = partial_desc.dims
    with backend.on_stream(stream) as stream_ptr:
        o = out if out is not None else backend.empty(_shape(layout, b, h, n, d), dtype or views[0].dtype)
        o_view = _writable(array_view(o), "out")
        lse_array = backend.empty((b, h, n), DataType.FLOAT32) if lse else None
        lse_view = array_view(lse_array) if lse else None
        with handle._lock:
            handle.stream = stream_ptr
            handle.merge(partial_desc, [v.ptr for v in views], partial_lse_desc,
                         [v.ptr for v in lse_views], _desc(o_view, layout), o_view.ptr,
                         lse=_desc(lse_view) if lse else None, lse_ptr=lse_view.ptr if lse else 0)
    return (o, lse_array) if lse else o


def apply_sinks(o, lse, sinks, *, layout="bhnd", handle=None, stream=None):
    """Folds attention sinks into a forward result in place: ``sinks`` holds one fp32 logit per
    head, which joins every softmax denominator of its head, so ``lse`` becomes
    ``log(exp(lse) + exp(sink))`` and ``o`` is scaled by ``exp(lse_old - lse_new)``. Pass the
    updated ``o`` and ``lse`` to :func:`backward`; :func:`sinks_backward` gives the sinks'
    gradient. Returns ``(o, lse)``."""
    layout = _layout(layout)
    o_view = _writable(array_view(o), "o")
    lse_view = _writable(array_view(lse), "lse")
    o_desc = _desc(o_view, layout)
    sinks_view = _sinks_view(sinks, o_desc.dims[1])
    backend = _backends.backend_for(o_view)
    handle = _handle_for(handle, backend, o_view)
    with backend.on_stream(stream) as stream_ptr:
        with handle._lock:
            handle.stream = stream_ptr
            handle.apply_sinks(sinks_view.ptr, o_desc, o_view.ptr, _desc(lse_view), lse_view.ptr)
    return o, lse


def sinks_backward(sinks, o, do, lse, *, layout="bhnd", out=None, handle=None, stream=None):
    """The gradient of the attention sinks, ``-sum exp(sink - lse) * rowsum(o * do)`` over each
    head's rows, from the sink-adjusted ``o`` and ``lse`` of :func:`apply_sinks` and the output
    gradient ``do``. Returns an fp32 array of one value per head (or ``out``), the same bits on
    every run."""
    layout = _layout(layout)
    o_view, do_view, lse_view = array_view(o), array_view(do), array_view(lse)
    o_desc = _desc(o_view, layout)
    sinks_view = _sinks_view(sinks, o_desc.dims[1])
    backend = _backends.backend_for(o_view)
    handle = _handle_for(handle, backend, o_view)
    with backend.on_stream(stream) as stream_ptr:
        d_sinks = out if out is not None else backend.empty((o_desc.dims[1],), DataType.FLOAT32)
        d_view = _writable(array_view(d_sinks), "out")
        _sinks_view(d_sinks, o_desc.dims[1])
        with handle._lock:
            handle.stream = stream_ptr
            handle.sinks_backward(sinks_view.ptr, o_desc, o_view.ptr, _desc(do_view, layout),
                                  do_view.ptr, _desc(lse_view), lse_view.ptr, d_view.ptr)
    return d_sinks
