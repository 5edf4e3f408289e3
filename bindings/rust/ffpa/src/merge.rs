//! Merging partial attention results, and attention sinks.

use std::os::raw::c_void;
use std::ptr;

use crate::device_ptr::{DevicePtr, DevicePtrMut};
use crate::error::{check, Result};
use crate::handle::Handle;
use crate::sys;
use crate::tensor::TensorDesc;

/// The most partial results one [`Handle::merge`] combines (`FFPA_MAX_MERGE_PARTIALS`).
pub const MAX_MERGE_PARTIALS: usize = sys::FFPA_MAX_MERGE_PARTIALS as usize;

/// The layouts of a merge: every partial output `[B, H, N, D]` (fp16, bf16 or fp32) and every
/// partial log-sum-exp `[B, H, N]` (fp32) share one descriptor each; the merged output has the
/// partials' shape, any of the three types, and its log-sum-exp is optional.
#[derive(Clone, Copy, Debug)]
pub struct MergeTensors<'a> {
    /// The layout of each partial output.
    pub partial_o: &'a TensorDesc,
    /// The layout of each partial log-sum-exp.
    pub partial_lse: &'a TensorDesc,
    /// The merged output.
    pub o: &'a TensorDesc,
    /// The merged log-sum-exp, or `None` when not wanted.
    pub lse: Option<&'a TensorDesc>,
}

impl Handle {
    /// Combines partial results over disjoint key sets (`ffpaAttentionMerge`):
    /// `LSE = log(sum_i exp(LSE_i))`, `O = sum_i exp(LSE_i - LSE) * O_i`, in fp32. Parts whose
    /// log-sum-exp is -inf are not read. `o` may be one of `partial_o` (and `lse` one of
    /// `partial_lse`) when its descriptor has the partials' type and strides: an update in place.
    ///
    /// `partial_o` and `partial_lse` hold one address per part, at most
    /// [`MAX_MERGE_PARTIALS`]; lists of different lengths are refused (the missing addresses
    /// count as null). Only enqueues work on the handle's stream.
    ///
    /// # Safety
    /// As [`forward`](Handle::forward): every address is device memory holding the tensor its
    /// descriptor describes, kept alive and untouched by other work until the enqueued work has
    /// finished, on a live stream.
    pub unsafe fn merge(
        &self,
        t: &MergeTensors<'_>,
        partial_o: &[DevicePtr],
        partial_lse: &[DevicePtr],
        o: DevicePtrMut,
        lse: Option<DevicePtrMut>,
    ) -> Result<()> {
        // Fixed arrays: the call allocates nothing. A count above the maximum is refused by the
        // library before it reads any address.
        let mut o_ptrs: [*const c_void; MAX_MERGE_PARTIALS] = [ptr::null(); MAX_MERGE_PARTIALS];
        let mut lse_ptrs: [*const f32; MAX_MERGE_PARTIALS] = [ptr::null(); MAX_MERGE_PARTIALS];
        for (slot, p) in o_ptrs.iter_mut().zip(partial_o) {
            *slot = p.as_ptr();
        }
        for (slot, p) in lse_ptrs.iter_mut().zip(partial_lse) {
            *slot = p.as_ptr().cast::<f32>();
        }
        let count = partial_o.len().max(partial_lse.len()).min(i32::MAX as usize) as i32;
        check(sys::ffpaAttentionMerge(
            self.as_raw(),
            count,
            t.partial_o.as_raw(),
            o_ptrs.as_ptr(),
            t.partial_lse.as_raw(),
            lse_ptrs.as_ptr(),
            t.o.as_raw(),
            o.as_ptr(),
            t.lse.map_or(ptr::null_mut(), TensorDesc::as_raw),
            lse.map_or(ptr::null_mut(), |p| p.as_ptr().cast::<f32>()),
        ))
    }

    /// Folds attention sinks into a forward result in place (`ffpaAttentionApplySinks`): one fp32
    /// logit per head (`sinks`, `H` values) joins every softmax denominator of its head, so
    /// `LSE' = log(exp(LSE) + exp(s_h))` and `O' = exp(LSE - LSE') * O`. Pass `O'` and `LSE'` to
    /// [`backward`](Handle::backward); [`sinks_backward`](Handle::sinks_backward) gives the
    /// sinks' gradient.
    ///
    /// # Safety
    /// As [`merge`](Handle::merge).
    pub unsafe fn apply_sinks(
        &self,
        sinks: DevicePtr,
        o_desc: &TensorDesc,
        o: DevicePtrMut,
        lse_desc: &TensorDesc,
        lse: DevicePtrMut,
    ) -> Result<()> {
        check(sys::ffpaAttentionApplySinks(
            self.as_raw(),
            sinks.as_ptr().cast::<f32>(),
            o_desc.as_raw(),
            o.as_ptr(),
            lse_desc.as_raw(),
            lse.as_ptr().cast::<f32>(),
        ))
    }

    /// The gradient of the sinks (`ffpaAttentionSinksBackward`):
    /// `d_sinks[h] = -sum exp(s_h - LSE') * rowsum(O' * dO)` over the head's rows, written (not
    /// accumulated), the same bits on every run.
    ///
    /// # Safety
    /// As [`merge`](Handle::merge).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn sinks_backward(
        &self,
        sinks: DevicePtr,
        o_desc: &TensorDesc,
        o: DevicePtr,
        d_o_desc: &TensorDesc,
        d_o: DevicePtr,
        lse_desc: &TensorDesc,
        lse: DevicePtr,
        d_sinks: DevicePtrMut,
    ) -> Result<()> {
        check(sys::ffpaAttentionSinksBackward(
            self.as_raw(),
            sinks.as_ptr().cast::<f32>(),
            o_desc.as_raw(),
            o.as_ptr(),
            d_o_desc.as_raw(),
            d_o.as_ptr(),
            lse_desc.as_raw(),
            lse.as_ptr().cast::<f32>(),
            d_sinks.as_ptr().cast::<f32>(),
        ))
    }
}
