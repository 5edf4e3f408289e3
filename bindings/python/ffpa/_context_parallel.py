"""Context parallelism over NCCL (the ``context_parallel`` group of ffpa.h): a sequence too long
for one GPU is sharded over the ranks of the caller's NCCL communicator, one rank per process.

A :class:`ContextParallel` is attached to an :class:`AttentionDesc`
(:meth:`AttentionDesc.set_context_parallel`); the forward and backward calls of every rank, with
descriptors of the rank's **local** shards (``[B, H, n, D]``), then compute attention over the
whole sequence of ``ranks * n`` tokens, passing K/V around a ring. :meth:`ContextParallel.shard`
says which tokens of the sequence a rank holds.
"""

import collections
import ctypes

from . import _types as t
from ._errors import check
from ._library import library
from ._owned import Owned

#: What :attr:`ContextParallel.info` reports: the number of ranks, this rank, the sharding.
ContextParallelInfo = collections.namedtuple("ContextParallelInfo", "ranks rank sharding")


def _sharding(sharding):
    """A sharding as the int the library takes: a :class:`Sharding`, an int (an unknown one is
    left for the library to refuse, with its message), or a name such as ``"zigzag"``."""
    if isinstance(sharding, str):
        try:
            return int(t.Sharding[sharding.strip().upper()])
        except KeyError:
            raise ValueError(f"sharding={sharding!r}; allowed: contiguous, zigzag") from None
    return t.checked_integer("sharding", sharding, 32)


def _comm_pointer(comm):
    """The address of an ``ncclComm_t``: an int, a ``ctypes.c_void_p``, or an object whose
    ``comm`` attribute is one (CuPy's ``NcclCommunicator``); None or 0 pass NULL, which the
    library refuses with its message."""
    if comm is None:
        return None
    if isinstance(comm, ctypes.c_void_p):
        comm = comm.value
    elif not isinstance(comm, int) and hasattr(comm, "comm"):
        comm = comm.comm
    return t.checked_integer("comm", 0 if comm is None else comm, 64, signed=False) or None


class ContextParallel(Owned):
    """The calling rank's place in a ring of ranks exchanging K/V over NCCL.

    ``comm`` is the caller's NCCL communicator (``ncclComm_t``) for the handle's device, given as
    its address (an int), for example CuPy's
    ``cupy.cuda.nccl.NcclCommunicator(ranks, unique_id, rank).comm``; such a communicator object
    is also accepted itself (its ``comm`` attribute is read). libffpa reads the number of ranks
    and the rank from it, and creates a stream and events on the handle's device (so create the
    object once). The communicator is never destroyed by libffpa: keep it alive while any
    descriptor this object is attached to is used (this object keeps a reference to what was
    passed, which covers only its own lifetime).

    Raises :class:`NotSupportedError` when the library was built without NCCL
    (:func:`ffpa.build_info` says ``NCCL no``), :class:`NotInitializedError` for a handle of a
    described device, :class:`BadParamError` for a null communicator or an unknown sharding.
    """

    def __init__(self, handle, comm, sharding=t.Sharding.ZIGZAG):
        lib = library()
        pointer = ctypes.c_void_p()
        check(lib.ffpaCreateContextParallel(handle, ctypes.byref(pointer), _comm_pointer(comm),
                                            _sharding(sharding)))
        super().__init__(pointer, lib.ffpaDestroyContextParallel)
        self._comm = comm

    @classmethod
    def for_description(cls, handle, ranks, rank, sharding=t.Sharding.ZIGZAG):
        """An object for rank ``rank`` of ``ranks`` without a communicator, on any handle (also a
        described device's): workspace sizes and plan descriptions are those of a real one, but
        the forward and backward calls refuse it with :class:`NotSupportedError`."""
        lib = library()
        pointer = ctypes.c_void_p()
        check(lib.ffpaCreateContextParallelForDescription(
            handle, ctypes.byref(pointer), t.checked_integer("ranks", ranks, 32),
            t.checked_integer("rank", rank, 32), _sharding(sharding)))
        described = cls.__new__(cls)
        Owned.__init__(described, pointer, lib.ffpaDestroyContextParallel)
        described._comm = None
        return described

    @property
    def info(self):
        """A :class:`ContextParallelInfo`: the number of ranks, this rank, its :class:`Sharding`."""
        ranks, rank, sharding = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        check(library().ffpaGetContextParallelInfo(
            self, ctypes.byref(ranks), ctypes.byref(rank), ctypes.byref(sharding)))
        try:
            how = t.Sharding(sharding.value)
        except ValueError:  # a sharding newer than this package
            how = sharding.value
        return ContextParallelInfo(ranks.value, rank.value, how)

    def shard(self, local_length):
        """The tokens of the whole sequence this rank holds with ``local_length`` tokens per rank,
        in local order: a list of half-open ``(begin, end)`` ranges of global token indices (one
        with contiguous sharding, two with zigzag, whose ``local_length`` must be even).

        For example rank 1 of 4, zigzag, 1024 tokens per rank: ``[(512, 1024), (3072, 3584)]``.
        """
        ranges = (ctypes.c_int64 * 4)()
        count = ctypes.c_int32()
        check(library().ffpaGetContextParallelShard(
            self, t.checked_integer("local_length", local_length, 64), ranges, ctypes.byref(count)))
        return [(ranges[2 * i], ranges[2 * i + 1]) for i in range(count.value)]
