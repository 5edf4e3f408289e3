"""Reading device arrays of other libraries: PyTorch tensors, ``__cuda_array_interface__`` and
DLPack, without importing any of those libraries.

PyTorch tensors are read directly (``data_ptr``, ``stride``, ``dtype``): their
``__cuda_array_interface__`` refuses tensors that require grad, and older versions have no
bfloat16 in it.
"""

import ctypes
import dataclasses
import sys

from ._descriptors import TensorDesc
from ._types import DataType

LAYOUTS = ("bhnd", "bnhd")

# __cuda_array_interface__ type strings. bfloat16 has no letter: ml_dtypes and PyTorch export it
# as a two-byte void, the only two-byte void type in use with device arrays.
_TYPESTRS = {
    "<f2": DataType.FLOAT16,
    "<V2": DataType.BFLOAT16,
    "|V2": DataType.BFLOAT16,
    "<f4": DataType.FLOAT32,
}
_TORCH_DTYPES = {
    "torch.float16": DataType.FLOAT16,
    "torch.bfloat16": DataType.BFLOAT16,
    "torch.float32": DataType.FLOAT32,
}
# DLPack (type code, bits, lanes): kDLFloat = 2, kDLBfloat = 4.
_DLPACK_DTYPES = {
    (2, 16, 1): DataType.FLOAT16,
    (4, 16, 1): DataType.BFLOAT16,
    (2, 32, 1): DataType.FLOAT32,
}
_DLPACK_CUDA_DEVICES = (2, 13)  # kDLCUDA, kDLCUDAManaged


@dataclasses.dataclass
class ArrayView:
    """What libffpa needs to know of a device array. Strides are in elements."""
    ptr: int                #: device address of element [0, ..., 0]
    shape: tuple            #: extents in the array's own order
    strides: tuple          #: strides in elements, in the same order
    dtype: DataType         #: element type
    device: object = None   #: CUDA device ordinal when the producer says, else None
    readonly: bool = False  #: the producer marked the memory read-only
    kind: str = "cai"       #: "torch", "cupy", "cai" or "dlpack": which library made it
    stream: object = None   #: the stream the producer names (CUDA array interface v3), if any
    owner: object = None    #: keeps the producer's memory alive while the view is used

    def dims_and_strides(self, layout="bhnd"):
        """Dimensions ``[B, H, N, D]`` and matching strides of a 4-D array stored as ``layout``
        (``"bhnd"`` or ``"bnhd"``); 3-D arrays (the log-sum-exp) are taken as they are."""
        if len(self.shape) == 3:
            return self.shape, self.strides
        if len(self.shape) != 4:
            raise ValueError(f"an attention tensor has 4 dimensions, this one has {self.shape}")
        if _layout(layout) == "bnhd":
            order = (0, 2, 1, 3)
            return (tuple(self.shape[i] for i in order), tuple(self.strides[i] for i in order))
        return self.shape, self.strides

    def tensor_desc(self, layout="bhnd"):
        """A :class:`TensorDesc` of this array, read as ``layout``."""
        dims, strides = self.dims_and_strides(layout)
        return TensorDesc(self.dtype, dims, strides)


def _layout(layout):
    value = str(layout).lower()
    if value not in LAYOUTS:
        raise ValueError(f"layout={layout!r}; allowed: 'bhnd' ([B, H, N, D] in memory) or "
                         "'bnhd' ([B, N, H, D] in memory)")
    return value


def _contiguous_strides(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))


def is_torch_tensor(obj):
    """True for a PyTorch tensor, without importing torch."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def is_cupy_array(obj):
    """True for a CuPy array, without importing cupy."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(obj, cupy.ndarray)


def _torch_view(tensor):
    if not tensor.is_cuda:
        raise TypeError(f"the tensor is on {tensor.device}; libffpa needs CUDA tensors")
    dtype = _TORCH_DTYPES.get(str(tensor.dtype))
    if dtype is None:
        raise TypeError(f"{tensor.dtype} is not supported; use float16, bfloat16 or float32")
    return ArrayView(ptr=tensor.data_ptr(), shape=tuple(tensor.shape),
                     strides=tuple(tensor.stride()), dtype=dtype, device=tensor.device.index,
                     kind="torch", owner=tensor)


def view_from_interface(obj, interface):
    """An :class:`ArrayView` from a ``__cuda_array_interface__`` dictionary (versions 0 to 3)."""
    typestr = interface["typestr"]
    dtype = _TYPESTRS.get(typestr)
    if dtype is None:
        raise TypeError(f"typestr {typestr!r} is not supported; allowed: '<f2' (float16), "
                        "'<V2' (bfloat16), '<f4' (float32)")
    if interface.get("mask") is not None:
        raise TypeError("masked arrays are not supported")
    shape = tuple(int(extent) for extent in interface["shape"])
    byte_strides = interface.get("strides")
    if byte_strides is None:
        strides = _contiguous_strides(shape)
    else:
        if any(int(s) % dtype.itemsize for s in byte_strides):
            raise ValueError(f"strides {tuple(byte_strides)} bytes are not multiples of the "
                             f"{dtype.itemsize}-byte element")
        strides = tuple(int(s) // dtype.itemsize for s in byte_strides)
    ptr, readonly = interface["data"]
    device = obj.device.id if is_cupy_array(obj) else None
    return ArrayView(ptr=int(ptr or 0), shape=shape, strides=strides, dtype=dtype, device=device,
                     readonly=bool(readonly), kind="cupy" if is_cupy_array(obj) else "cai",
                     stream=interface.get("stream"), owner=obj)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def _capsule_pointer(capsule, name):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


def view_from_dlpack(obj):
    """An :class:`ArrayView` from an object with ``__dlpack__`` (an unversioned capsule). The
    capsule is not consumed: the view keeps it, and the producer's memory, alive."""
    device_type, device_id = obj.__dlpack_device__()
    if int(device_type) not in _DLPACK_CUDA_DEVICES:
        raise TypeError(f"DLPack device type {int(device_type)} is not CUDA memory")
    capsule = obj.__dlpack__()
    # DLManagedTensor starts with its DLTensor, so the capsule's pointer is the DLTensor's.
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    dtype = _DLPACK_DTYPES.get((tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes))
    if dtype is None:
        raise TypeError(f"DLPack type (code {tensor.dtype.code}, {tensor.dtype.bits} bits, "
                        f"{tensor.dtype.lanes} lanes) is not float16, bfloat16 or float32")
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    strides = (tuple(tensor.strides[i] for i in range(tensor.ndim)) if tensor.strides
               else _contiguous_strides(shape))
    return ArrayView(ptr=(tensor.data or 0) + tensor.byte_offset, shape=shape, strides=strides,
                     dtype=dtype, device=int(device_id), kind="dlpack", owner=(obj, capsule))


def array_view(obj):
    """Reads a device array: a PyTorch CUDA tensor, an object with ``__cuda_array_interface__``
    (CuPy, Numba, ...), or one with ``__dlpack__``, in that order of preference. An
    :class:`ArrayView` is returned as it is."""
    if isinstance(obj, ArrayView):
        return obj
    if is_torch_tensor(obj):
        return _torch_view(obj)
    try:
        interface = obj.__cuda_array_interface__
    except AttributeError:
        interface = None
    if interface is not None:
        return view_from_interface(obj, interface)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return view_from_dlpack(obj)
    raise TypeError(f"{type(obj).__name__} is not a device array: it has neither "
                    "__cuda_array_interface__ nor __dlpack__")
