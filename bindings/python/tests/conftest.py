"""Shared fixtures. The package is imported from the source tree; libffpa.so.0 is found through
FFPA_LIBRARY or the loader (run-tests sets LD_LIBRARY_PATH to a Meson build)."""

import contextlib
import itertools
import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import ffpa  # noqa: E402  (after the path is set)
from ffpa import _backends  # noqa: E402

#: The public header of the tree these bindings belong to.
HEADER = pathlib.Path(__file__).resolve().parents[3] / "include" / "ffpa" / "ffpa.h"

#: An A100 40 GB, so that planning tests need no GPU.
A100 = ffpa.DeviceDesc(ordinal=0, sm_version=80, sm_count=108,
                       shared_mem_per_block_optin=163 * 1024, shared_mem_per_sm=164 * 1024,
                       global_mem_bytes=40 << 30, name="NVIDIA A100-SXM4-40GB (described)")


@pytest.fixture
def described():
    """A handle for the described A100."""
    with ffpa.Handle(device=A100) as handle:
        yield handle


@pytest.fixture
def header_text():
    """The text of include/ffpa/ffpa.h."""
    if not HEADER.is_file():
        pytest.skip(f"{HEADER} is not there (the bindings were copied out of their tree)")
    return HEADER.read_text()


# --- Fake device arrays: addresses that are never dereferenced -------------------------------

_addresses = itertools.count(1 << 40, 1 << 30)  # 1 GiB apart, aligned far beyond 256 bytes

TYPESTRS = {ffpa.DataType.FLOAT16: "<f2", ffpa.DataType.BFLOAT16: "<V2",
            ffpa.DataType.FLOAT32: "<f4"}


class FakeArray:
    """An object with a __cuda_array_interface__, as CuPy or Numba arrays have."""

    def __init__(self, shape, typestr="<f2", strides=None, ptr=None, readonly=False, **extra):
        self.__cuda_array_interface__ = dict(
            shape=tuple(shape), typestr=typestr, strides=strides,
            data=(next(_addresses) if ptr is None else ptr, readonly), version=3, **extra)

    @property
    def ptr(self):
        """The fake device address."""
        return self.__cuda_array_interface__["data"][0]


class FakeBackend:
    """Stands in for PyTorch or CuPy: allocates FakeArrays and records them."""

    allocations = []
    stream = 0x5eed00

    def __init__(self, device):
        self.ordinal = 0 if device is None else device

    def device_scope(self):
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def on_stream(self, stream):
        yield self.stream if stream is None else _backends.stream_pointer(stream)

    def empty(self, shape, dtype):
        array = FakeArray(shape, TYPESTRS[dtype])
        FakeBackend.allocations.append(("empty", tuple(shape), dtype))
        return array

    def workspace(self, nbytes):
        FakeBackend.allocations.append(("workspace", nbytes))
        return None, next(_addresses)


@pytest.fixture
def fake_backend(monkeypatch):
    """Makes forward() and backward() allocate FakeArrays for FakeArray inputs."""
    FakeBackend.allocations = []
    monkeypatch.setitem(_backends.BACKENDS, "cai", FakeBackend)
    return FakeBackend


def library_path():
    """The file the process loaded libffpa from."""
    ffpa.library()
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libffpa.so" in line:
                return line.split()[-1]
    pytest.skip("cannot tell where libffpa was loaded from")


def clean_environment():
    """The environment without the variables that point at libffpa."""
    return {k: v for k, v in os.environ.items() if k not in ("FFPA_LIBRARY", "LD_LIBRARY_PATH")}
