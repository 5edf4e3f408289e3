//! Workspace queries, plan descriptions and the execute calls.

use std::ptr;

use crate::attention::AttentionDesc;
use crate::device_ptr::{DevicePtr, DevicePtrMut};
use crate::error::{check, Result};
use crate::handle::Handle;
use crate::sys;
use crate::tensor::TensorDesc;
use crate::text::read_c_string;

/// The tensors of a forward problem: Q `[B, Hq, Nq, Dqk]`, K `[B, Hkv, Nkv, Dqk]`,
/// V `[B, Hkv, Nkv, Dv]`, O `[B, Hq, Nq, Dv]` and, when wanted, the fp32 log-sum-exp `[B, Hq, Nq]`.
#[derive(Clone, Copy, Debug)]
pub struct ForwardTensors<'a> {
    /// Queries.
    pub q: &'a TensorDesc,
    /// Keys.
    pub k: &'a TensorDesc,
    /// Values.
    pub v: &'a TensorDesc,
    /// Output.
    pub o: &'a TensorDesc,
    /// Log-sum-exp output, or `None` (then [`ForwardBuffers::lse`] is `None` too).
    pub lse: Option<&'a TensorDesc>,
}

/// The device memory of a forward call, one address per tensor of [`ForwardTensors`].
#[derive(Clone, Copy, Debug)]
pub struct ForwardBuffers {
    /// Queries.
    pub q: DevicePtr,
    /// Keys.
    pub k: DevicePtr,
    /// Values.
    pub v: DevicePtr,
    /// Output.
    pub o: DevicePtrMut,
    /// Log-sum-exp (fp32), exactly when [`ForwardTensors::lse`] is given.
    pub lse: Option<DevicePtrMut>,
    /// Scratch of at least [`Handle::forward_workspace_size`] bytes, 256-byte aligned; null
    /// when that size is 0.
    pub workspace: DevicePtrMut,
    /// Size of `workspace` in bytes.
    pub workspace_bytes: usize,
}

/// The tensors of a backward problem: the forward's Q, K, V, O and log-sum-exp (required), the
/// output gradient dO, and the gradients dQ, dK, dV to compute (each shaped as its tensor).
#[derive(Clone, Copy, Debug)]
pub struct BackwardTensors<'a> {
    /// Queries.
    pub q: &'a TensorDesc,
    /// Keys.
    pub k: &'a TensorDesc,
    /// Values.
    pub v: &'a TensorDesc,
    /// The forward's output.
    pub o: &'a TensorDesc,
    /// Gradient of the output.
    pub d_o: &'a TensorDesc,
    /// The forward's log-sum-exp.
    pub lse: &'a TensorDesc,
    /// Gradient of Q.
    pub dq: &'a TensorDesc,
    /// Gradient of K.
    pub dk: &'a TensorDesc,
    /// Gradient of V.
    pub dv: &'a TensorDesc,
}

/// The device memory of a backward call, one address per tensor of [`BackwardTensors`].
#[derive(Clone, Copy, Debug)]
pub struct BackwardBuffers {
    /// Queries.
    pub q: DevicePtr,
    /// Keys.
    pub k: DevicePtr,
    /// Values.
    pub v: DevicePtr,
    /// The forward's output.
    pub o: DevicePtr,
    /// Gradient of the output.
    pub d_o: DevicePtr,
    /// The forward's log-sum-exp (fp32).
    pub lse: DevicePtr,
    /// Receives the gradient of Q.
    pub dq: DevicePtrMut,
    /// Receives the gradient of K.
    pub dk: DevicePtrMut,
    /// Receives the gradient of V.
    pub dv: DevicePtrMut,
    /// Scratch of at least [`Handle::backward_workspace_size`] bytes, 256-byte aligned; null
    /// when that size is 0.
    pub workspace: DevicePtrMut,
    /// Size of `workspace` in bytes.
    pub workspace_bytes: usize,
}

impl ForwardTensors<'_> {
    /// The C descriptors in the order of the C calls; the log-sum-exp is null when absent.
    fn raw(&self) -> [sys::ffpaTensorDescriptor_t; 5] {
        let lse = self.lse.map_or(ptr::null_mut(), TensorDesc::as_raw);
        [self.q.as_raw(), self.k.as_raw(), self.v.as_raw(), self.o.as_raw(), lse]
    }
}

impl BackwardTensors<'_> {
    /// The C descriptors in the order of the C calls.
    fn raw(&self) -> [sys::ffpaTensorDescriptor_t; 9] {
        [self.q, self.k, self.v, self.o, self.d_o, self.lse, self.dq, self.dk, self.dv]
            .map(TensorDesc::as_raw)
    }
}

impl Handle {
    /// Bytes of workspace [`forward`](Handle::forward) needs for this problem
    /// (`ffpaGetAttentionForwardWorkspaceSize`). Plans the problem and caches the plan, which
    /// takes planning off the execute path.
    pub fn forward_workspace_size(
        &self,
        attn: &AttentionDesc,
        t: &ForwardTensors<'_>,
    ) -> Result<usize> {
        let [q, k, v, o, lse] = t.raw();
        let mut bytes = 0usize;
        // SAFETY: every descriptor is live (borrowed) and `bytes` is a valid place.
        check(unsafe {
            sys::ffpaGetAttentionForwardWorkspaceSize(
                self.as_raw(),
                attn.as_raw(),
                q,
                k,
                v,
                o,
                lse,
                &mut bytes,
            )
        })?;
        Ok(bytes)
    }

    /// Explains the plan of a forward problem (`ffpaDescribeAttentionForwardPlan`): one
    /// `name: value` line each for `kernel`, `config`, `workspace`, and a `skipped` line per
    /// kernel passed over, with the reason. Plans and caches like the workspace query.
    pub fn describe_forward_plan(
        &self,
        attn: &AttentionDesc,
        t: &ForwardTensors<'_>,
    ) -> Result<String> {
        let [q, k, v, o, lse] = t.raw();
        read_c_string(|buffer, size| {
            let mut length = 0usize;
            // SAFETY: the descriptors are live; `buffer` holds `size` bytes.
            check(unsafe {
                sys::ffpaDescribeAttentionForwardPlan(
                    self.as_raw(),
                    attn.as_raw(),
                    q,
                    k,
                    v,
                    o,
                    lse,
                    buffer,
                    size,
                    &mut length,
                )
            })?;
            Ok(length)
        })
    }

    /// Attention forward (`ffpaAttentionForward`): `O = softmax(scale * Q·Kᵀ + mask) · V` and,
    /// when asked, `LSE = log(sum(exp(scale * Q·Kᵀ + mask)))` per query row.
    ///
    /// Only enqueues work on the handle's stream: it returns before the GPU runs it, never
    /// allocates device memory and never synchronizes (so it can be captured in a CUDA graph).
    /// A call that fails has enqueued nothing, except with an
    /// [`EXECUTION_FAILED`](crate::Status::EXECUTION_FAILED) status.
    ///
    /// # Safety
    /// The library checks descriptors, alignment and overlaps, but cannot check the memory
    /// itself. The caller guarantees that:
    /// - each address in `b` is device memory of the handle's device (or memory CUDA lets that
    ///   device access), holding the tensor its descriptor in `t` describes, up to the element
    ///   at the largest offset; the workspace holds `workspace_bytes` bytes;
    /// - that memory stays allocated, the inputs unchanged and the outputs untouched by other
    ///   work, until the work enqueued on the handle's stream has finished;
    /// - the handle's stream (see [`set_stream`](Handle::set_stream)) is still alive.
    pub unsafe fn forward(
        &self,
        attn: &AttentionDesc,
        t: &ForwardTensors<'_>,
        b: &ForwardBuffers,
    ) -> Result<()> {
        let [q, k, v, o, lse] = t.raw();
        let lse_ptr = b.lse.map_or(ptr::null_mut(), |p| p.as_ptr().cast::<f32>());
        check(sys::ffpaAttentionForward(
            self.as_raw(),
            attn.as_raw(),
            q,
            b.q.as_ptr(),
            k,
            b.k.as_ptr(),
            v,
            b.v.as_ptr(),
            o,
            b.o.as_ptr(),
            lse,
            lse_ptr,
            b.workspace.as_ptr(),
            b.workspace_bytes,
        ))
    }

    /// Bytes of workspace [`backward`](Handle::backward) needs for this problem
    /// (`ffpaGetAttentionBackwardWorkspaceSize`); plans and caches it.
    pub fn backward_workspace_size(
        &self,
        attn: &AttentionDesc,
        t: &BackwardTensors<'_>,
    ) -> Result<usize> {
        let [q, k, v, o, d_o, lse, dq, dk, dv] = t.raw();
        let mut bytes = 0usize;
        // SAFETY: every descriptor is live (borrowed) and `bytes` is a valid place.
        check(unsafe {
            sys::ffpaGetAttentionBackwardWorkspaceSize(
                self.as_raw(),
                attn.as_raw(),
                q,
                k,
                v,
                o,
                d_o,
                lse,
                dq,
                dk,
                dv,
                &mut bytes,
            )
        })?;
        Ok(bytes)
    }

    /// Explains the plan of a backward problem (`ffpaDescribeAttentionBackwardPlan`), as
    /// [`describe_forward_plan`](Handle::describe_forward_plan) does for the forward.
    pub fn describe_backward_plan(
        &self,
        attn: &AttentionDesc,
        t: &BackwardTensors<'_>,
    ) -> Result<String> {
        let [q, k, v, o, d_o, lse, dq, dk, dv] = t.raw();
        read_c_string(|buffer, size| {
            let mut length = 0usize;
            // SAFETY: the descriptors are live; `buffer` holds `size` bytes.
            check(unsafe {
                sys::ffpaDescribeAttentionBackwardPlan(
                    self.as_raw(),
                    attn.as_raw(),
                    q,
                    k,
                    v,
                    o,
                    d_o,
                    lse,
                    dq,
                    dk,
                    dv,
                    buffer,
                    size,
                    &mut length,
                )
            })?;
            Ok(length)
        })
    }

    /// Attention backward (`ffpaAttentionBackward`): dQ, dK and dV from the forward's tensors
    /// and dO. With grouped-query attention, dK and dV of a K/V head sum over its query heads.
    /// Gradients accumulate in fp32 and are written once.
    ///
    /// Enqueues like [`forward`](Handle::forward): returns before the GPU runs the work.
    ///
    /// # Safety
    /// The same contract as [`forward`](Handle::forward), for every address in `b` and its
    /// descriptor in `t`.
    pub unsafe fn backward(
        &self,
        attn: &AttentionDesc,
        t: &BackwardTensors<'_>,
        b: &BackwardBuffers,
    ) -> Result<()> {
        let [q, k, v, o, d_o, lse, dq, dk, dv] = t.raw();
        check(sys::ffpaAttentionBackward(
            self.as_raw(),
            attn.as_raw(),
            q,
            b.q.as_ptr(),
            k,
            b.k.as_ptr(),
            v,
            b.v.as_ptr(),
            o,
            b.o.as_ptr(),
            d_o,
            b.d_o.as_ptr(),
            lse,
            b.lse.as_ptr().cast::<f32>(),
            dq,
            b.dq.as_ptr(),
            dk,
            b.dk.as_ptr(),
            dv,
            b.dv.as_ptr(),
            b.workspace.as_ptr(),
            b.workspace_bytes,
        ))
    }
}
