//! Policy knobs: their identities, values and descriptions.

use std::mem::MaybeUninit;
use std::ptr;

use crate::error::{check, Result};
use crate::sys;
use crate::text::from_c;
use crate::types::{Accumulator, AutotuneMode, LogLevel, PolicyType};

/// A runtime knob of a handle (`ffpaPolicyKnob_t`).
///
/// A newtype rather than an enum: [`policy_knobs`] lists the knobs of the loaded library, which
/// may be newer than these bindings. Each knob's type, bounds, default and environment variables
/// are available at run time from [`policy_info`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyKnob(u32);

macro_rules! knobs {
    ($($(#[$doc:meta])* $name:ident = $c_name:ident,)*) => {
        impl PolicyKnob {
            $(
                $(#[$doc])*
                pub const $name: PolicyKnob = PolicyKnob(sys::ffpaPolicyKnob::$c_name.0);
            )*
        }
    };
}

knobs! {
    /// Enum [`Accumulator`], default `F32` (env `FFPA_ACCUMULATOR`, `ENABLE_FFPA_FORCE_QK_F16`,
    /// `ENABLE_FFPA_FORCE_PV_F16`).
    ACCUMULATOR = FFPA_POLICY_ACCUMULATOR,
    /// Bool, default true: prefetch the next Q/K/V chunks (env `ENABLE_FFPA_PREFETCH_QKV`).
    PREFETCH_QKV = FFPA_POLICY_PREFETCH_QKV,
    /// Bool, default false: Q, K and V share one shared-memory buffer
    /// (env `ENABLE_FFPA_QKV_SMEM_SHARE`).
    QKV_SMEM_SHARE = FFPA_POLICY_QKV_SMEM_SHARE,
    /// Bool, default true: swizzle (true) or pad (false) Q tiles
    /// (env `ENABLE_FFPA_SMEM_SWIZZLE_Q`).
    SMEM_SWIZZLE_Q = FFPA_POLICY_SMEM_SWIZZLE_Q,
    /// Bool, default true: as `SMEM_SWIZZLE_Q` for K (env `ENABLE_FFPA_SMEM_SWIZZLE_K`).
    SMEM_SWIZZLE_K = FFPA_POLICY_SMEM_SWIZZLE_K,
    /// Bool, default true: as `SMEM_SWIZZLE_Q` for V (env `ENABLE_FFPA_SMEM_SWIZZLE_V`).
    SMEM_SWIZZLE_V = FFPA_POLICY_SMEM_SWIZZLE_V,
    /// Bool, default true: keep the whole Q tile in shared memory
    /// (env `ENABLE_FFPA_PERSIST_Q_G2S`).
    PERSIST_Q_G2S = FFPA_POLICY_PERSIST_Q_G2S,
    /// Bool, default true: keep K/V tiles in shared memory for head dims <= 256
    /// (env `ENABLE_FFPA_PERSIST_KV_G2S`).
    PERSIST_KV_G2S = FFPA_POLICY_PERSIST_KV_G2S,
    /// Bool, default false: keep Q fragments in registers (env `ENABLE_FFPA_PERSIST_Q_S2R`).
    PERSIST_Q_S2R = FFPA_POLICY_PERSIST_Q_S2R,
    /// Bool, default true: keep V fragments in registers (env `ENABLE_FFPA_PERSIST_V_S2R`).
    PERSIST_V_S2R = FFPA_POLICY_PERSIST_V_S2R,
    /// Bool, default false: double-buffer K/V fragments in registers
    /// (env `ENABLE_FFPA_REGISTERS_PIPE_KV`).
    REGISTERS_PIPE_KV = FFPA_POLICY_REGISTERS_PIPE_KV,
    /// Bool, default false: launch grid `(N/Br, H, B)` instead of `(N/Br, B*H)`
    /// (env `ENABLE_FFPA_LAUNCH_GRID_DNHB`).
    LAUNCH_GRID_DNHB = FFPA_POLICY_LAUNCH_GRID_DNHB,
    /// Int32 0-4, default 0 (the planner chooses): cp.async pipeline stages (env `FFPA_STAGES`).
    STAGES = FFPA_POLICY_STAGES,
    /// Bool, default true: on compute capability 9.0, run the Hopper (TMA + wgmma) forward and
    /// gradient kernels where they apply; false keeps the mma.sync kernels (env
    /// `ENABLE_FFPA_HOPPER_KERNELS`).
    HOPPER_KERNELS = FFPA_POLICY_HOPPER_KERNELS,
    /// Int32 0-8, default 0: of every 8 softmax exponentials of the Hopper forward, how many an
    /// FMA polynomial computes (env `FFPA_EXP2_EMULATION`).
    EXP2_EMULATION = FFPA_POLICY_EXP2_EMULATION,
    /// Bool, default false: in the Hopper forward (d_v <= 512, no slices), CTAs of two adjacent row
    /// tiles share each K and V tile through TMA multicast (env `FFPA_HOPPER_KV_MULTICAST`).
    HOPPER_KV_MULTICAST = FFPA_POLICY_HOPPER_KV_MULTICAST,
    /// Bool, default true: a forward with fewer than 128 query rows per head whose query heads
    /// share K and V runs the heads of a group as rows of one problem per KV head (env
    /// `FFPA_QUERY_HEADS_AS_ROWS`).
    QUERY_HEADS_AS_ROWS = FFPA_POLICY_QUERY_HEADS_AS_ROWS,
    /// Int32 0-32, default 0 (the planner chooses): split-KV runs per row tile of the fast
    /// forward kernels where the grid leaves the GPU idle; 1 never splits (env `FFPA_KEY_SPLITS`).
    KEY_SPLITS = FFPA_POLICY_KEY_SPLITS,
    /// Bool, default false: tune launch configs at run time (env `FFPA_AUTOTUNE`).
    AUTOTUNE = FFPA_POLICY_AUTOTUNE,
    /// Enum [`AutotuneMode`], default `Fast` (env `FFPA_AUTOTUNE_MODE`).
    AUTOTUNE_MODE = FFPA_POLICY_AUTOTUNE_MODE,
    /// String, default "" (the installed directory): where tuned-config files are looked up
    /// (env `FFPA_TUNED_CONFIG_DIR`).
    TUNED_CONFIG_DIR = FFPA_POLICY_TUNED_CONFIG_DIR,
    /// Bool, default false: ignore persisted tuned configs
    /// (env `FFPA_SKIP_PERSIST_TUNED_CONFIG`).
    SKIP_PERSISTENT_TUNED_CONFIG = FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG,
    /// Bool, default false: bit-identical results across runs (env `FFPA_DETERMINISTIC_MODE`).
    DETERMINISTIC = FFPA_POLICY_DETERMINISTIC,
    /// Bool, default false: synchronize and scan inputs and outputs for NaN/infinity after each
    /// call (env `FFPA_SANITY_CHECK`).
    SANITY_CHECK = FFPA_POLICY_SANITY_CHECK,
    /// Bool, default false: run every call on the cuBLASLt reference path
    /// (env `FFPA_REFERENCE_BACKEND`).
    REFERENCE_BACKEND = FFPA_POLICY_REFERENCE_BACKEND,
    /// Int64, default 512 MiB: the largest scratch of one reference-path chunk
    /// (env `FFPA_REFERENCE_CHUNK_BYTES`).
    REFERENCE_CHUNK_BYTES = FFPA_POLICY_REFERENCE_CHUNK_BYTES,
    /// Int32 0-1048576, default 1024: plans the handle's cache keeps; 0 disables it
    /// (env `FFPA_PLAN_CACHE_CAPACITY`).
    PLAN_CACHE_CAPACITY = FFPA_POLICY_PLAN_CACHE_CAPACITY,
    /// Enum [`LogLevel`], default `Warning` (env `FFPA_LOGGER_LEVEL`).
    LOG_LEVEL = FFPA_POLICY_LOG_LEVEL,
}

impl PolicyKnob {
    /// The knob with this C value, known to these bindings or not.
    pub const fn from_raw(raw: u32) -> PolicyKnob {
        PolicyKnob(raw)
    }

    /// The C value of this knob.
    pub const fn raw(self) -> u32 {
        self.0
    }

    pub(crate) fn to_c(self) -> sys::ffpaPolicyKnob_t {
        sys::ffpaPolicyKnob(self.0)
    }
}

/// A value of a policy knob; the variant must match the knob's [`PolicyType`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyValue {
    /// For [`PolicyType::Bool`] knobs.
    Bool(bool),
    /// For [`PolicyType::Int32`] knobs.
    Int32(i32),
    /// For [`PolicyType::Int64`] knobs.
    Int64(i64),
    /// For [`PolicyType::Enum`] knobs: the enumerator's C value (see the `From` conversions of
    /// [`Accumulator`], [`AutotuneMode`] and [`LogLevel`]).
    Enum(i32),
    /// For [`PolicyType::String`] knobs: at most 4095 bytes, no NUL.
    String(String),
}

impl PolicyValue {
    /// The knob type this value is for.
    pub fn value_type(&self) -> PolicyType {
        match self {
            PolicyValue::Bool(_) => PolicyType::Bool,
            PolicyValue::Int32(_) => PolicyType::Int32,
            PolicyValue::Int64(_) => PolicyType::Int64,
            PolicyValue::Enum(_) => PolicyType::Enum,
            PolicyValue::String(_) => PolicyType::String,
        }
    }
}

impl From<bool> for PolicyValue {
    fn from(value: bool) -> PolicyValue {
        PolicyValue::Bool(value)
    }
}

impl From<i32> for PolicyValue {
    fn from(value: i32) -> PolicyValue {
        PolicyValue::Int32(value)
    }
}

impl From<i64> for PolicyValue {
    fn from(value: i64) -> PolicyValue {
        PolicyValue::Int64(value)
    }
}

impl From<&str> for PolicyValue {
    fn from(value: &str) -> PolicyValue {
        PolicyValue::String(value.to_owned())
    }
}

impl From<String> for PolicyValue {
    fn from(value: String) -> PolicyValue {
        PolicyValue::String(value)
    }
}

impl From<Accumulator> for PolicyValue {
    fn from(value: Accumulator) -> PolicyValue {
        PolicyValue::Enum(value.to_c().0 as i32)
    }
}

impl From<AutotuneMode> for PolicyValue {
    fn from(value: AutotuneMode) -> PolicyValue {
        PolicyValue::Enum(value.to_c().0 as i32)
    }
}

impl From<LogLevel> for PolicyValue {
    fn from(value: LogLevel) -> PolicyValue {
        PolicyValue::Enum(value.to_c().0 as i32)
    }
}

/// Everything the library says about one knob (`ffpaPolicyInfo_t`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyInfo {
    /// The knob described.
    pub knob: PolicyKnob,
    /// Its value type.
    pub value_type: PolicyType,
    /// Smallest accepted value (numeric types; 0 for strings).
    pub min: i64,
    /// Largest accepted value (numeric types; the longest length for strings).
    pub max: i64,
    /// Value without setter or environment (numeric types).
    pub default: i64,
    /// The C enumerator's name, e.g. `"FFPA_POLICY_STAGES"`.
    pub name: String,
    /// Environment variables read when a handle is created, primary first.
    pub environment: Vec<String>,
    /// For enumerations and booleans: the names of the values from `min` up.
    pub value_names: Vec<String>,
    /// The default as text (for strings, the default string).
    pub default_string: String,
    /// One sentence.
    pub description: String,
}

/// Describes one knob: type, bounds, default, environment variables (`ffpaGetPolicyInfo`).
/// Needs no handle and no device.
pub fn policy_info(knob: PolicyKnob) -> Result<PolicyInfo> {
    let mut info = MaybeUninit::<sys::ffpaPolicyInfo_t>::zeroed();
    // SAFETY: structSize tells the library how much of `info` it may write; zeroed is valid.
    let info = unsafe {
        (*info.as_mut_ptr()).structSize = std::mem::size_of::<sys::ffpaPolicyInfo_t>() as u32;
        check(sys::ffpaGetPolicyInfo(knob.to_c(), info.as_mut_ptr()))?;
        info.assume_init()
    };
    let words = |text: String| text.split_whitespace().map(str::to_owned).collect();
    // SAFETY: the library's strings are static and NUL-terminated.
    unsafe {
        Ok(PolicyInfo {
            knob,
            value_type: PolicyType::from_c(info.type_)?,
            min: info.minValue,
            max: info.maxValue,
            default: info.defaultValue,
            name: from_c(info.name),
            environment: words(from_c(info.environment)),
            value_names: words(from_c(info.valueNames)),
            default_string: from_c(info.defaultString),
            description: from_c(info.description),
        })
    }
}

/// Every knob the loaded library knows, in the order of their values (`ffpaGetPolicyKnobs`).
pub fn policy_knobs() -> Result<Vec<PolicyKnob>> {
    let mut count = 0i32;
    // SAFETY: a capacity of 0 with a null array only asks for the count.
    check(unsafe { sys::ffpaGetPolicyKnobs(0, &mut count, ptr::null_mut()) })?;
    let mut knobs = vec![sys::ffpaPolicyKnob(0); count.max(0) as usize];
    // SAFETY: `knobs` holds `count` elements.
    check(unsafe { sys::ffpaGetPolicyKnobs(count, &mut count, knobs.as_mut_ptr()) })?;
    knobs.truncate(count.max(0) as usize);
    Ok(knobs.into_iter().map(|knob| PolicyKnob(knob.0)).collect())
}
