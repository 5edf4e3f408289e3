"""The lifetime of a C object owned by a Python object."""

import ctypes
import weakref


class Owned:
    """Owns one C object: destroyed by :meth:`close`, by leaving a ``with`` block, or when the
    Python object is collected. The finalizer holds the C pointer, not the object, and does not
    run at interpreter exit, when CUDA and the library may already be going away."""

    def __init__(self, pointer, destroy):
        self._as_parameter_ = pointer  # how ctypes passes this object to C
        self._finalizer = weakref.finalize(self, destroy, pointer)
        self._finalizer.atexit = False

    def close(self):
        """Destroys the C object now; later calls with it raise :class:`FfpaError`."""
        self._finalizer()
        self._as_parameter_ = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
