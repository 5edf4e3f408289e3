"""Allocation and streams through the array library the inputs come from (PyTorch or CuPy).

forward() and backward() allocate outputs and the workspace with the inputs' library, inside a
scope that makes the execution stream current, so that the library's caching allocator orders the
reuse of that memory on the stream the work runs on.
"""

import contextlib
import sys

from ._types import DataType

_NAMES = {DataType.FLOAT16: "float16", DataType.BFLOAT16: "bfloat16",
          DataType.FLOAT32: "float32"}


def stream_pointer(stream):
    """The ``cudaStream_t`` of an int, a PyTorch stream (``.cuda_stream``) or a CuPy stream
    (``.ptr``)."""
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr"):
        value = getattr(stream, attribute, None)
        if value is not None:
            return int(value)
    raise TypeError(f"stream={stream!r}: expected an int (cudaStream_t), a torch.cuda.Stream "
                    "or a cupy.cuda.Stream")


class TorchBackend:
    """Allocates with PyTorch on one CUDA device."""

    def __init__(self, device):
        self.torch = sys.modules["torch"]
        self.device = self.torch.device("cuda", device) if isinstance(device, int) else device
        if self.device is None:
            self.device = self.torch.device("cuda", self.torch.cuda.current_device())

    @property
    def ordinal(self):
        """The CUDA device ordinal."""
        index = self.device.index
        return index if index is not None else self.torch.cuda.current_device()

    def device_scope(self):
        """Makes the device current (a handle binds to the current device)."""
        return self.torch.cuda.device(self.device)

    @contextlib.contextmanager
    def on_stream(self, stream):
        """Makes the execution stream current and yields its ``cudaStream_t``."""
        torch = self.torch
        if stream is None:
            s = torch.cuda.current_stream(self.device)
        elif isinstance(stream, torch.cuda.Stream):
            s = stream
        else:
            pointer = stream_pointer(stream)
            s = (torch.cuda.default_stream(self.device) if pointer == 0
                 else torch.cuda.ExternalStream(pointer, device=self.device))
        with torch.cuda.device(self.device), torch.cuda.stream(s):
            yield s.cuda_stream

    def empty(self, shape, dtype):
        """An uninitialized tensor."""
        return self.torch.empty(shape, dtype=getattr(self.torch, _NAMES[dtype]), device=self.device)

    def workspace(self, nbytes):
        """Scratch of ``nbytes`` bytes and its address (the caching allocator aligns blocks to
        512 bytes; the library needs 256)."""
        scratch = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
        return scratch, scratch.data_ptr()


class CupyBackend:
    """Allocates with CuPy on one CUDA device."""

    def __init__(self, device):
        self.cupy = sys.modules["cupy"]
        self.ordinal = device if device is not None else self.cupy.cuda.runtime.getDevice()

    def device_scope(self):
        """Makes the device current."""
        return self.cupy.cuda.Device(self.ordinal)

    @contextlib.contextmanager
    def on_stream(self, stream):
        """Makes the execution stream current and yields its ``cudaStream_t``."""
        cupy = self.cupy
        with cupy.cuda.Device(self.ordinal):
            if stream is None:
                s = cupy.cuda.get_current_stream()
            elif hasattr(stream, "ptr") and hasattr(stream, "__enter__"):
                s = stream
            else:
                pointer = stream_pointer(stream)
                s = cupy.cuda.Stream.null if pointer == 0 else cupy.cuda.ExternalStream(pointer)
            with s:
                yield s.ptr

    def empty(self, shape, dtype):
        """An uninitialized array."""
        if dtype == DataType.BFLOAT16:
            raise TypeError("CuPy has no bfloat16 arrays; pass out= or use PyTorch")
        return self.cupy.empty(shape, dtype=getattr(self.cupy, _NAMES[dtype]))

    def workspace(self, nbytes):
        """Scratch of ``nbytes`` bytes and its address (the memory pool aligns blocks to 512
        bytes; the library needs 256)."""
        scratch = self.cupy.empty(nbytes, dtype=self.cupy.uint8)
        return scratch, scratch.data.ptr


#: The backend of each kind of input; inputs of other libraries use the first one loaded.
BACKENDS = {"torch": TorchBackend, "cupy": CupyBackend}


def backend_for(view):
    """The backend that allocates like the library ``view`` comes from. Arrays of other
    libraries (Numba, DLPack producers) are served by PyTorch, else CuPy, when loaded."""
    if view.kind in BACKENDS:
        return BACKENDS[view.kind](view.device)
    for kind, module in (("torch", "torch"), ("cupy", "cupy")):
        if module in sys.modules and kind in BACKENDS:
            return BACKENDS[kind](view.device)
    raise TypeError("outputs and the workspace are allocated with PyTorch or CuPy, and neither "
                    "is loaded; use Handle.forward / Handle.backward with buffers of your own")
