//! Forward and backward on the GPU, checked against a float64 attention on the CPU. Each test
//! prints a `SKIPPED:` line and returns when there is no usable GPU.

mod common;

use common::cudart::Cudart;
use common::gpu_or_skip;
use ffpa::{
    AttentionDesc, BackwardBuffers, BackwardTensors, CausalMode, DataType, DevicePtrMut,
    ForwardBuffers, ForwardTensors, TensorDesc,
};

/// Grouped-query attention with more keys than queries, so that the bottom-right mask matters.
const B: usize = 1;
const HQ: usize = 2;
const HKV: usize = 1;
const NQ: usize = 48;
const NKV: usize = 64;
const D: usize = 64;

/// Deterministic values in [-1, 1).
fn values(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..count)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f64 / (1u64 << 24) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

/// O, LSE, dQ, dK, dV of packed BHND fp32 tensors, in float64, with the bottom-right mask.
struct Reference {
    o: Vec<f64>,
    lse: Vec<f64>,
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
}

fn reference(q: &[f32], k: &[f32], v: &[f32], d_o: &[f32], scale: f64) -> Reference {
    let mut r = Reference {
        o: vec![0.0; q.len()],
        lse: vec![0.0; B * HQ * NQ],
        dq: vec![0.0; q.len()],
        dk: vec![0.0; k.len()],
        dv: vec![0.0; v.len()],
    };
    let f = |x: f32| f64::from(x);
    for b in 0..B {
        for h in 0..HQ {
            let g = h / (HQ / HKV);
            let qrow = |i: usize| ((b * HQ + h) * NQ + i) * D;
            let krow = |j: usize| ((b * HKV + g) * NKV + j) * D;
            for i in 0..NQ {
                let (qi, oi) = (qrow(i), qrow(i));
                let visible = (0..NKV).filter(|&j| j + NQ <= i + NKV).collect::<Vec<_>>();
                let scores: Vec<f64> = visible
                    .iter()
                    .map(|&j| scale * (0..D).map(|x| f(q[qi + x]) * f(k[krow(j) + x])).sum::<f64>())
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
                r.lse[(b * HQ + h) * NQ + i] = max + sum.ln();
                let p: Vec<f64> = scores.iter().map(|s| (s - max).exp() / sum).collect();
                for (&j, &pj) in visible.iter().zip(&p) {
                    for x in 0..D {
                        r.o[oi + x] += pj * f(v[krow(j) + x]);
                    }
                }
                let delta: f64 = (0..D).map(|x| f(d_o[oi + x]) * r.o[oi + x]).sum();
                for (&j, &pj) in visible.iter().zip(&p) {
                    let dp: f64 = (0..D).map(|x| f(d_o[oi + x]) * f(v[krow(j) + x])).sum();
                    let ds = pj * (dp - delta);
                    for x in 0..D {
                        r.dq[qi + x] += scale * ds * f(k[krow(j) + x]);
                        r.dk[krow(j) + x] += scale * ds * f(q[qi + x]);
                        r.dv[krow(j) + x] += pj * f(d_o[oi + x]);
                    }
                }
            }
        }
    }
    r
}

fn assert_close(name: &str, gpu: &[f32], cpu: &[f64]) {
    assert_eq!(gpu.len(), cpu.len(), "{name}: length");
    // Errors relative to the tensor's largest value: fp32 GEMMs stay far below the bound (even
    // with TF32), while a wrongly laid out or missing result lands near 1.
    let magnitude = cpu.iter().fold(1e-6f64, |m, c| m.max(c.abs()));
    let (worst, at) = gpu
        .iter()
        .zip(cpu)
        .map(|(&g, &c)| (f64::from(g) - c).abs() / magnitude)
        .zip(0..)
        .fold((0.0, 0), |best, (err, i)| if err > best.0 { (err, i) } else { best });
    assert!(worst < 1e-2, "{name}: error {worst:e} at {at}: gpu {} vs cpu {}", gpu[at], cpu[at]);
}

#[test]
fn gpu_forward_and_backward_match_cpu() {
    let handle = match gpu_or_skip("gpu_forward_and_backward_match_cpu") {
        Some(handle) => handle,
        None => return,
    };
    let cuda = Cudart::load().unwrap();
    let (nq, nkv, d) = (NQ as i64, NKV as i64, D as i64);
    let bhnd = |h: usize, n: i64| TensorDesc::bhnd(DataType::Float32, B as i64, h as i64, n, d);
    let (q_t, o_t, do_t, dq_t) = (bhnd(HQ, nq), bhnd(HQ, nq), bhnd(HQ, nq), bhnd(HQ, nq));
    let (k_t, v_t, dk_t, dv_t) = (bhnd(HKV, nkv), bhnd(HKV, nkv), bhnd(HKV, nkv), bhnd(HKV, nkv));
    let (q_t, o_t, do_t, dq_t) = (q_t.unwrap(), o_t.unwrap(), do_t.unwrap(), dq_t.unwrap());
    let (k_t, v_t, dk_t, dv_t) = (k_t.unwrap(), v_t.unwrap(), dk_t.unwrap(), dv_t.unwrap());
    let lse_t = TensorDesc::lse(B as i64, HQ as i64, nq).unwrap();
    let attn = AttentionDesc::new().unwrap().with_causal(CausalMode::BottomRight).unwrap();

    let (q, k, v) =
        (values(B * HQ * NQ * D, 1), values(B * HKV * NKV * D, 2), values(B * HKV * NKV * D, 3));
    let d_o = values(B * HQ * NQ * D, 4);
    let expected = reference(&q, &k, &v, &d_o, 1.0 / (D as f64).sqrt());

    let (q_d, k_d, v_d, do_d) = (
        cuda.upload(&q).unwrap(),
        cuda.upload(&k).unwrap(),
        cuda.upload(&v).unwrap(),
        cuda.upload(&d_o).unwrap(),
    );
    let o_d = cuda.alloc::<f32>(q.len()).unwrap();
    let lse_d = cuda.alloc::<f32>(B * HQ * NQ).unwrap();
    let (dq_d, dk_d, dv_d) = (
        cuda.alloc::<f32>(q.len()).unwrap(),
        cuda.alloc::<f32>(k.len()).unwrap(),
        cuda.alloc::<f32>(v.len()).unwrap(),
    );

    let forward = ForwardTensors { q: &q_t, k: &k_t, v: &v_t, o: &o_t, lse: Some(&lse_t) };
    let bytes = handle.forward_workspace_size(&attn, &forward).unwrap();
    let workspace = cuda.alloc::<u8>(bytes).unwrap();
    let buffers = ForwardBuffers {
        q: q_d.input(),
        k: k_d.input(),
        v: v_d.input(),
        o: o_d.output(),
        lse: Some(lse_d.output()),
        workspace: if bytes == 0 { DevicePtrMut::null() } else { workspace.output() },
        workspace_bytes: bytes,
    };
    // SAFETY: every buffer is device memory of its descriptor's size, alive until synchronized.
    unsafe { handle.forward(&attn, &forward, &buffers) }.unwrap();
    cuda.synchronize().unwrap();
    assert_close("O", &o_d.download::<f32>().unwrap(), &expected.o);
    assert_close("LSE", &lse_d.download::<f32>().unwrap(), &expected.lse);

    let backward = BackwardTensors {
        q: &q_t,
        k: &k_t,
        v: &v_t,
        o: &o_t,
        d_o: &do_t,
        lse: &lse_t,
        dq: &dq_t,
        dk: &dk_t,
        dv: &dv_t,
    };
    let bytes = handle.backward_workspace_size(&attn, &backward).unwrap();
    let workspace = cuda.alloc::<u8>(bytes).unwrap();
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
        workspace: if bytes == 0 { DevicePtrMut::null() } else { workspace.output() },
        workspace_bytes: bytes,
    };
    // SAFETY: as for the forward.
    unsafe { handle.backward(&attn, &backward, &buffers) }.unwrap();
    cuda.synchronize().unwrap();
    assert_close("dQ", &dq_d.download::<f32>().unwrap(), &expected.dq);
    assert_close("dK", &dk_d.download::<f32>().unwrap(), &expected.dk);
    assert_close("dV", &dv_d.download::<f32>().unwrap(), &expected.dv);
}

#[test]
fn gpu_handle_describes_its_device() {
    let handle = match gpu_or_skip("gpu_handle_describes_its_device") {
        Some(handle) => handle,
        None => return,
    };
    let device = handle.device().unwrap();
    assert!(device.sm_version >= 80 && device.sm_count > 0, "{device:?}");
    assert!(!device.name.is_empty(), "{device:?}");
    // SAFETY: null is the legacy default stream.
    unsafe { handle.set_stream(std::ptr::null_mut()) }.unwrap();
    assert!(handle.stream().unwrap().is_null());
}
