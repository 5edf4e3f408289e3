"""Reading device arrays: __cuda_array_interface__ and DLPack, with fake objects (no GPU)."""

import ctypes

import pytest

import ffpa
from ffpa import _arrays
from conftest import FakeArray

F16, BF16, F32 = ffpa.DataType.FLOAT16, ffpa.DataType.BFLOAT16, ffpa.DataType.FLOAT32


def test_contiguous_array():
    array = FakeArray((2, 4, 16, 64), "<f2")
    view = ffpa.array_view(array)
    assert view.ptr == array.ptr and view.shape == (2, 4, 16, 64)
    assert view.strides == (4096, 1024, 64, 1) and view.dtype is F16
    assert view.kind == "cai" and view.owner is array and not view.readonly
    assert ffpa.array_view(view) is view


@pytest.mark.parametrize("typestr, dtype", [("<f2", F16), ("<V2", BF16), ("|V2", BF16),
                                            ("<f4", F32)])
def test_type_strings(typestr, dtype):
    assert ffpa.array_view(FakeArray((1, 1, 1, 8), typestr)).dtype is dtype


@pytest.mark.parametrize("typestr", ["<f8", "<i2", ">f2", "|u1"])
def test_other_types_are_refused(typestr):
    with pytest.raises(TypeError, match="not supported"):
        ffpa.array_view(FakeArray((1, 1, 1, 8), typestr))


def test_byte_strides_become_element_strides():
    # [B, N, H, D] storage of fp32, with rows padded to 80 elements.
    array = FakeArray((2, 16, 4, 64), "<f4", strides=(16 * 4 * 80 * 4, 4 * 80 * 4, 80 * 4, 4))
    view = ffpa.array_view(array)
    assert view.strides == (5120, 320, 80, 1)
    dims, strides = view.dims_and_strides("bnhd")
    assert dims == (2, 4, 16, 64) and strides == (5120, 80, 320, 1)
    desc = view.tensor_desc("BNHD")
    assert desc.dims == (2, 4, 16, 64) and desc.strides == (5120, 80, 320, 1)


def test_strides_must_be_whole_elements():
    with pytest.raises(ValueError, match="not multiples of the 2-byte element"):
        ffpa.array_view(FakeArray((1, 1, 2, 8), "<f2", strides=(33, 33, 17, 2)))


def test_masked_arrays_are_refused():
    with pytest.raises(TypeError, match="masked"):
        ffpa.array_view(FakeArray((1, 1, 1, 8), mask=object()))


def test_read_only_and_stream_are_kept():
    view = ffpa.array_view(FakeArray((1, 1, 1, 8), readonly=True, stream=2))
    assert view.readonly and view.stream == 2


def test_layouts_and_ranks():
    view = ffpa.array_view(FakeArray((3, 5, 7), "<f4"))
    assert view.dims_and_strides("bnhd") == ((3, 5, 7), (35, 7, 1))  # the log-sum-exp
    with pytest.raises(ValueError, match="4 dimensions"):
        ffpa.array_view(FakeArray((1, 2, 3, 4, 5))).dims_and_strides()
    with pytest.raises(ValueError, match="layout='nhd'"):
        ffpa.array_view(FakeArray((1, 2, 3, 4))).dims_and_strides("nhd")


def test_objects_without_an_interface_are_refused():
    with pytest.raises(TypeError, match="neither __cuda_array_interface__ nor __dlpack__"):
        ffpa.array_view([1.0, 2.0])


class FakeDLPack:
    """An object that exports only a DLPack capsule, built by hand as a producer would."""

    def __init__(self, shape, strides, code=2, bits=16, device_type=2, offset=0):
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        self.tensor = _arrays._DLTensor(
            data=1 << 41, device=_arrays._DLDevice(device_type, 1), ndim=len(shape),
            dtype=_arrays._DLDataType(code, bits, 1), shape=self.shape,
            strides=ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64)), byte_offset=offset)
        self.device_type = device_type

    def __dlpack_device__(self):
        return (self.device_type, 1)

    def __dlpack__(self):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.tensor), b"dltensor", None)


def test_dlpack():
    view = ffpa.array_view(FakeDLPack((2, 3, 4, 8), (96, 32, 8, 1), code=4, offset=256))
    assert (view.ptr, view.shape, view.strides) == ((1 << 41) + 256, (2, 3, 4, 8), (96, 32, 8, 1))
    assert (view.dtype, view.device, view.kind) == (BF16, 1, "dlpack")
    assert ffpa.array_view(FakeDLPack((2, 3), None, bits=32)).strides == (3, 1)


def test_dlpack_refuses_host_memory_and_other_types():
    with pytest.raises(TypeError, match="not CUDA memory"):
        ffpa.array_view(FakeDLPack((2, 3), None, device_type=1))
    with pytest.raises(TypeError, match="not float16, bfloat16 or float32"):
        ffpa.array_view(FakeDLPack((2, 3), None, code=0, bits=32))
