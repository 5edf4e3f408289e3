//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod cudart;

use ffpa::{DataType, DeviceDesc, Error, Handle, Status, TensorDesc};

/// An A100-80GB as the planner sees it: every planning test runs without a GPU.
pub fn a100() -> DeviceDesc {
    DeviceDesc {
        ordinal: 0,
        sm_version: 80,
        sm_count: 108,
        shared_mem_per_block_optin: 163 * 1024,
        shared_mem_per_sm: 164 * 1024,
        global_mem_bytes: 80 << 30,
        name: "NVIDIA A100-SXM4-80GB".to_owned(),
    }
}

/// A handle planning for [`a100`].
pub fn planner() -> Handle {
    Handle::for_device(&a100()).expect("Handle::for_device")
}

/// A handle on the real GPU, or `None` after printing the skip marker the test runner counts.
pub fn gpu_or_skip(test: &str) -> Option<Handle> {
    match Handle::new() {
        Ok(handle) => Some(handle),
        Err(e) if no_usable_gpu(&e) => {
            println!("SKIPPED: {test}: no usable GPU ({e})");
            None
        }
        Err(e) => panic!("Handle::new failed: {e}"),
    }
}

/// True for the errors `Handle::new` gives on a machine without a GPU it can use.
pub fn no_usable_gpu(e: &Error) -> bool {
    e.status.category() == Status::NOT_INITIALIZED
        || e.status == Status::NOT_SUPPORTED_ARCH_MISMATCH
}

/// Asserts that `result` failed with `status` and that the message mentions every word.
pub fn assert_error<T: std::fmt::Debug>(result: ffpa::Result<T>, status: Status, words: &[&str]) {
    let error = result.expect_err("the call should have failed");
    assert_eq!(error.status, status, "unexpected status; message: {}", error.message);
    for word in words {
        assert!(error.message.contains(word), "message {:?} lacks {:?}", error.message, word);
    }
}

/// The packed `[B, H, N, D]` tensors of a self-attention problem, and its log-sum-exp.
pub struct Problem {
    pub q: TensorDesc,
    pub k: TensorDesc,
    pub v: TensorDesc,
    pub o: TensorDesc,
    pub lse: TensorDesc,
}

impl Problem {
    pub fn new(dtype: DataType, b: i64, h: i64, n: i64, d: i64) -> Problem {
        let t = || TensorDesc::bhnd(dtype, b, h, n, d).unwrap();
        Problem { q: t(), k: t(), v: t(), o: t(), lse: TensorDesc::lse(b, h, n).unwrap() }
    }
}
