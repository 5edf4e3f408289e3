"""Tensor and attention descriptors: Python objects that own the C descriptors."""

import ctypes

from . import _types as t
from ._errors import check
from ._library import library
from ._owned import Owned


def _created(create):
    pointer = ctypes.c_void_p()
    check(create(ctypes.byref(pointer)))
    return pointer


class TensorDesc(Owned):
    """A strided tensor: element type, dimensions and strides in elements.

    Attention tensors have the dimensions ``[B, H, N, D]`` whatever their memory layout; the
    log-sum-exp has ``[B, H, N]``. ``strides=None`` means packed row-major. The constructor
    raises :class:`FfpaError` for dimensions or strides the library refuses.
    """

    def __init__(self, dtype, dims, strides=None):
        lib = library()
        super().__init__(_created(lib.ffpaCreateTensorDescriptor), lib.ffpaDestroyTensorDescriptor)
        dims = [int(d) for d in dims]
        if strides is not None and len(strides) != len(dims):
            raise ValueError(f"{len(dims)} dims but {len(strides)} strides")
        c_dims = (ctypes.c_int64 * len(dims))(*dims)
        c_strides = None if strides is None else (ctypes.c_int64 * len(dims))(*map(int, strides))
        check(lib.ffpaSetTensorDescriptor(self, int(dtype), len(dims), c_dims, c_strides))

    @classmethod
    def bhnd(cls, dtype, b, h, n, d):
        """A packed tensor ``[B, H, N, D]`` stored in that order."""
        return cls(dtype, (b, h, n, d), (h * n * d, n * d, d, 1))

    @classmethod
    def bnhd(cls, dtype, b, h, n, d):
        """A packed tensor ``[B, H, N, D]`` stored as ``[B, N, H, D]``."""
        return cls(dtype, (b, h, n, d), (n * h * d, d, h * d, 1))

    @classmethod
    def lse(cls, b, h, n):
        """The packed fp32 log-sum-exp ``[B, H, N]``."""
        return cls(t.DataType.FLOAT32, (b, h, n), (h * n, n, 1))

    def _read(self):
        dtype, count = ctypes.c_int32(), ctypes.c_int32()
        dims = (ctypes.c_int64 * t.MAX_TENSOR_DIMS)()
        strides = (ctypes.c_int64 * t.MAX_TENSOR_DIMS)()
        check(library().ffpaGetTensorDescriptor(
            self, ctypes.byref(dtype), t.MAX_TENSOR_DIMS, ctypes.byref(count), dims, strides))
        return t.DataType(dtype.value), tuple(dims[:count.value]), tuple(strides[:count.value])

    @property
    def dtype(self):
        """The element type, a :class:`DataType`."""
        return self._read()[0]

    @property
    def dims(self):
        """The dimensions, a tuple."""
        return self._read()[1]

    @property
    def strides(self):
        """The strides in elements, a tuple (computed by the library when created packed)."""
        return self._read()[2]

    def __repr__(self):
        dtype, dims, strides = self._read()
        return f"TensorDesc({dtype.name}, dims={dims}, strides={strides})"


def causal_mode(causal):
    """A :class:`CausalMode` from a bool (True: TOP_LEFT, PyTorch's ``is_causal``), a mode, or
    a name such as ``"bottom_right"`` / ``"bottom-right"``."""
    if causal is None or causal is False:
        return t.CausalMode.NONE
    if causal is True:
        return t.CausalMode.TOP_LEFT
    if isinstance(causal, str):
        try:
            return t.CausalMode[causal.strip().upper().replace("-", "_")]
        except KeyError:
            raise ValueError(f"causal={causal!r}; allowed: none, top_left, bottom_right, "
                             "True, False") from None
    return t.CausalMode(causal)


class AttentionDesc(Owned):
    """The attention operation: softmax scale (None: ``1/sqrt(d_qk)``) and causal mask."""

    def __init__(self, scale=None, causal=False):
        lib = library()
        super().__init__(_created(lib.ffpaCreateAttentionDescriptor),
                         lib.ffpaDestroyAttentionDescriptor)
        if scale is not None:
            self.scale = scale
        self.causal = causal

    def _set(self, attribute, value):
        check(library().ffpaSetAttentionAttribute(
            self, attribute, ctypes.byref(value), ctypes.sizeof(value)))

    def _get(self, attribute, value):
        check(library().ffpaGetAttentionAttribute(
            self, attribute, ctypes.byref(value), ctypes.sizeof(value), None))
        return value.value

    @property
    def scale(self):
        """The softmax scale; None when it is the default ``1/sqrt(d_qk)``."""
        value = self._get(t.ATTENTION_SOFTMAX_SCALE, ctypes.c_float())
        return None if value == 0 else value

    @scale.setter
    def scale(self, value):
        self._set(t.ATTENTION_SOFTMAX_SCALE, ctypes.c_float(value))

    @property
    def causal(self):
        """The mask, a :class:`CausalMode`; set it with anything :func:`causal_mode` accepts."""
        return t.CausalMode(self._get(t.ATTENTION_CAUSAL_MODE, ctypes.c_int32()))

    @causal.setter
    def causal(self, value):
        self._set(t.ATTENTION_CAUSAL_MODE, ctypes.c_int32(causal_mode(value)))

    @property
    def key_lengths(self):
        """The device address of ``B`` int32 key counts, one per batch entry (entry ``b`` sees keys
        ``[0, L_b)`` only; FFPA_ATTENTION_KEY_LENGTHS), or None (every entry has all keys). Set it
        from the address of a device buffer (an ``int``, e.g. ``tensor.data_ptr()`` of a CUDA
        int32 tensor), or None to detach it."""
        return self._get(t.ATTENTION_KEY_LENGTHS, ctypes.c_void_p()) or None

    @key_lengths.setter
    def key_lengths(self, address):
        self._set(t.ATTENTION_KEY_LENGTHS, ctypes.c_void_p(address or None))

    def set_slices(self, slices):
        """Attaches the current list of an :class:`AttentionSlices` as the mask (the causal mode
        must then be NONE), or detaches it with None. The descriptor keeps the list it was given:
        later changes to ``slices``, or closing it, do not reach the descriptor."""
        check(library().ffpaSetAttentionDescriptorSlices(self, slices))

    def set_context_parallel(self, cp):
        """Attaches a :class:`ContextParallel` (or detaches it with None): the descriptor's calls
        are then those of one rank of the ring, with tensor descriptors of the rank's local
        shards, and any causal mode masks the whole sequence (token i sees token j when
        j <= i). The descriptor keeps its own reference: closing ``cp`` afterwards is fine.
        Slices on the same descriptor mask the whole sequence (global token positions, up to
        ``ranks * n``)."""
        check(library().ffpaSetAttentionDescriptorContextParallel(self, cp))

    def __repr__(self):
        return f"AttentionDesc(scale={self.scale}, causal={self.causal.name})"
