"""The handle: a library context bound to one device, with its stream, policies and plans."""

import ctypes
import dataclasses
import threading

from . import _types as t
from ._errors import check
from ._library import library
from ._owned import Owned
from ._policy import knob_value, policy_info


@dataclasses.dataclass
class DeviceDesc:
    """The properties of a device that decide plans (ffpaDeviceDesc_t). ``Handle(device=...)``
    plans for a described device that need not be present."""
    ordinal: int = 0                               #: CUDA device ordinal
    sm_version: int = 80                           #: compute capability as major*10 + minor
    sm_count: int = 108                            #: multiprocessors
    shared_mem_per_block_optin: int = 163 * 1024   #: bytes per block after opt-in
    shared_mem_per_sm: int = 164 * 1024            #: bytes per multiprocessor
    global_mem_bytes: int = 40 << 30               #: bytes of device memory
    name: str = ""                                 #: device name (at most 255 bytes kept)

    def _to_c(self):
        return t.DeviceDescStruct(
            structSize=ctypes.sizeof(t.DeviceDescStruct), ordinal=self.ordinal,
            smVersion=self.sm_version, smCount=self.sm_count,
            sharedMemPerBlockOptin=self.shared_mem_per_block_optin,
            sharedMemPerSm=self.shared_mem_per_sm, globalMemBytes=self.global_mem_bytes,
            name=self.name.encode()[:255])

    @classmethod
    def _from_c(cls, c):
        return cls(c.ordinal, c.smVersion, c.smCount, c.sharedMemPerBlockOptin, c.sharedMemPerSm,
                   c.globalMemBytes, c.name.decode(errors="replace"))


@dataclasses.dataclass(frozen=True)
class PlanCacheStats:
    """Counters of a handle's plan cache."""
    hits: int       #: lookups that found a plan
    misses: int     #: lookups that had to plan
    evictions: int  #: plans dropped because the cache was full
    size: int       #: plans held now
    capacity: int   #: plans it may hold (the PLAN_CACHE_CAPACITY knob)


@dataclasses.dataclass(frozen=True)
class Plan:
    """A plan explanation: ``text`` as the library wrote it, and its ``name: value`` lines."""
    text: str
    items: dict     #: each ``name: value`` line but the ``skipped`` ones
    skipped: tuple  #: one entry per kernel passed over, with the reason

    @property
    def kernel(self):
        """The kernel that serves the problem."""
        return self.items.get("kernel", "")

    @property
    def workspace(self):
        """The workspace size in bytes."""
        return int(self.items.get("workspace", "0").split()[0])

    def __str__(self):
        return self.text

    @classmethod
    def parse(cls, text):
        """Splits the library's text into its lines."""
        items, skipped = {}, []
        for line in text.splitlines():
            name, _, value = line.strip().partition(": ")
            if name == "skipped":
                skipped.append(value)
            elif value:
                items[name] = value
        return cls(text, items, tuple(skipped))


def _text_call(function, *args):
    """Runs a call that copies a text into a buffer and reports its whole length."""
    size = 2048
    while True:
        buffer = ctypes.create_string_buffer(size)
        length = ctypes.c_size_t()
        check(function(*args, buffer, size, ctypes.byref(length)))
        if length.value < size:
            return buffer.value.decode(errors="replace")
        size = length.value + 1


class Handle(Owned):
    """A libffpa context bound to one CUDA device: stream, policies and plan cache.

    ``Handle()`` binds to the current CUDA device (ffpaCreate) and raises
    :class:`NotInitializedError` without one; ``Handle(device=DeviceDesc(...))`` plans for a
    described device and cannot execute. Use it as a context manager or call :meth:`close`; a
    handle still open when collected is destroyed then (not at interpreter exit).

    The stream is shared by every thread that uses the handle; :func:`ffpa.forward` sets it and
    enqueues under the handle's lock, so that concurrent calls on different streams are safe.
    """

    def __init__(self, device=None):
        lib = library()
        pointer = ctypes.c_void_p()
        if device is None:
            check(lib.ffpaCreate(ctypes.byref(pointer)))
        else:
            c = device._to_c()
            check(lib.ffpaCreateForDevice(ctypes.byref(pointer), ctypes.byref(c)))
        super().__init__(pointer, lib.ffpaDestroy)
        # Held by forward() and backward() from setting the stream until the work is enqueued.
        self._lock = threading.Lock()

    # --- device and stream -------------------------------------------------------------------

    @property
    def device(self):
        """The :class:`DeviceDesc` of the device the handle is bound to or was created for."""
        c = t.DeviceDescStruct(structSize=ctypes.sizeof(t.DeviceDescStruct))
        check(library().ffpaGetDeviceDesc(self, ctypes.byref(c)))
        return DeviceDesc._from_c(c)

    @property
    def stream(self):
        """The CUDA stream work is enqueued on, as an int (``cudaStream_t``; 0 = default)."""
        s = ctypes.c_void_p()
        check(library().ffpaGetStream(self, ctypes.byref(s)))
        return s.value or 0

    @stream.setter
    def stream(self, value):
        check(library().ffpaSetStream(self, int(value or 0)))

    # --- policies ------------------------------------------------------------------------------

    def set_policy(self, knob, value):
        """Sets a knob (a :class:`Knob`, its value or name). Booleans take bool or 0/1,
        enumerations an int or one of the knob's value names, strings a str."""
        number = knob_value(knob)
        info = policy_info(number)
        if info.type == t.PolicyType.STRING:
            data = str(value).encode()
            if b"\0" in data:
                raise ValueError(f"{info.name}: the value contains a NUL character")
            c = ctypes.create_string_buffer(data)
        elif info.type == t.PolicyType.INT64:
            c = ctypes.c_int64(_policy_integer(info, value, 64))
        else:
            if info.type == t.PolicyType.ENUM and isinstance(value, str):
                value = _enum_value(info, value)
            c = ctypes.c_int32(_policy_integer(info, value, 32))
        check(library().ffpaSetPolicy(self, number, ctypes.byref(c), ctypes.sizeof(c)))

    def get_policy(self, knob):
        """The current value of a knob: bool, int, or str by the knob's type."""
        number = knob_value(knob)
        kind = policy_info(number).type
        lib = library()
        if kind == t.PolicyType.STRING:
            while True:
                needed = ctypes.c_size_t()
                check(lib.ffpaGetPolicy(self, number, None, 0, ctypes.byref(needed)))
                c = ctypes.create_string_buffer(needed.value + 1)
                status = lib.ffpaGetPolicy(self, number, c, len(c), None)
                if status != 2006:  # retry when another thread set a longer value in between
                    check(status)
                    return c.value.decode()
        c = ctypes.c_int64() if kind == t.PolicyType.INT64 else ctypes.c_int32()
        check(lib.ffpaGetPolicy(self, number, ctypes.byref(c), ctypes.sizeof(c), None))
        return bool(c.value) if kind == t.PolicyType.BOOL else c.value

    def policy_source(self, knob):
        """Where the current value of a knob comes from, a :class:`PolicySource`."""
        source = ctypes.c_int32()
        check(library().ffpaGetPolicySource(self, knob_value(knob), ctypes.byref(source)))
        return t.PolicySource(source.value)

    # --- plans and execution -------------------------------------------------------------------

    def forward_workspace_size(self, attn, q, k, v, o, lse=None):
        """Bytes of workspace :meth:`forward` needs; plans the problem and caches the plan."""
        size = ctypes.c_size_t()
        check(library().ffpaGetAttentionForwardWorkspaceSize(
            self, attn, q, k, v, o, lse, ctypes.byref(size)))
        return size.value

    def describe_forward_plan(self, attn, q, k, v, o, lse=None):
        """Explains which kernel serves a forward problem and why, as a :class:`Plan`."""
        return Plan.parse(_text_call(
            library().ffpaDescribeAttentionForwardPlan, self, attn, q, k, v, o, lse))

    def forward(self, attn, q, q_ptr, k, k_ptr, v, v_ptr, o, o_ptr, *, lse=None, lse_ptr=0,
                workspace=0, workspace_size=0):
        """Enqueues the forward pass on the handle's stream (ffpaAttentionForward) and returns.

        Descriptors are :class:`TensorDesc`; pointers are device addresses as ints, which the
        caller keeps allocated until the stream has run the work.
        """
        check(library().ffpaAttentionForward(
            self, attn, q, q_ptr, k, k_ptr, v, v_ptr, o, o_ptr, lse, lse_ptr or None,
            workspace or None, workspace_size))

    def merge(self, partial_o, partial_o_ptrs, partial_lse, partial_lse_ptrs, o, o_ptr, *,
              lse=None, lse_ptr=0):
        """Enqueues the merge of partial results over disjoint key sets (ffpaAttentionMerge):
        ``LSE = log(sum exp(LSE_i))``, ``O = sum exp(LSE_i - LSE) * O_i`` in fp32. Every partial
        shares the descriptors ``partial_o`` and ``partial_lse``; ``partial_o_ptrs`` and
        ``partial_lse_ptrs`` list one device address per part (lists of different lengths are
        refused: the missing addresses count as null)."""
        count = max(len(partial_o_ptrs), len(partial_lse_ptrs))
        o_ptrs = (ctypes.c_void_p * max(count, 1))(*partial_o_ptrs)
        lse_ptrs = (ctypes.c_void_p * max(count, 1))(*partial_lse_ptrs)
        check(library().ffpaAttentionMerge(
            self, count, partial_o, o_ptrs, partial_lse, lse_ptrs, o, o_ptr, lse,
            lse_ptr or None))

    def apply_sinks(self, sinks_ptr, o, o_ptr, lse, lse_ptr):
        """Folds per-head sink logits (``H`` fp32 values at ``sinks_ptr``) into a forward result
        in place (ffpaAttentionApplySinks)."""
        check(library().ffpaAttentionApplySinks(self, sinks_ptr or None, o, o_ptr, lse, lse_ptr))

    def sinks_backward(self, sinks_ptr, o, o_ptr, do, do_ptr, lse, lse_ptr, d_sinks_ptr):
        """Writes the sinks' gradient (``H`` fp32 values at ``d_sinks_ptr``) from the
        sink-adjusted O and LSE and the output gradient (ffpaAttentionSinksBackward)."""
        check(library().ffpaAttentionSinksBackward(
            self, sinks_ptr or None, o, o_ptr, do, do_ptr, lse, lse_ptr, d_sinks_ptr or None))

    def backward_workspace_size(self, attn, q, k, v, o, do, lse, dq, dk, dv):
        """Bytes of workspace :meth:`backward` needs; plans the problem and caches the plan."""
        size = ctypes.c_size_t()
        check(library().ffpaGetAttentionBackwardWorkspaceSize(
            self, attn, q, k, v, o, do, lse, dq, dk, dv, ctypes.byref(size)))
        return size.value

    def describe_backward_plan(self, attn, q, k, v, o, do, lse, dq, dk, dv):
        """Explains which kernel serves a backward problem and why, as a :class:`Plan`."""
        return Plan.parse(_text_call(
            library().ffpaDescribeAttentionBackwardPlan, self, attn, q, k, v, o, do, lse, dq, dk,
            dv))

    def backward(self, attn, q, q_ptr, k, k_ptr, v, v_ptr, o, o_ptr, do, do_ptr, lse, lse_ptr,
                 dq, dq_ptr, dk, dk_ptr, dv, dv_ptr, *, workspace=0, workspace_size=0):
        """Enqueues the backward pass on the handle's stream (ffpaAttentionBackward) and returns;
        arguments as for :meth:`forward`."""
        check(library().ffpaAttentionBackward(
            self, attn, q, q_ptr, k, k_ptr, v, v_ptr, o, o_ptr, do, do_ptr, lse, lse_ptr,
            dq, dq_ptr, dk, dk_ptr, dv, dv_ptr, workspace or None, workspace_size))

    # --- plan cache ----------------------------------------------------------------------------

    def plan_cache_stats(self):
        """The plan-cache counters, a :class:`PlanCacheStats`."""
        c = t.PlanCacheStatsStruct(structSize=ctypes.sizeof(t.PlanCacheStatsStruct))
        check(library().ffpaGetPlanCacheStats(self, ctypes.byref(c)))
        return PlanCacheStats(c.hits, c.misses, c.evictions, c.size, c.capacity)

    def clear_plan_cache(self):
        """Drops every cached plan and resets the counters."""
        check(library().ffpaClearPlanCache(self))


def _policy_integer(info, value, bits):
    return t.checked_integer(info.name, value, bits, allowed=f"{info.min} to {info.max}")


def _enum_value(info, name):
    names = [n.lower() for n in info.value_names]
    try:
        return info.min + names.index(name.strip().lower())
    except ValueError:
        raise ValueError(f"{info.name}: {name!r} is not one of {', '.join(names)}") from None
