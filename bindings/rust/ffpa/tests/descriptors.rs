//! Tensor and attention descriptors: round trips and the library's validation messages.

mod common;

use common::assert_error;
use ffpa::{AttentionDesc, CausalMode, DataType, Status, TensorDesc};

#[test]
fn packed_bhnd_round_trips() {
    let t = TensorDesc::bhnd(DataType::BFloat16, 2, 8, 128, 320).unwrap();
    assert_eq!(t.dtype().unwrap(), DataType::BFloat16);
    assert_eq!(t.dims().unwrap(), [2, 8, 128, 320]);
    assert_eq!(t.strides().unwrap(), [8 * 128 * 320, 128 * 320, 320, 1]);
}

#[test]
fn bnhd_strides_interleave_heads() {
    let t = TensorDesc::bnhd(DataType::Float16, 2, 8, 128, 64).unwrap();
    assert_eq!(t.dims().unwrap(), [2, 8, 128, 64]);
    assert_eq!(t.strides().unwrap(), [128 * 8 * 64, 64, 8 * 64, 1]);
}

#[test]
fn lse_is_fp32_with_three_dims() {
    let t = TensorDesc::lse(2, 8, 128).unwrap();
    assert_eq!(t.dtype().unwrap(), DataType::Float32);
    assert_eq!(t.dims().unwrap(), [2, 8, 128]);
}

#[test]
fn set_replaces_and_failed_set_keeps_the_old_value() {
    let mut t = TensorDesc::bhnd(DataType::Float16, 1, 1, 16, 64).unwrap();
    t.set(DataType::Float32, &[1, 2, 32, 128], Some(&[16384, 8192, 256, 1])).unwrap();
    assert_eq!(t.strides().unwrap(), [16384, 8192, 256, 1]);
    assert!(t.set(DataType::Float16, &[1, 2, 0, 128], None).is_err());
    assert_eq!(t.dims().unwrap(), [1, 2, 32, 128]);
    assert_eq!(t.dtype().unwrap(), DataType::Float32);
}

#[test]
fn zero_extent_is_out_of_bound() {
    let result = TensorDesc::bhnd(DataType::Float16, 1, 8, 0, 64);
    assert_error(result, Status::BAD_PARAM_OUT_OF_BOUND, &["ffpaSetTensorDescriptor", "dims"]);
}

#[test]
fn five_dims_are_out_of_bound() {
    let result = TensorDesc::new(DataType::Float16, &[1, 1, 1, 1, 1], None);
    assert_error(result, Status::BAD_PARAM_OUT_OF_BOUND, &["nbDims", "5"]);
}

#[test]
fn overlapping_strides_are_refused() {
    let result = TensorDesc::new(DataType::Float16, &[1, 2, 16, 64], Some(&[2048, 16, 64, 1]));
    assert_error(result, Status::BAD_PARAM_STRIDE, &["ffpaSetTensorDescriptor", "overlap"]);
}

#[test]
fn non_positive_stride_is_refused() {
    let result = TensorDesc::new(DataType::Float16, &[1, 2, 16, 64], Some(&[2048, 1024, 0, 1]));
    assert_error(result, Status::BAD_PARAM_STRIDE, &["strides"]);
}

#[test]
fn stride_count_must_match_dims() {
    let result = TensorDesc::new(DataType::Float16, &[1, 2, 16, 64], Some(&[64, 1]));
    assert_error(result, Status::BAD_PARAM_STRIDE, &["2 strides for 4 dimensions"]);
}

#[test]
fn bnhd_overflow_is_reported() {
    let result = TensorDesc::bnhd(DataType::Float16, 1, 1 << 40, 1 << 30, 64);
    assert_error(result, Status::BAD_PARAM_OUT_OF_BOUND, &["overflow"]);
}

#[test]
fn attention_defaults_and_round_trips() {
    let mut attn = AttentionDesc::new().unwrap();
    assert_eq!(attn.scale().unwrap(), None);
    assert_eq!(attn.causal().unwrap(), CausalMode::None);
    attn.set_scale(0.125).unwrap();
    attn.set_causal(CausalMode::BottomRight).unwrap();
    assert_eq!(attn.scale().unwrap(), Some(0.125));
    assert_eq!(attn.causal().unwrap(), CausalMode::BottomRight);
    let chained = AttentionDesc::new().unwrap().with_causal(CausalMode::TopLeft).unwrap();
    assert_eq!(chained.causal().unwrap(), CausalMode::TopLeft);
}

#[test]
fn key_lengths_round_trip() {
    let mut attn = AttentionDesc::new().unwrap();
    assert!(attn.key_lengths().unwrap().is_null());
    // A device address: planning never reads the counts.
    let counts = 0x7f00_0000_1000usize as *const i32;
    attn.set_key_lengths(counts).unwrap();
    assert_eq!(attn.key_lengths().unwrap(), counts);
    attn.set_key_lengths(std::ptr::null()).unwrap();
    assert!(attn.key_lengths().unwrap().is_null());
}

#[test]
fn invalid_scales_are_refused() {
    for scale in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let mut attn = AttentionDesc::new().unwrap();
        let result = attn.set_scale(scale);
        assert_error(result, Status::BAD_PARAM_OUT_OF_BOUND, &["FFPA_ATTENTION_SOFTMAX_SCALE"]);
        assert_eq!(attn.scale().unwrap(), None, "a refused scale must not stick");
    }
}

#[test]
fn descriptors_move_between_threads() {
    let t = TensorDesc::bhnd(DataType::Float16, 1, 4, 64, 128).unwrap();
    let dims = std::thread::spawn(move || t.dims().unwrap()).join().unwrap();
    assert_eq!(dims, [1, 4, 64, 128]);
}
