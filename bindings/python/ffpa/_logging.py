"""Routing the library's log messages to a Python function."""

import atexit
import threading

from . import _types as t
from ._errors import check
from ._library import library

_lock = threading.Lock()
_thunk = None  # the ctypes function the library holds: it must outlive its registration
_atexit_registered = False
_NULL = t.LogCallback()  # a NULL function pointer: ctypes does not take None for a CFUNCTYPE


def set_log_callback(callback):
    """Sends every log message of the process to ``callback(level, message)`` instead of
    standard error; ``None`` restores standard error.

    ``level`` is a :class:`LogLevel`, ``message`` a str. Which messages are produced is decided
    per handle by the LOG_LEVEL knob (environment variable ``FFPA_LOGGER_LEVEL``). The callback
    runs on whichever thread logs, while the library holds its logging lock: it must be quick
    and must not call into ffpa. An exception it raises is reported by Python and dropped.
    """
    global _thunk, _atexit_registered
    with _lock:
        if callback is None:
            thunk = None
        else:
            def receive(level, message, _user_data):
                callback(_level(level), message.decode(errors="replace") if message else "")
            thunk = t.LogCallback(receive)
        check(library().ffpaSetLogCallback(_NULL if thunk is None else thunk, None))
        # The library no longer calls the old thunk once the call above returned.
        _thunk = thunk
        if thunk is not None and not _atexit_registered:
            # A message logged while the interpreter shuts down must not reach Python.
            atexit.register(_reset_at_exit)
            _atexit_registered = True


def _level(value):
    try:
        return t.LogLevel(value)
    except ValueError:
        return value


def _reset_at_exit():
    if _thunk is not None:
        library().ffpaSetLogCallback(_NULL, None)
