//! Safe Rust interface to libffpa: scaled dot-product attention, forward and backward, for head
//! dimensions up to 1024 on NVIDIA GPUs of compute capability 8.0 and newer.
//!
//! The flow follows the C interface (`ffpa/ffpa.h`):
//!
//! 1. create a [`Handle`] (bound to the current CUDA device) and give it a stream with
//!    [`Handle::set_stream`];
//! 2. optionally tune it with [`Handle::set_policy`] (every knob also has an environment
//!    variable, read when the handle is created);
//! 3. describe the tensors ([`TensorDesc`]) and the attention ([`AttentionDesc`]);
//! 4. ask for the workspace size ([`Handle::forward_workspace_size`]) and allocate it once;
//! 5. run [`Handle::forward`] / [`Handle::backward`] as often as needed.
//!
//! This crate allocates no GPU memory: the execute calls take device addresses
//! ([`DevicePtr`], [`DevicePtrMut`]) from wherever the caller allocates (a CUDA crate, another
//! library), and are `unsafe` because the library cannot check that memory.
//!
//! Every fallible call returns [`Result`]; an [`Error`] carries the [`Status`] and the library's
//! message, which names the faulty argument and the allowed values.
//!
//! A sequence too long for one GPU can be sharded over the ranks of an NCCL communicator: a
//! [`ContextParallel`] attached with [`AttentionDesc::set_context_parallel`] makes the same
//! forward and backward, on each rank's local shards, compute attention over the whole sequence.
//!
//! A handle made with [`Handle::for_device`] plans for a described device without one being
//! present: workspace sizes, plan descriptions and policies all work on a machine without a GPU.
//!
//! ```no_run
//! use ffpa::{AttentionDesc, CausalMode, DataType, ForwardTensors, Handle, TensorDesc};
//!
//! # fn main() -> ffpa::Result<()> {
//! let handle = Handle::new()?;
//! let q = TensorDesc::bhnd(DataType::Float16, 1, 8, 4096, 512)?;
//! let kv = TensorDesc::bhnd(DataType::Float16, 1, 8, 4096, 512)?;
//! let o = TensorDesc::bhnd(DataType::Float16, 1, 8, 4096, 512)?;
//! let attn = AttentionDesc::new()?.with_causal(CausalMode::BottomRight)?;
//! let tensors = ForwardTensors { q: &q, k: &kv, v: &kv, o: &o, lse: None };
//! println!("workspace: {} bytes", handle.forward_workspace_size(&attn, &tensors)?);
//! println!("{}", handle.describe_forward_plan(&attn, &tensors)?);
//! # Ok(())
//! # }
//! ```
//!
//! The crate links libffpa through the `ffpa-sys` crate, which finds it with pkg-config
//! (`PKG_CONFIG_PATH`).

#![deny(missing_docs)]

mod attention;
mod context_parallel;
mod device;
mod device_ptr;
mod error;
mod execute;
mod handle;
mod merge;
mod policy;
mod slices;
mod tensor;
mod text;
mod types;
mod version;

/// The raw C declarations, for what this crate does not wrap.
pub use ffpa_sys as sys;

pub use attention::AttentionDesc;
pub use context_parallel::{ContextParallel, ContextParallelInfo};
pub use device::DeviceDesc;
pub use device_ptr::{DevicePtr, DevicePtrMut};
pub use error::{Error, Result, Status};
pub use execute::{BackwardBuffers, BackwardTensors, ForwardBuffers, ForwardTensors};
pub use handle::{Handle, PlanCacheStats};
pub use merge::{MergeTensors, MAX_MERGE_PARTIALS};
pub use policy::{policy_info, policy_knobs, PolicyInfo, PolicyKnob, PolicyValue};
pub use slices::{AttentionSlices, Slice, SlicesInfo, MAX_SLICES};
pub use tensor::TensorDesc;
pub use types::{
    Accumulator, AutotuneMode, CausalMode, DataType, LogLevel, PolicySource, PolicyType, Sharding,
    SliceMask,
};
pub use version::{build_info, is_compatible, version, Version};
