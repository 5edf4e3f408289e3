//! The small enumerations of the interface.
//!
//! They are Rust enums for values given to the library. A value read back that these bindings
//! do not know (from a newer library) becomes an error instead of undefined behaviour.

use crate::error::{Error, Result, Status};
use crate::sys;

/// Declares a fieldless enum with its C newtype and both conversions.
macro_rules! c_enum {
    (
        $(#[$meta:meta])* $name:ident: $c_type:ident {
            $($(#[$doc:meta])* $variant:ident = $c_name:ident,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$doc])* $variant,)*
        }

        impl $name {
            #[allow(dead_code)]
            pub(crate) fn to_c(self) -> sys::$c_type {
                match self {
                    $($name::$variant => sys::$c_type::$c_name,)*
                }
            }

            #[allow(dead_code)]
            pub(crate) fn from_c(value: sys::$c_type) -> Result<$name> {
                $(if value == sys::$c_type::$c_name {
                    return Ok($name::$variant);
                })*
                Err(unknown_value(stringify!($c_type), value.0))
            }
        }
    };
}

/// The error for a value a newer library returned that these bindings cannot name.
pub(crate) fn unknown_value(c_type: &str, value: u32) -> Error {
    Error::new(
        Status::NOT_SUPPORTED,
        format!(
            "{c_type}: the library returned {value}, which these bindings (older than the \
             library) do not know"
        ),
    )
}

c_enum! {
    /// Element type of a tensor (`ffpaDataType_t`).
    DataType: ffpaDataType {
        /// IEEE half precision.
        Float16 = FFPA_DATA_TYPE_FLOAT16,
        /// bfloat16.
        BFloat16 = FFPA_DATA_TYPE_BFLOAT16,
        /// IEEE single precision: the log-sum-exp tensor, and Q/K/V/O on the reference path only.
        Float32 = FFPA_DATA_TYPE_FLOAT32,
    }
}

impl DataType {
    /// Bytes of one element.
    pub const fn size_bytes(self) -> usize {
        match self {
            DataType::Float16 | DataType::BFloat16 => 2,
            DataType::Float32 => 4,
        }
    }
}

c_enum! {
    /// Which keys a query may attend to (`ffpaCausalMode_t`). With `Nq` queries and `Nkv` keys,
    /// query `i` sees key `j`:
    CausalMode: ffpaCausalMode {
        /// always (no mask; the default).
        None = FFPA_CAUSAL_NONE,
        /// when `j <= i`: the diagonal starts at the top-left corner (PyTorch's `is_causal`).
        TopLeft = FFPA_CAUSAL_TOP_LEFT,
        /// when `j <= i + Nkv - Nq`: the diagonal ends at the bottom-right corner (FlashAttention
        /// 2). With `Nq > Nkv` the first `Nq - Nkv` queries see no key: output 0, log-sum-exp -inf.
        BottomRight = FFPA_CAUSAL_BOTTOM_RIGHT,
    }
}

c_enum! {
    /// How the keys of one attention slice are masked (`ffpaSliceMask_t`). With the slice's `nq`
    /// queries and `nk` keys, relative query `i` sees relative key `j`:
    SliceMask: ffpaSliceMask {
        /// always.
        Full = FFPA_SLICE_MASK_FULL,
        /// when `j <= i + nk - nq`: causal, the diagonal ending at the bottom-right corner.
        Causal = FFPA_SLICE_MASK_CAUSAL,
        /// when `j >= i`: the diagonal starting at the top-left corner.
        InverseCausal = FFPA_SLICE_MASK_INVERSE_CAUSAL,
        /// when both hold: a band (the diagonal alone when `nq = nk`).
        Bicausal = FFPA_SLICE_MASK_BICAUSAL,
    }
}

c_enum! {
    /// How a sequence is sharded over the ranks of a [`ContextParallel`](crate::ContextParallel)
    /// ring (`ffpaSharding_t`), with `n` tokens per rank and `P` ranks.
    Sharding: ffpaSharding_t {
        /// Rank `r` holds tokens `[r * n, (r + 1) * n)`. Under a causal mask the last rank
        /// computes `P` times as much as the first.
        Contiguous = FFPA_SHARDING_CONTIGUOUS,
        /// The sequence is cut into `2P` chunks of `n / 2` tokens; rank `r` holds chunk `r` then
        /// chunk `2P - 1 - r` (`n` even), so every rank computes the same share of a causal mask.
        Zigzag = FFPA_SHARDING_ZIGZAG,
    }
}

c_enum! {
    /// Accumulator precision of the two matrix products, the value of
    /// [`PolicyKnob::ACCUMULATOR`](crate::PolicyKnob::ACCUMULATOR).
    Accumulator: ffpaAccumulator {
        /// Both products accumulate in fp32 (the default; required for bf16).
        F32 = FFPA_ACCUMULATOR_F32,
        /// Q·Kᵀ in fp16, P·V in fp32; fp16 inputs only.
        QkF16 = FFPA_ACCUMULATOR_QK_F16,
        /// Q·Kᵀ in fp32, P·V in fp16; fp16 inputs only.
        PvF16 = FFPA_ACCUMULATOR_PV_F16,
        /// Both in fp16: fastest on consumer GPUs, least accurate; fp16 inputs only.
        F16 = FFPA_ACCUMULATOR_F16,
    }
}

c_enum! {
    /// Search space of runtime autotuning, the value of
    /// [`PolicyKnob::AUTOTUNE_MODE`](crate::PolicyKnob::AUTOTUNE_MODE).
    AutotuneMode: ffpaAutotuneMode {
        /// A small search space (the default).
        Fast = FFPA_AUTOTUNE_MODE_FAST,
        /// A larger search space: slower to tune, possibly faster to run.
        Max = FFPA_AUTOTUNE_MODE_MAX,
    }
}

c_enum! {
    /// Severity of log messages, the value of
    /// [`PolicyKnob::LOG_LEVEL`](crate::PolicyKnob::LOG_LEVEL).
    LogLevel: ffpaLogLevel {
        /// Nothing is logged.
        Off = FFPA_LOG_LEVEL_OFF,
        /// GPU work that failed, internal errors.
        Error = FFPA_LOG_LEVEL_ERROR,
        /// Suspicious but valid use (the default).
        Warning = FFPA_LOG_LEVEL_WARNING,
        /// Plans chosen; calls refused, with their status and message.
        Info = FFPA_LOG_LEVEL_INFO,
        /// Why each kernel was or was not chosen.
        Debug = FFPA_LOG_LEVEL_DEBUG,
    }
}

c_enum! {
    /// The value type of a policy knob (`ffpaPolicyType_t`).
    PolicyType: ffpaPolicyType {
        /// 0 or 1, given as [`PolicyValue::Bool`](crate::PolicyValue::Bool).
        Bool = FFPA_POLICY_TYPE_BOOL,
        /// A 32-bit integer within the knob's bounds.
        Int32 = FFPA_POLICY_TYPE_INT32,
        /// A 64-bit integer within the knob's bounds.
        Int64 = FFPA_POLICY_TYPE_INT64,
        /// One of the knob's enumerators, as a 32-bit integer.
        Enum = FFPA_POLICY_TYPE_ENUM,
        /// A string of at most 4095 bytes without NUL.
        String = FFPA_POLICY_TYPE_STRING,
    }
}

c_enum! {
    /// Where the current value of a knob comes from (`ffpaPolicySource_t`).
    PolicySource: ffpaPolicySource {
        /// The built-in default.
        Default = FFPA_POLICY_SOURCE_DEFAULT,
        /// An environment variable read when the handle was created.
        Environment = FFPA_POLICY_SOURCE_ENVIRONMENT,
        /// A call of [`Handle::set_policy`](crate::Handle::set_policy) on this handle.
        Setter = FFPA_POLICY_SOURCE_SETTER,
    }
}
