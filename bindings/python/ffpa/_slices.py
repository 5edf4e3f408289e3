"""Attention slices: packed variable-length batches and flexible masks (the ``slices`` group of
ffpa.h). A list is made for the device of a handle and attached to an :class:`AttentionDesc`."""

import collections
import ctypes

from . import _types as t
from ._errors import check
from ._library import library
from ._owned import Owned

#: What :attr:`AttentionSlices.info` reports.
SlicesInfo = collections.namedtuple("SlicesInfo", "count query_extent key_extent visible_pairs")


def _int32_array(values):
    values = [int(v) for v in values]
    return (ctypes.c_int32 * max(len(values), 1))(*values)


class AttentionSlices(Owned):
    """A checked list of ``(q0, q1, k0, k1, mask)`` slices, copied to the device of ``handle``.

    ``slices`` (optional) sets the list at once, as :meth:`set` does. Raises :class:`FfpaError`
    when the library refuses the list (a range out of bounds, a key given twice to a row).
    """

    def __init__(self, handle, slices=None):
        lib = library()
        pointer = ctypes.c_void_p()
        check(lib.ffpaCreateAttentionSlices(handle, ctypes.byref(pointer)))
        super().__init__(pointer, lib.ffpaDestroyAttentionSlices)
        if slices is not None:
            self.set(slices)

    def set(self, slices):
        """Sets the list from ``(q0, q1, k0, k1)`` or ``(q0, q1, k0, k1, mask)`` tuples (mask a
        :class:`SliceMask`, FULL when left out). Returns self."""
        rows = [tuple(s) for s in slices]
        for i, row in enumerate(rows):
            if len(row) not in (4, 5):
                raise ValueError(f"slice {i} has {len(row)} items; expected (q0, q1, k0, k1[, mask])")
        queries = _int32_array(v for row in rows for v in row[0:2])
        keys = _int32_array(v for row in rows for v in row[2:4])
        masks = _int32_array(int(row[4]) if len(row) == 5 else t.SliceMask.FULL for row in rows)
        check(library().ffpaSetAttentionSlices(self, len(rows), queries, keys, masks))
        return self

    def set_from_offsets(self, query_offsets, key_offsets=None, mask=t.SliceMask.FULL):
        """One slice per sequence of a packed batch, from cumulative offsets (``cu_seqlens``,
        starting at 0); ``key_offsets=None`` uses the query offsets. Returns self."""
        sequences = len(query_offsets) - 1
        if key_offsets is not None and len(key_offsets) != len(query_offsets):
            raise ValueError(f"{len(query_offsets)} query offsets but {len(key_offsets)} key offsets")
        keys = None if key_offsets is None else _int32_array(key_offsets)
        check(library().ffpaSetAttentionSlicesFromOffsets(
            self, sequences, _int32_array(query_offsets), keys, int(mask)))
        return self

    @property
    def info(self):
        """A :class:`SlicesInfo`: slice count, query and key extents, visible (query, key) pairs."""
        count = ctypes.c_int32()
        extents = [ctypes.c_int64() for _ in range(3)]
        check(library().ffpaGetAttentionSlicesInfo(self, ctypes.byref(count),
                                                   *(ctypes.byref(e) for e in extents)))
        return SlicesInfo(count.value, *(e.value for e in extents))
