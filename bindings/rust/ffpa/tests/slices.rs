//! Attention slices on a described device: the list, its checks, and a packed batch that plans
//! on the sm80 kernels, forward and backward.

mod common;

use common::{assert_error, planner};
use ffpa::{
    AttentionDesc, AttentionSlices, BackwardTensors, DataType, ForwardTensors, Slice, SliceMask,
    SlicesInfo, Status, TensorDesc,
};

#[test]
fn slices_are_set_checked_and_read_back() {
    let handle = planner();
    let mut slices = AttentionSlices::new(&handle).unwrap();
    assert_error(slices.info(), Status::BAD_PARAM_NOT_FINALIZED, &["never set"]);
    slices.set_from_offsets(&[0, 5, 16, 32], None, SliceMask::Causal).unwrap();
    assert_eq!(
        slices.info().unwrap(),
        SlicesInfo { count: 3, query_extent: 32, key_extent: 32, visible_pairs: 15 + 66 + 136 }
    );
    let square = [
        Slice { q0: 0, q1: 8, k0: 0, k1: 8, mask: SliceMask::Causal },
        Slice { q0: 0, q1: 7, k0: 1, k1: 8, mask: SliceMask::InverseCausal },
    ];
    slices.set(&square).unwrap();
    assert_eq!(slices.info().unwrap().visible_pairs, 64);
    let doubled = [square[0], Slice { q0: 0, q1: 8, k0: 0, k1: 8, mask: SliceMask::InverseCausal }];
    assert_error(slices.set(&doubled), Status::BAD_PARAM, &["both give query row 0 key 0"]);
    assert_eq!(slices.info().unwrap().count, 2, "a failed set keeps the previous slices");
    assert_error(slices.set(&[]), Status::BAD_PARAM_OUT_OF_BOUND, &["count is 0"]);
    assert_error(
        slices.set_from_offsets(&[0, 4], Some(&[0]), SliceMask::Full),
        Status::BAD_PARAM_SHAPE_MISMATCH,
        &["2 query offsets but 1 key offsets"],
    );
}

#[test]
fn a_packed_batch_plans_the_sm80_forward_and_backward() {
    let handle = planner();
    let (tokens, heads, dim) = (32, 4, 512);
    let q = TensorDesc::bnhd(DataType::BFloat16, 1, heads, tokens, dim).unwrap();
    let lse =
        TensorDesc::new(DataType::Float32, &[1, heads, tokens], Some(&[tokens * heads, 1, heads]))
            .unwrap();
    let t = ForwardTensors { q: &q, k: &q, v: &q, o: &q, lse: Some(&lse) };
    let mut attn = AttentionDesc::new().unwrap();
    let plain = handle.describe_forward_plan(&attn, &t).unwrap();
    {
        let mut slices = AttentionSlices::new(&handle).unwrap();
        slices.set_from_offsets(&[0, 5, 16, 32], None, SliceMask::Causal).unwrap();
        attn.set_slices(Some(&slices)).unwrap();
    } // dropped: the descriptor keeps its own copy
    let sliced = handle.describe_forward_plan(&attn, &t).unwrap();
    assert!(sliced.contains("kernel: sm80.forward"), "{sliced}");
    assert!(sliced.contains("slices=3"), "{sliced}");
    let b =
        BackwardTensors { q: &q, k: &q, v: &q, o: &q, d_o: &q, lse: &lse, dq: &q, dk: &q, dv: &q };
    let backward = handle.describe_backward_plan(&attn, &b).unwrap();
    assert!(backward.contains("kernel: sm80.backward"), "{backward}");
    attn.set_slices(None).unwrap();
    assert_eq!(handle.describe_forward_plan(&attn, &t).unwrap(), plain);
}
