"""The enumerations and structures of ffpa.h, with the header's values and layouts.

The values are written out (a ctypes binding cannot read the header); a test compares them with
include/ffpa/ffpa.h and the structure layouts with the C compiler's.
"""

import ctypes
import enum
import operator


def checked_integer(name, value, bits, signed=True, allowed=None):
    """``value`` as an int that fits a C integer of ``bits`` bits (ctypes would silently wrap a
    larger one); ``allowed`` says what the library takes, for the message (default: the type's
    range). Raises TypeError for a non-integer, ValueError for one out of the type's range."""
    try:
        value = operator.index(value)  # int, bool and integer types of array libraries
    except TypeError:
        raise TypeError(f"{name} takes an integer, not {type(value).__name__}") from None
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    if not low <= value < high:
        kind = f"int{bits}" if signed else f"uint{bits}"
        raise ValueError(f"{name} is {value}: it does not fit its {kind} type; "
                         f"allowed: {allowed or f'{low} to {high - 1}'}")
    return value


class DataType(enum.IntEnum):
    """Element type of a tensor (ffpaDataType_t)."""
    FLOAT16 = 0
    BFLOAT16 = 1
    FLOAT32 = 2

    @property
    def itemsize(self):
        """Bytes per element."""
        return 4 if self is DataType.FLOAT32 else 2


class CausalMode(enum.IntEnum):
    """Which keys a query may attend to (ffpaCausalMode_t); query ``i`` sees key ``j``:
    NONE always, TOP_LEFT when ``j <= i`` (PyTorch's ``is_causal``), BOTTOM_RIGHT when
    ``j <= i + Nkv - Nq`` (FlashAttention 2)."""
    NONE = 0
    TOP_LEFT = 1
    BOTTOM_RIGHT = 2


class LogLevel(enum.IntEnum):
    """Severity of log messages; also the value type of the LOG_LEVEL knob."""
    OFF = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    DEBUG = 4


class PolicyType(enum.IntEnum):
    """The value type of a knob (ffpaPolicyType_t)."""
    BOOL = 0
    INT32 = 1
    INT64 = 2
    ENUM = 3
    STRING = 4


class PolicySource(enum.IntEnum):
    """Where the current value of a knob comes from, in increasing precedence."""
    DEFAULT = 0
    ENVIRONMENT = 1
    SETTER = 2


class Accumulator(enum.IntEnum):
    """Accumulator precision of the two matrix products (the ACCUMULATOR knob)."""
    F32 = 0
    QK_F16 = 1
    PV_F16 = 2
    F16 = 3


class AutotuneMode(enum.IntEnum):
    """Search space of runtime autotuning (the AUTOTUNE_MODE knob)."""
    FAST = 0
    MAX = 1


class Knob(enum.IntEnum):
    """The runtime knobs of a handle (ffpaPolicyKnob_t). Knobs are also accepted by name, as the
    library spells them (``"FFPA_POLICY_STAGES"``) or without the prefix (``"stages"``)."""
    ACCUMULATOR = 0
    PREFETCH_QKV = 1
    QKV_SMEM_SHARE = 2
    SMEM_SWIZZLE_Q = 3
    SMEM_SWIZZLE_K = 4
    SMEM_SWIZZLE_V = 5
    PERSIST_Q_G2S = 6
    PERSIST_KV_G2S = 7
    PERSIST_Q_S2R = 8
    PERSIST_V_S2R = 9
    REGISTERS_PIPE_KV = 10
    LAUNCH_GRID_DNHB = 11
    STAGES = 12
    HOPPER_KERNELS = 13
    EXP2_EMULATION = 14
    HOPPER_KV_MULTICAST = 15
    QUERY_HEADS_AS_ROWS = 16
    KEY_SPLITS = 17
    AUTOTUNE = 100
    AUTOTUNE_MODE = 101
    TUNED_CONFIG_DIR = 102
    SKIP_PERSISTENT_TUNED_CONFIG = 103
    DETERMINISTIC = 200
    SANITY_CHECK = 201
    REFERENCE_BACKEND = 202
    REFERENCE_CHUNK_BYTES = 203
    PLAN_CACHE_CAPACITY = 300
    LOG_LEVEL = 301


# Attributes of an attention descriptor (ffpaAttentionAttribute_t).
ATTENTION_SOFTMAX_SCALE = 0
ATTENTION_CAUSAL_MODE = 1
ATTENTION_KEY_LENGTHS = 2

MAX_HEAD_DIM = 1024
MAX_TENSOR_DIMS = 4
MAX_MERGE_PARTIALS = 32


class SliceMask(enum.IntEnum):
    """The mask of one attention slice (ffpaSliceMask_t); with ``nq``/``nk`` the slice's query
    and key counts, relative query ``i`` sees relative key ``j``: FULL always, CAUSAL when
    ``j <= i + nk - nq`` (bottom-right), INVERSE_CAUSAL when ``j >= i`` (top-left), BICAUSAL
    when both hold."""
    FULL = 0
    CAUSAL = 1
    INVERSE_CAUSAL = 2
    BICAUSAL = 3


MAX_SLICES = 1 << 24


class Sharding(enum.IntEnum):
    """How context parallelism shards a sequence over ``P`` ranks, ``n`` tokens each
    (ffpaSharding_t): CONTIGUOUS gives rank ``r`` tokens ``[r*n, (r+1)*n)``; ZIGZAG cuts the
    sequence into ``2P`` chunks of ``n/2`` tokens and gives rank ``r`` chunks ``r`` and
    ``2P-1-r`` (``n`` even), so that every rank computes the same share of a causal mask."""
    CONTIGUOUS = 0
    ZIGZAG = 1


class DeviceDescStruct(ctypes.Structure):
    """ffpaDeviceDesc_t."""
    _fields_ = [
        ("structSize", ctypes.c_uint32),
        ("ordinal", ctypes.c_int32),
        ("smVersion", ctypes.c_int32),
        ("smCount", ctypes.c_int32),
        ("sharedMemPerBlockOptin", ctypes.c_int64),
        ("sharedMemPerSm", ctypes.c_int64),
        ("globalMemBytes", ctypes.c_int64),
        ("name", ctypes.c_char * 256),
    ]


class PolicyInfoStruct(ctypes.Structure):
    """ffpaPolicyInfo_t."""
    _fields_ = [
        ("structSize", ctypes.c_uint32),
        ("type", ctypes.c_int32),
        ("minValue", ctypes.c_int64),
        ("maxValue", ctypes.c_int64),
        ("defaultValue", ctypes.c_int64),
        ("name", ctypes.c_char_p),
        ("environment", ctypes.c_char_p),
        ("valueNames", ctypes.c_char_p),
        ("defaultString", ctypes.c_char_p),
        ("description", ctypes.c_char_p),
    ]


class PlanCacheStatsStruct(ctypes.Structure):
    """ffpaPlanCacheStats_t."""
    _fields_ = [
        ("structSize", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("hits", ctypes.c_uint64),
        ("misses", ctypes.c_uint64),
        ("evictions", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("capacity", ctypes.c_uint64),
    ]


#: ffpaLogCallback_t: (level, message, user data).
LogCallback = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p)
