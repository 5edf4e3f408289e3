//! Policy knobs of a handle: typed round trips, sources, and refused values.

mod common;

use common::{assert_error, planner};
use ffpa::{Accumulator, AutotuneMode, LogLevel, PolicyKnob, PolicySource, PolicyValue, Status};

#[test]
fn every_type_round_trips() {
    let handle = planner();
    let cases: Vec<(PolicyKnob, PolicyValue)> = vec![
        (PolicyKnob::DETERMINISTIC, true.into()),
        (PolicyKnob::PREFETCH_QKV, false.into()),
        (PolicyKnob::STAGES, 3i32.into()),
        (PolicyKnob::PLAN_CACHE_CAPACITY, 7i32.into()),
        (PolicyKnob::REFERENCE_CHUNK_BYTES, (1i64 << 33).into()),
        (PolicyKnob::ACCUMULATOR, Accumulator::QkF16.into()),
        (PolicyKnob::AUTOTUNE_MODE, AutotuneMode::Max.into()),
        (PolicyKnob::LOG_LEVEL, LogLevel::Off.into()),
        (PolicyKnob::TUNED_CONFIG_DIR, "/opt/ffpa/tuned".into()),
    ];
    for (knob, value) in cases {
        handle.set_policy(knob, value.clone()).unwrap();
        assert_eq!(handle.policy(knob).unwrap(), value, "{knob:?}");
        assert_eq!(handle.policy_source(knob).unwrap(), PolicySource::Setter, "{knob:?}");
    }
}

#[test]
fn long_and_empty_strings_round_trip() {
    let handle = planner();
    let long = "d".repeat(4095);
    handle.set_policy(PolicyKnob::TUNED_CONFIG_DIR, long.as_str()).unwrap();
    assert_eq!(handle.policy(PolicyKnob::TUNED_CONFIG_DIR).unwrap(), PolicyValue::String(long));
    handle.set_policy(PolicyKnob::TUNED_CONFIG_DIR, "").unwrap();
    assert_eq!(handle.policy(PolicyKnob::TUNED_CONFIG_DIR).unwrap(), "".into());
}

#[test]
fn too_long_string_is_refused() {
    let handle = planner();
    let result = handle.set_policy(PolicyKnob::TUNED_CONFIG_DIR, "d".repeat(4096));
    let error = result.unwrap_err();
    assert_eq!(error.status.category(), Status::BAD_PARAM, "{error}");
    assert!(error.message.contains("FFPA_POLICY_TUNED_CONFIG_DIR"), "{error}");
}

#[test]
fn defaults_come_from_the_library() {
    let handle = planner();
    for knob in [PolicyKnob::STAGES, PolicyKnob::SANITY_CHECK, PolicyKnob::LOG_LEVEL] {
        let info = ffpa::policy_info(knob).unwrap();
        if info.environment.iter().any(|name| std::env::var_os(name).is_some()) {
            continue; // set by whoever runs the tests: not a default
        }
        assert_eq!(handle.policy_source(knob).unwrap(), PolicySource::Default, "{knob:?}");
        let expected = match handle.policy(knob).unwrap() {
            PolicyValue::Bool(v) => i64::from(v),
            PolicyValue::Int32(v) | PolicyValue::Enum(v) => i64::from(v),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(expected, info.default, "{knob:?}");
    }
}

#[test]
fn out_of_range_value_names_knob_and_range() {
    let handle = planner();
    let result = handle.set_policy(PolicyKnob::STAGES, 7i32);
    assert_error(result, Status::BAD_PARAM_OUT_OF_BOUND, &["FFPA_POLICY_STAGES", "7", "0 to 4"]);
    assert_eq!(handle.policy_source(PolicyKnob::STAGES).unwrap(), PolicySource::Default);
}

#[test]
fn unknown_enumerator_is_refused() {
    let handle = planner();
    let result = handle.set_policy(PolicyKnob::LOG_LEVEL, PolicyValue::Enum(42));
    assert_error(result, Status::BAD_PARAM_OUT_OF_BOUND, &["FFPA_POLICY_LOG_LEVEL", "42"]);
}

#[test]
fn wrong_value_type_is_refused_before_the_call() {
    let handle = planner();
    let result = handle.set_policy(PolicyKnob::STAGES, true);
    assert_error(result, Status::BAD_PARAM_ATTRIBUTE_TYPE, &["FFPA_POLICY_STAGES", "Int32"]);
    let result = handle.set_policy(PolicyKnob::REFERENCE_CHUNK_BYTES, 4096i32);
    assert_error(result, Status::BAD_PARAM_ATTRIBUTE_TYPE, &["Int64"]);
    let result = handle.set_policy(PolicyKnob::TUNED_CONFIG_DIR, "a\0b");
    assert_error(result, Status::BAD_PARAM_OUT_OF_BOUND, &["NUL"]);
}

#[test]
fn unknown_knob_is_refused() {
    let handle = planner();
    let error = handle.policy_source(PolicyKnob::from_raw(77777)).unwrap_err();
    assert_eq!(error.status, Status::BAD_PARAM_OUT_OF_BOUND, "{error}");
}

#[test]
fn setters_from_several_threads_are_allowed() {
    let handle = planner();
    std::thread::scope(|scope| {
        for stages in 1..=4i32 {
            let handle = &handle;
            scope.spawn(move || handle.set_policy(PolicyKnob::STAGES, stages).unwrap());
        }
    });
    match handle.policy(PolicyKnob::STAGES).unwrap() {
        PolicyValue::Int32(v) => assert!((1..=4).contains(&v)),
        other => panic!("unexpected {other:?}"),
    }
}
