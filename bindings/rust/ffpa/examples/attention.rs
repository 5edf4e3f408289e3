//! Attention forward and backward through the `ffpa` crate: bf16, 8 heads of dimension 512.
//!
//! ```sh
//! PKG_CONFIG_PATH=<build>/meson-uninstalled cargo run --example attention
//! ```
//!
//! The crate allocates no GPU memory; this example borrows the CUDA runtime that libffpa loads
//! (a program would use its CUDA crate or framework). Without a usable GPU it prints the
//! library's message, shows the plan a described A100 would get, and exits 0.

// The tests' helpers: the CUDA runtime lookup, and the A100 they plan for.
#[path = "../tests/common/mod.rs"]
mod common;

use std::error::Error;

use ffpa::{
    AttentionDesc, BackwardBuffers, BackwardTensors, CausalMode, DataType, DevicePtrMut,
    ForwardBuffers, ForwardTensors, Handle, Status, TensorDesc,
};

const B: i64 = 1;
const H: i64 = 8;
const N: i64 = 1024;
const D: i64 = 512;

fn main() -> Result<(), Box<dyn Error>> {
    println!("{}", ffpa::build_info());
    if !ffpa::is_compatible() {
        return Err(format!(
            "the library is older than these bindings ({})",
            ffpa::Version::HEADER
        )
        .into());
    }

    let bhnd = || TensorDesc::bhnd(DataType::BFloat16, B, H, N, D);
    let (q, k, v, o) = (bhnd()?, bhnd()?, bhnd()?, bhnd()?);
    let (d_o, dq, dk, dv) = (bhnd()?, bhnd()?, bhnd()?, bhnd()?);
    let lse = TensorDesc::lse(B, H, N)?;
    let attn = AttentionDesc::new()?.with_causal(CausalMode::TopLeft)?;
    let forward = ForwardTensors { q: &q, k: &k, v: &v, o: &o, lse: Some(&lse) };
    let backward = BackwardTensors {
        q: &q,
        k: &k,
        v: &v,
        o: &o,
        d_o: &d_o,
        lse: &lse,
        dq: &dq,
        dk: &dk,
        dv: &dv,
    };

    let handle = match Handle::new() {
        Ok(handle) => handle,
        Err(e) if e.status.category() == Status::NOT_INITIALIZED => {
            println!("no GPU to run on: {e}");
            let planner = Handle::for_device(&common::a100())?;
            println!("the forward plan on a described A100:");
            println!("{}", planner.describe_forward_plan(&attn, &forward)?);
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    println!("device: {}", handle.device()?.name);
    println!("{}", handle.describe_forward_plan(&attn, &forward)?);

    let cuda = common::cudart::Cudart::load()?;
    let count = (B * H * N * D) as usize;
    let input = |phase: f32| {
        cuda.upload(
            &(0..count).map(|i| bf16(((i as f32) * 0.37 + phase).sin())).collect::<Vec<_>>(),
        )
    };
    let (q_d, k_d, v_d, do_d) = (input(0.0)?, input(1.0)?, input(2.0)?, input(3.0)?);
    let o_d = cuda.alloc::<u16>(count)?;
    let lse_d = cuda.alloc::<f32>((B * H * N) as usize)?;
    let (dq_d, dk_d, dv_d) =
        (cuda.alloc::<u16>(count)?, cuda.alloc::<u16>(count)?, cuda.alloc::<u16>(count)?);

    // Query the workspace once, before executing: that also takes planning off the execute path.
    let bytes = handle
        .forward_workspace_size(&attn, &forward)?
        .max(handle.backward_workspace_size(&attn, &backward)?);
    let workspace_buffer = cuda.alloc::<u8>(bytes)?;
    let workspace = if bytes == 0 { DevicePtrMut::null() } else { workspace_buffer.output() };

    let buffers = ForwardBuffers {
        q: q_d.input(),
        k: k_d.input(),
        v: v_d.input(),
        o: o_d.output(),
        lse: Some(lse_d.output()),
        workspace,
        workspace_bytes: bytes,
    };
    // SAFETY: each buffer is device memory of its descriptor's size, and stays allocated until
    // the synchronization below; the handle uses the default stream.
    unsafe { handle.forward(&attn, &forward, &buffers)? };
    let buffers = BackwardBuffers {
        q: q_d.input(),
        k: k_d.input(),
        v: v_d.input(),
        o: o_d.input(),
        d_o: do_d.input(),
        lse: lse_d.input(),
        dq: dq_d.output(),
        dk: dk_d.output(),
        dv: dv_d.output(),
        workspace,
        workspace_bytes: bytes,
    };
    // SAFETY: as for the forward; the forward's outputs are ready in stream order.
    unsafe { handle.backward(&attn, &backward, &buffers)? };
    cuda.synchronize()?;

    let mean_abs = |values: Vec<u16>| {
        values.iter().map(|&x| f64::from(from_bf16(x).abs())).sum::<f64>() / count as f64
    };
    println!("mean |O|  = {:.6}", mean_abs(o_d.download()?));
    println!("mean |dQ| = {:.6}", mean_abs(dq_d.download()?));
    println!("mean |dK| = {:.6}", mean_abs(dk_d.download()?));
    println!("mean |dV| = {:.6}", mean_abs(dv_d.download()?));
    Ok(())
}

/// bfloat16 bits of `x`, rounded to nearest even.
fn bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

fn from_bf16(x: u16) -> f32 {
    f32::from_bits(u32::from(x) << 16)
}
