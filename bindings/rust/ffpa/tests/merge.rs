//! The merge and sink calls on a described device: every argument check runs before the device
//! would be touched, so a valid call ends in NOT_INITIALIZED_NO_DEVICE.

mod common;

use common::{assert_error, planner};
use ffpa::{
    DataType, DevicePtr, DevicePtrMut, MergeTensors, Status, TensorDesc, MAX_MERGE_PARTIALS,
};

/// Distinct, aligned, never dereferenced addresses 1 TiB apart.
fn fake(slot: u64) -> u64 {
    (slot + 1) << 40
}

#[test]
fn merge_checks_its_arguments() {
    let handle = planner();
    let partial = TensorDesc::bhnd(DataType::BFloat16, 2, 4, 100, 512).unwrap();
    let out = TensorDesc::bhnd(DataType::Float32, 2, 4, 100, 512).unwrap();
    let lse = TensorDesc::lse(2, 4, 100).unwrap();
    let t = MergeTensors { partial_o: &partial, partial_lse: &lse, o: &out, lse: Some(&lse) };
    let parts: Vec<DevicePtr> = (0..3).map(|i| DevicePtr::from_address(fake(i))).collect();
    let lses: Vec<DevicePtr> = (3..6).map(|i| DevicePtr::from_address(fake(i))).collect();
    let o = DevicePtrMut::from_address(fake(6));
    let merged_lse = Some(DevicePtrMut::from_address(fake(7)));
    // SAFETY (all calls): a described device launches nothing; no address is dereferenced.
    unsafe {
        assert_error(
            handle.merge(&t, &parts, &lses, o, merged_lse),
            Status::NOT_INITIALIZED_NO_DEVICE,
            &[],
        );
        assert_error(
            handle.merge(&t, &[], &[], o, merged_lse),
            Status::BAD_PARAM_OUT_OF_BOUND,
            &["count is 0"],
        );
        let many = vec![parts[0]; MAX_MERGE_PARTIALS + 1];
        assert_error(
            handle.merge(&t, &many, &many, o, merged_lse),
            Status::BAD_PARAM_OUT_OF_BOUND,
            &["count is 33"],
        );
        assert_error(
            handle.merge(&t, &parts, &lses[..2], o, merged_lse),
            Status::BAD_PARAM_NULL_POINTER,
            &["partialLse[2] is NULL"],
        );
        assert_error(
            handle.merge(&t, &parts, &lses, DevicePtrMut::from_address(fake(1) + 64), merged_lse),
            Status::BAD_PARAM,
            &["overlaps"],
        );
        let no_lse = MergeTensors { lse: None, ..t };
        assert_error(
            handle.merge(&no_lse, &parts, &lses, o, None),
            Status::NOT_INITIALIZED_NO_DEVICE,
            &[],
        );
        assert_error(
            handle.merge(&no_lse, &parts, &lses, o, merged_lse),
            Status::BAD_PARAM_NULL_POINTER,
            &["lseDesc is NULL"],
        );
    }
}

#[test]
fn sinks_check_their_arguments() {
    let handle = planner();
    let o_desc = TensorDesc::bhnd(DataType::Float16, 1, 8, 64, 256).unwrap();
    let lse_desc = TensorDesc::lse(1, 8, 64).unwrap();
    let sinks = DevicePtr::from_address(fake(0));
    // SAFETY (all calls): a described device launches nothing; no address is dereferenced.
    unsafe {
        let o = DevicePtrMut::from_address(fake(1));
        let lse = DevicePtrMut::from_address(fake(2));
        assert_error(
            handle.apply_sinks(sinks, &o_desc, o, &lse_desc, lse),
            Status::NOT_INITIALIZED_NO_DEVICE,
            &[],
        );
        assert_error(
            handle.apply_sinks(DevicePtr::null(), &o_desc, o, &lse_desc, lse),
            Status::BAD_PARAM_NULL_POINTER,
            &["sinks is NULL"],
        );
        let backward = |d_sinks: u64| {
            handle.sinks_backward(
                sinks,
                &o_desc,
                DevicePtr::from_address(fake(1)),
                &o_desc,
                DevicePtr::from_address(fake(3)),
                &lse_desc,
                DevicePtr::from_address(fake(2)),
                DevicePtrMut::from_address(d_sinks),
            )
        };
        assert_error(backward(fake(4)), Status::NOT_INITIALIZED_NO_DEVICE, &[]);
        assert_error(backward(fake(2) + 16), Status::BAD_PARAM, &["dSinks overlaps lse"]);
    }
}
