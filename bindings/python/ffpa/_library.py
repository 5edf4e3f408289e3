"""Finding and loading libffpa.so.0, and the ctypes signatures of its functions.

The library is loaded on first use rather than at import, so that ``import ffpa`` works on any
machine and a missing library is reported where it matters, with the places that were searched.
"""

import ctypes
import os
import sys
import threading

from . import _types as t

#: The file name the dynamic loader looks for; the number is the ABI's major version.
LIBRARY_NAME = "libffpa.so.0"

#: The version of ffpa.h this package was written against (MAJOR*10000 + MINOR*100 + PATCH).
HEADER_VERSION = 100


class LibraryNotFound(OSError):
    """libffpa could not be loaded, or the library found is too old for this package.

    Raised by the first call that needs the library, never by ``import ffpa``. The message lists
    where the library was looked for and how to point at it (``FFPA_LIBRARY``).
    """


_P = ctypes.POINTER
_status = ctypes.c_int32
_handle = ctypes.c_void_p
_desc = ctypes.c_void_p
_ptr = ctypes.c_void_p
_size = ctypes.c_size_t

#: Every function of ffpa.h: name -> (return type, argument types). Enumerations are int32.
SIGNATURES = {
    "ffpaGetVersion": (ctypes.c_uint32, []),
    "ffpaGetBuildInfo": (ctypes.c_char_p, []),
    "ffpaGetErrorString": (ctypes.c_char_p, [ctypes.c_int32]),
    "ffpaGetLastErrorString": (_size, [ctypes.c_char_p, _size]),
    "ffpaSetLogCallback": (_status, [t.LogCallback, ctypes.c_void_p]),
    "ffpaCreate": (_status, [_P(_handle)]),
    "ffpaCreateForDevice": (_status, [_P(_handle), _P(t.DeviceDescStruct)]),
    "ffpaDestroy": (_status, [_handle]),
    "ffpaSetStream": (_status, [_handle, ctypes.c_void_p]),
    "ffpaGetStream": (_status, [_handle, _P(ctypes.c_void_p)]),
    "ffpaGetDeviceDesc": (_status, [_handle, _P(t.DeviceDescStruct)]),
    "ffpaSetPolicy": (_status, [_handle, ctypes.c_int32, _ptr, _size]),
    "ffpaGetPolicy": (_status, [_handle, ctypes.c_int32, _ptr, _size, _P(_size)]),
    "ffpaGetPolicySource": (_status, [_handle, ctypes.c_int32, _P(ctypes.c_int32)]),
    "ffpaGetPolicyInfo": (_status, [ctypes.c_int32, _P(t.PolicyInfoStruct)]),
    "ffpaGetPolicyKnobs": (_status, [ctypes.c_int32, _P(ctypes.c_int32), _P(ctypes.c_int32)]),
    "ffpaCreateTensorDescriptor": (_status, [_P(_desc)]),
    "ffpaDestroyTensorDescriptor": (_status, [_desc]),
    "ffpaSetTensorDescriptor": (
        _status, [_desc, ctypes.c_int32, ctypes.c_int32, _P(ctypes.c_int64), _P(ctypes.c_int64)]),
    "ffpaGetTensorDescriptor": (
        _status, [_desc, _P(ctypes.c_int32), ctypes.c_int32, _P(ctypes.c_int32),
                  _P(ctypes.c_int64), _P(ctypes.c_int64)]),
    "ffpaCreateAttentionDescriptor": (_status, [_P(_desc)]),
    "ffpaDestroyAttentionDescriptor": (_status, [_desc]),
    "ffpaSetAttentionAttribute": (_status, [_desc, ctypes.c_int32, _ptr, _size]),
    "ffpaGetAttentionAttribute": (_status, [_desc, ctypes.c_int32, _ptr, _size, _P(_size)]),
    "ffpaCreateAttentionSlices": (_status, [_handle, _P(_desc)]),
    "ffpaDestroyAttentionSlices": (_status, [_desc]),
    "ffpaSetAttentionSlices": (
        _status, [_desc, ctypes.c_int32, _P(ctypes.c_int32), _P(ctypes.c_int32),
                  _P(ctypes.c_int32)]),
    "ffpaSetAttentionSlicesFromOffsets": (
        _status, [_desc, ctypes.c_int32, _P(ctypes.c_int32), _P(ctypes.c_int32), ctypes.c_int32]),
    "ffpaGetAttentionSlicesInfo": (
        _status, [_desc, _P(ctypes.c_int32), _P(ctypes.c_int64), _P(ctypes.c_int64),
                  _P(ctypes.c_int64)]),
    "ffpaSetAttentionDescriptorSlices": (_status, [_desc, _desc]),
    "ffpaCreateContextParallel": (_status, [_handle, _P(_desc), ctypes.c_void_p, ctypes.c_int32]),
    "ffpaCreateContextParallelForDescription": (
        _status, [_handle, _P(_desc), ctypes.c_int32, ctypes.c_int32, ctypes.c_int32]),
    "ffpaDestroyContextParallel": (_status, [_desc]),
    "ffpaGetContextParallelInfo": (
        _status, [_desc, _P(ctypes.c_int32), _P(ctypes.c_int32), _P(ctypes.c_int32)]),
    "ffpaGetContextParallelShard": (
        _status, [_desc, ctypes.c_int64, _P(ctypes.c_int64), _P(ctypes.c_int32)]),
    "ffpaSetAttentionDescriptorContextParallel": (_status, [_desc, _desc]),
    "ffpaGetAttentionForwardWorkspaceSize": (_status, [_handle, _desc] + [_desc] * 5 + [_P(_size)]),
    "ffpaAttentionForward": (
        _status, [_handle, _desc] + [_desc, _ptr] * 5 + [_ptr, _size]),
    "ffpaDescribeAttentionForwardPlan": (
        _status, [_handle, _desc] + [_desc] * 5 + [ctypes.c_char_p, _size, _P(_size)]),
    "ffpaGetAttentionBackwardWorkspaceSize": (
        _status, [_handle, _desc] + [_desc] * 9 + [_P(_size)]),
    "ffpaDescribeAttentionBackwardPlan": (
        _status, [_handle, _desc] + [_desc] * 9 + [ctypes.c_char_p, _size, _P(_size)]),
    "ffpaAttentionBackward": (
        _status, [_handle, _desc] + [_desc, _ptr] * 9 + [_ptr, _size]),
    "ffpaAttentionMerge": (
        _status, [_handle, ctypes.c_int32, _desc, _P(_ptr), _desc, _P(_ptr), _desc, _ptr, _desc,
                  _ptr]),
    "ffpaAttentionApplySinks": (_status, [_handle, _ptr, _desc, _ptr, _desc, _ptr]),
    "ffpaAttentionSinksBackward": (
        _status, [_handle, _ptr, _desc, _ptr, _desc, _ptr, _desc, _ptr, _ptr]),
    "ffpaGetPlanCacheStats": (_status, [_handle, _P(t.PlanCacheStatsStruct)]),
    "ffpaClearPlanCache": (_status, [_handle]),
}

_lock = threading.Lock()
_lib = None


def is_compatible(runtime):
    """True when a library of version ``runtime`` can serve this package: the same major version
    and a minor version at least the one this package was written for."""
    return (runtime // 10000 == HEADER_VERSION // 10000
            and runtime % 10000 // 100 >= HEADER_VERSION % 10000 // 100)


def _search_description():
    """Where the platform loader looks for a bare file name, for the error message."""
    places = []
    ld_path = os.environ.get("LD_LIBRARY_PATH", "")
    places.append("LD_LIBRARY_PATH=" + (ld_path if ld_path else "(unset)"))
    if sys.platform.startswith("linux"):
        places.append("the ld.so cache (/etc/ld.so.cache; run ldconfig after installing)")
        places.append("the default directories /lib and /usr/lib")
    return "; ".join(places)


def _open():
    override = os.environ.get("FFPA_LIBRARY", "")
    if override:
        path = os.path.join(override, LIBRARY_NAME) if os.path.isdir(override) else override
        try:
            return ctypes.CDLL(path)
        except OSError as error:
            raise LibraryNotFound(
                f"libffpa could not be loaded from FFPA_LIBRARY={override!r}: {error}") from None
    try:
        return ctypes.CDLL(LIBRARY_NAME)
    except OSError as error:
        raise LibraryNotFound(
            f"{LIBRARY_NAME} was not found ({error}). Searched: {_search_description()}. "
            "Set FFPA_LIBRARY to the library's path, or add its directory to LD_LIBRARY_PATH."
        ) from None


def _declare(lib):
    for name, (restype, argtypes) in SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


def library():
    """The loaded library with every signature declared; loads it on first use.

    Raises :class:`LibraryNotFound` when it cannot be loaded or is too old for this package.
    """
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                lib = _open()
                try:
                    _declare(lib)
                except AttributeError as error:
                    raise LibraryNotFound(f"the libffpa found lacks a function: {error}") from None
                version = lib.ffpaGetVersion()
                if not is_compatible(version):
                    raise LibraryNotFound(
                        f"the libffpa found is version {version}, which cannot serve this package "
                        f"(written for {HEADER_VERSION}: same major, at least the same minor)")
                _lib = lib
    return _lib
