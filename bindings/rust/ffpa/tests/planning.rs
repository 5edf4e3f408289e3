//! Planning on a described device: workspace sizes, plan descriptions, the plan cache, and the
//! argument checks of the execute calls, all without a GPU.

mod common;

use common::{a100, assert_error, planner, Problem};
use ffpa::{
    AttentionDesc, BackwardBuffers, BackwardTensors, CausalMode, DataType, DevicePtr, DevicePtrMut,
    ForwardBuffers, ForwardTensors, PolicyKnob, Status, TensorDesc,
};

fn forward_tensors(p: &Problem) -> ForwardTensors<'_> {
    ForwardTensors { q: &p.q, k: &p.k, v: &p.v, o: &p.o, lse: Some(&p.lse) }
}

fn backward_tensors<'a>(p: &'a Problem, grads: &'a Problem) -> BackwardTensors<'a> {
    BackwardTensors {
        q: &p.q,
        k: &p.k,
        v: &p.v,
        o: &p.o,
        d_o: &grads.o,
        lse: &p.lse,
        dq: &grads.q,
        dk: &grads.k,
        dv: &grads.v,
    }
}

/// Distinct, 256-byte aligned addresses 1 TiB apart: plausible and never overlapping. Nothing
/// dereferences them, because a handle for a described device launches nothing.
fn fake(slot: u64) -> u64 {
    (slot + 1) << 40
}

#[test]
fn described_device_round_trips() {
    let handle = planner();
    assert_eq!(handle.device().unwrap(), a100());
    assert!(handle.stream().unwrap().is_null(), "the default stream is null");
}

#[test]
fn invalid_device_is_refused() {
    let device = ffpa::DeviceDesc { sm_version: 75, ..a100() };
    let error = ffpa::Handle::for_device(&device).unwrap_err();
    assert_eq!(error.status, Status::NOT_SUPPORTED_ARCH_MISMATCH, "{error}");
    let device = ffpa::DeviceDesc { sm_count: 0, ..a100() };
    assert_error(ffpa::Handle::for_device(&device), Status::BAD_PARAM_OUT_OF_BOUND, &["smCount"]);
    let device = ffpa::DeviceDesc { name: "x".repeat(300), ..a100() };
    assert_error(ffpa::Handle::for_device(&device), Status::BAD_PARAM_OUT_OF_BOUND, &["name"]);
}

#[test]
fn forward_and_backward_workspaces_and_plans() {
    let handle = planner();
    let p = Problem::new(DataType::Float16, 1, 8, 1024, 512);
    let grads = Problem::new(DataType::Float16, 1, 8, 1024, 512);
    let attn = AttentionDesc::new().unwrap().with_causal(CausalMode::TopLeft).unwrap();

    let forward = forward_tensors(&p);
    let bytes = handle.forward_workspace_size(&attn, &forward).unwrap();
    let plan = handle.describe_forward_plan(&attn, &forward).unwrap();
    for line in ["kernel:", "config:", "workspace:"] {
        assert!(plan.contains(line), "no {line:?} in {plan}");
    }
    assert!(plan.contains(&bytes.to_string()), "workspace {bytes} not in {plan}");

    let backward = backward_tensors(&p, &grads);
    handle.backward_workspace_size(&attn, &backward).unwrap();
    let plan = handle.describe_backward_plan(&attn, &backward).unwrap();
    assert!(plan.contains("kernel:"), "{plan}");
}

#[test]
fn plan_cache_counts_hits_and_clears() {
    let handle = planner();
    handle.set_policy(PolicyKnob::PLAN_CACHE_CAPACITY, 16i32).unwrap();
    let p = Problem::new(DataType::BFloat16, 2, 4, 256, 128);
    let attn = AttentionDesc::new().unwrap();
    for _ in 0..3 {
        handle.forward_workspace_size(&attn, &forward_tensors(&p)).unwrap();
    }
    let stats = handle.plan_cache_stats().unwrap();
    assert_eq!((stats.misses, stats.hits, stats.size, stats.capacity), (1, 2, 1, 16), "{stats:?}");
    handle.clear_plan_cache().unwrap();
    let stats = handle.plan_cache_stats().unwrap();
    assert_eq!((stats.misses, stats.hits, stats.size), (0, 0, 0), "{stats:?}");
}

#[test]
fn head_dim_mismatch_is_reported() {
    let handle = planner();
    let p = Problem::new(DataType::Float16, 1, 8, 128, 256);
    let k = TensorDesc::bhnd(DataType::Float16, 1, 8, 128, 128).unwrap();
    let tensors = ForwardTensors { k: &k, ..forward_tensors(&p) };
    let result = handle.forward_workspace_size(&AttentionDesc::new().unwrap(), &tensors);
    assert_error(
        result,
        Status::BAD_PARAM_SHAPE_MISMATCH,
        &["ffpaGetAttentionForwardWorkspaceSize"],
    );
}

#[test]
fn head_dim_above_limit_is_not_supported() {
    let handle = planner();
    let p = Problem::new(DataType::Float16, 1, 1, 16, 1040);
    let result =
        handle.forward_workspace_size(&AttentionDesc::new().unwrap(), &forward_tensors(&p));
    let error = result.unwrap_err();
    assert_eq!(error.status.category(), Status::NOT_SUPPORTED, "{error}");
    assert!(error.message.contains("1024"), "{error}");
}

#[test]
fn forward_on_described_device_checks_arguments_then_reports_no_device() {
    let handle = planner();
    let p = Problem::new(DataType::Float16, 1, 2, 64, 128);
    let attn = AttentionDesc::new().unwrap();
    let tensors = forward_tensors(&p);
    let workspace_bytes = handle.forward_workspace_size(&attn, &tensors).unwrap();
    let buffers = ForwardBuffers {
        q: DevicePtr::from_address(fake(0)),
        k: DevicePtr::from_address(fake(1)),
        v: DevicePtr::from_address(fake(2)),
        o: DevicePtrMut::from_address(fake(3)),
        lse: Some(DevicePtrMut::from_address(fake(4))),
        workspace: DevicePtrMut::from_address(fake(5)),
        workspace_bytes,
    };
    // SAFETY: a handle for a described device launches nothing (see `fake`).
    let run = |b: &ForwardBuffers| unsafe { handle.forward(&attn, &tensors, b) };
    assert_error(run(&buffers), Status::NOT_INITIALIZED_NO_DEVICE, &["ffpaAttentionForward"]);
    let null_q = ForwardBuffers { q: DevicePtr::null(), ..buffers };
    assert_error(run(&null_q), Status::BAD_PARAM_NULL_POINTER, &["q"]);
    let misaligned = ForwardBuffers { o: DevicePtrMut::from_address(fake(3) + 2), ..buffers };
    assert_error(run(&misaligned), Status::BAD_PARAM_MISALIGNED_POINTER, &["o"]);
    let no_lse = ForwardBuffers { lse: None, ..buffers };
    assert_eq!(run(&no_lse).unwrap_err().status.category(), Status::BAD_PARAM);
}

#[test]
fn backward_on_described_device_checks_arguments_then_reports_no_device() {
    let handle = planner();
    let p = Problem::new(DataType::BFloat16, 1, 2, 64, 128);
    let grads = Problem::new(DataType::BFloat16, 1, 2, 64, 128);
    let attn = AttentionDesc::new().unwrap();
    let tensors = backward_tensors(&p, &grads);
    let workspace_bytes = handle.backward_workspace_size(&attn, &tensors).unwrap();
    let buffers = BackwardBuffers {
        q: DevicePtr::from_address(fake(0)),
        k: DevicePtr::from_address(fake(1)),
        v: DevicePtr::from_address(fake(2)),
        o: DevicePtr::from_address(fake(3)),
        d_o: DevicePtr::from_address(fake(4)),
        lse: DevicePtr::from_address(fake(5)),
        dq: DevicePtrMut::from_address(fake(6)),
        dk: DevicePtrMut::from_address(fake(7)),
        dv: DevicePtrMut::from_address(fake(8)),
        workspace: DevicePtrMut::from_address(fake(9)),
        workspace_bytes,
    };
    // SAFETY: a handle for a described device launches nothing (see `fake`).
    let run = |b: &BackwardBuffers| unsafe { handle.backward(&attn, &tensors, b) };
    assert_error(run(&buffers), Status::NOT_INITIALIZED_NO_DEVICE, &["ffpaAttentionBackward"]);
    let overlap = BackwardBuffers { dk: buffers.dq, ..buffers };
    assert_eq!(run(&overlap).unwrap_err().status.category(), Status::BAD_PARAM);
    if workspace_bytes > 0 {
        let small = BackwardBuffers { workspace_bytes: workspace_bytes - 1, ..buffers };
        assert_error(run(&small), Status::BAD_PARAM_SIZE_INSUFFICIENT, &["workspace"]);
    }
}

#[test]
fn handle_is_shared_between_threads() {
    let handle = planner();
    let attn = AttentionDesc::new().unwrap();
    std::thread::scope(|scope| {
        for n in [128i64, 256, 512, 1024] {
            let (handle, attn) = (&handle, &attn);
            scope.spawn(move || {
                let p = Problem::new(DataType::Float16, 1, 4, n, 256);
                handle.forward_workspace_size(attn, &forward_tensors(&p)).unwrap()
            });
        }
    });
    assert_eq!(handle.plan_cache_stats().unwrap().size, 4);
}
