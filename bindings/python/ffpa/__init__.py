"""Python bindings of libffpa: fast scaled dot-product attention for large head dimensions on
NVIDIA GPUs, through ctypes (no compiled extension, no dependency).

The quick way, on PyTorch tensors or CuPy arrays::

    import ffpa
    o = ffpa.forward(q, k, v, causal=True)                  # [B, H, N, D]
    o, lse = ffpa.forward(q, k, v, lse=True, layout="bnhd")  # [B, N, H, D] storage
    dq, dk, dv = ffpa.backward(q, k, v, o, do, lse, layout="bnhd")
    o = ffpa.attention(q, k, v, causal=True)                # PyTorch autograd differentiates it
    o, lse = ffpa.merge([o1, o2], [lse1, lse2], lse=True)    # partials over disjoint keys

The C interface, class by class: :class:`Handle` (a context manager), :class:`TensorDesc`,
:class:`AttentionDesc`, policies by knob name, plan descriptions, :class:`FfpaError` with the
library's status and message. libffpa.so.0 is loaded on first use from ``FFPA_LIBRARY`` (a file
or a directory) or by the platform loader; :class:`LibraryNotFound` says where it looked.

Context parallelism, one rank per process over the caller's NCCL communicator: attach a
:class:`ContextParallel` to an :class:`AttentionDesc` (``set_context_parallel``) and describe
each rank's local shards; :meth:`ContextParallel.shard` says which tokens a rank holds, and
:meth:`ContextParallel.for_description` plans without a communicator.
"""

from ._arrays import ArrayView, array_view
from ._attention import backward, forward
from ._autograd import attention
from ._context_parallel import ContextParallel, ContextParallelInfo
from ._descriptors import AttentionDesc, TensorDesc, causal_mode
from ._errors import (BadParamError, ExecutionFailedError, FfpaError, InternalError,
                      NotInitializedError, NotSupportedError, Status, category, status_name)
from ._handle import DeviceDesc, Handle, Plan, PlanCacheStats
from ._library import HEADER_VERSION, LibraryNotFound, is_compatible, library
from ._logging import set_log_callback
from ._merge import apply_sinks, merge, sinks_backward
from ._policy import PolicyInfo, knobs, policy_info
from ._slices import AttentionSlices, SlicesInfo
from ._types import (MAX_HEAD_DIM, MAX_MERGE_PARTIALS, MAX_SLICES, Accumulator, AutotuneMode,
                     CausalMode, DataType, Knob, LogLevel, PolicySource, PolicyType, Sharding,
                     SliceMask)

__version__ = "0.1.0"

__all__ = [
    "Accumulator", "ArrayView", "AttentionDesc", "AttentionSlices", "AutotuneMode",
    "BadParamError", "CausalMode", "ContextParallel", "ContextParallelInfo", "DataType",
    "DeviceDesc", "ExecutionFailedError", "FfpaError", "HEADER_VERSION", "Handle", "InternalError",
    "Knob", "LibraryNotFound", "LogLevel", "MAX_HEAD_DIM", "MAX_MERGE_PARTIALS", "MAX_SLICES",
    "NotInitializedError", "NotSupportedError", "Plan", "PlanCacheStats", "PolicyInfo",
    "PolicySource", "PolicyType", "Sharding", "SliceMask", "SlicesInfo", "Status", "TensorDesc",
    "apply_sinks", "array_view", "attention", "backward", "build_info", "category", "causal_mode", "forward",
    "get_version", "is_compatible", "knobs", "library", "merge", "policy_info", "set_log_callback",
    "sinks_backward", "status_name",
]


def get_version():
    """The version of the loaded library, ``MAJOR*10000 + MINOR*100 + PATCH``."""
    return library().ffpaGetVersion()


def build_info():
    """The library's one-line build description, for logs and bug reports."""
    return library().ffpaGetBuildInfo().decode()
