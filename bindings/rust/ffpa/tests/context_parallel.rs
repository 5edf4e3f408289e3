//! Context parallelism on a described device: objects made for descriptions, their facts and
//! shards, the arguments refused, and the ring plans of a causal zigzag ring.

mod common;

use std::os::raw::c_void;
use std::ptr;

use common::{assert_error, planner, Problem};
use ffpa::{
    AttentionDesc, AttentionSlices, BackwardTensors, CausalMode, ContextParallel,
    ContextParallelInfo, DataType, ForwardTensors, Sharding, SliceMask, Status,
};

fn forward_tensors(p: &Problem) -> ForwardTensors<'_> {
    ForwardTensors { q: &p.q, k: &p.k, v: &p.v, o: &p.o, lse: Some(&p.lse) }
}

#[test]
fn objects_for_descriptions_report_their_facts_and_shards() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<ContextParallel>();

    let handle = planner();
    let zigzag = ContextParallel::for_description(&handle, 4, 1, Sharding::Zigzag).unwrap();
    assert_eq!(
        zigzag.info().unwrap(),
        ContextParallelInfo { ranks: 4, rank: 1, sharding: Sharding::Zigzag }
    );
    // Chunks 1 and 6 of 8 chunks of 512 tokens.
    assert_eq!(zigzag.shard(1024).unwrap(), vec![512..1024, 3072..3584]);
    assert!(!zigzag.as_raw().is_null());
    assert_eq!(
        format!("{zigzag:?}"),
        "ContextParallel { ranks: Some(4), rank: Some(1), sharding: Some(Zigzag) }"
    );

    let contiguous = ContextParallel::for_description(&handle, 4, 3, Sharding::Contiguous).unwrap();
    assert_eq!(
        contiguous.info().unwrap(),
        ContextParallelInfo { ranks: 4, rank: 3, sharding: Sharding::Contiguous }
    );
    assert_eq!(contiguous.shard(1000).unwrap(), vec![3000..4000]);
    assert_eq!(contiguous.shard(1).unwrap(), vec![3..4]);
}

#[test]
fn bad_arguments_are_refused_with_the_reason() {
    let handle = planner();
    assert_error(
        ContextParallel::for_description(&handle, 0, 0, Sharding::Zigzag),
        Status::BAD_PARAM_OUT_OF_BOUND,
        &["ranks is 0", "1 to 65536"],
    );
    assert_error(
        ContextParallel::for_description(&handle, 4, 4, Sharding::Zigzag),
        Status::BAD_PARAM_OUT_OF_BOUND,
        &["rank is 4", "0 to ranks - 1 (3)"],
    );
    assert_error(
        ContextParallel::for_description(&handle, 4, -1, Sharding::Contiguous),
        Status::BAD_PARAM_OUT_OF_BOUND,
        &["rank is -1"],
    );

    let zigzag = ContextParallel::for_description(&handle, 4, 1, Sharding::Zigzag).unwrap();
    assert_error(
        zigzag.shard(1023),
        Status::BAD_PARAM_SHAPE_MISMATCH,
        &["localLength is 1023", "must be even"],
    );
    assert_error(zigzag.shard(0), Status::BAD_PARAM_OUT_OF_BOUND, &["localLength is 0"]);
    let contiguous = ContextParallel::for_description(&handle, 4, 0, Sharding::Contiguous).unwrap();
    assert_eq!(contiguous.shard(1023).unwrap(), vec![0..1023], "odd lengths shard contiguously");

    // A real object needs a communicator, and a handle that executes.
    // SAFETY: the null communicator is refused before anything reads it.
    let null = unsafe { ContextParallel::new(&handle, ptr::null_mut(), Sharding::Zigzag) };
    assert_error(null, Status::BAD_PARAM_NULL_POINTER, &["comm"]);
    let mut not_a_communicator = 0u64;
    let fake = (&mut not_a_communicator as *mut u64).cast::<c_void>();
    // SAFETY: a handle for a described device is refused before the library reads `comm`.
    let described = unsafe { ContextParallel::new(&handle, fake, Sharding::Contiguous) };
    assert_error(described, Status::NOT_INITIALIZED_NO_DEVICE, &[]);
}

#[test]
fn a_causal_zigzag_ring_plans_its_steps_and_needs_more_workspace() {
    let handle = planner();
    let p = Problem::new(DataType::BFloat16, 1, 8, 1024, 512); // the local shards
    let t = forward_tensors(&p);
    let plain_attn = AttentionDesc::new().unwrap().with_causal(CausalMode::BottomRight).unwrap();
    let plain = handle.describe_forward_plan(&plain_attn, &t).unwrap();
    let plain_bytes = handle.forward_workspace_size(&plain_attn, &t).unwrap();
    assert!(!plain.contains("context parallel"), "{plain}");

    let mut attn = AttentionDesc::new().unwrap().with_causal(CausalMode::BottomRight).unwrap();
    {
        let ring = ContextParallel::for_description(&handle, 4, 1, Sharding::Zigzag).unwrap();
        attn.set_context_parallel(Some(&ring)).unwrap();
    } // dropped: the descriptor keeps its own reference
    let text = handle.describe_forward_plan(&attn, &t).unwrap();
    assert!(
        text.contains("context parallel: rank 1 of 4, zigzag sharding, 4 ring steps"),
        "{text}"
    );
    // Step 1 holds rank 0's K/V (chunks 0 and 7): both local chunks see chunk 0 whole.
    assert!(
        text.contains("step 1: K/V of rank 0\n  queries [0, 1024) keys [0, 512) full: "),
        "{text}"
    );
    assert!(text.contains("step 3: K/V of rank 2"), "{text}");

    let ring_bytes = handle.forward_workspace_size(&attn, &t).unwrap();
    assert!(ring_bytes > plain_bytes, "ring {ring_bytes} bytes, plain {plain_bytes}");
    // Two K/V blocks, a partial O and the fp32 running O at least.
    let (kv, o) = (2 * 8 * 1024 * 512 * 2, 8 * 1024 * 512);
    assert!(ring_bytes >= 2 * kv + o * 2 + o * 4, "ring {ring_bytes} bytes");
    assert!(text.contains(&format!("workspace: {ring_bytes} bytes")), "{text}");

    let g = Problem::new(DataType::BFloat16, 1, 8, 1024, 512);
    let b = BackwardTensors {
        q: &p.q,
        k: &p.k,
        v: &p.v,
        o: &p.o,
        d_o: &g.o,
        lse: &p.lse,
        dq: &g.q,
        dk: &g.k,
        dv: &g.v,
    };
    let backward = handle.describe_backward_plan(&attn, &b).unwrap();
    assert!(backward.contains("step 1: K/V of rank 0\n  queries [0, 1024) keys [0, 512) full: "));

    // Detached, the descriptor plans the plain call again.
    attn.set_context_parallel(None).unwrap();
    assert_eq!(handle.describe_forward_plan(&attn, &t).unwrap(), plain);
    assert_eq!(handle.forward_workspace_size(&attn, &t).unwrap(), plain_bytes);
}

#[test]
fn slices_mask_the_whole_sequence_of_a_ring() {
    let handle = planner();
    let p = Problem::new(DataType::BFloat16, 1, 8, 256, 512); // 2 ranks of 256 tokens
    let t = forward_tensors(&p);
    let mut attn = AttentionDesc::new().unwrap();
    // Rank 0 of a zigzag ring holds global tokens [0, 128) and [384, 512).
    let ring = ContextParallel::for_description(&handle, 2, 0, Sharding::Zigzag).unwrap();
    attn.set_context_parallel(Some(&ring)).unwrap();
    // Two causal documents of the whole sequence: [0, 200) and [200, 512).
    let mut slices = AttentionSlices::new(&handle).unwrap();
    slices.set_from_offsets(&[0, 200, 512], None, SliceMask::Causal).unwrap();
    attn.set_slices(Some(&slices)).unwrap();
    let text = handle.describe_forward_plan(&attn, &t).unwrap();
    assert!(
        text.contains("step 0: K/V of rank 0\n  queries [0, 256) keys [0, 256) 2 slices: "),
        "{text}"
    );
    // Rank 1's block: chunk 3's rows see document 1's keys [200, 384), local keys [72, 256).
    assert!(
        text.contains("step 1: K/V of rank 1\n  queries [128, 256) keys [72, 256) 2 slices: "),
        "{text}"
    );
    // The slices may reach past the local rows, not past the whole sequence.
    slices.set_from_offsets(&[0, 200, 513], None, SliceMask::Causal).unwrap();
    attn.set_slices(Some(&slices)).unwrap();
    assert_error(
        handle.forward_workspace_size(&attn, &t),
        Status::BAD_PARAM_SHAPE_MISMATCH,
        &["on each of 2 context-parallel ranks"],
    );
}
