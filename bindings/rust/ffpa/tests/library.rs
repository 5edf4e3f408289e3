//! Versions, statuses and errors, knob introspection, and handle creation without a GPU.

mod common;

use ffpa::{Error, Handle, PolicyKnob, PolicyType, Status, Version};

#[test]
fn loaded_library_serves_these_bindings() {
    assert!(ffpa::is_compatible(), "library {} vs header {}", ffpa::version(), Version::HEADER);
    assert_eq!(ffpa::version().major, Version::HEADER.major);
    assert!(ffpa::build_info().contains(&ffpa::version().to_string()), "{}", ffpa::build_info());
}

#[test]
fn version_rule_matches_the_header_macro() {
    let header = Version::HEADER;
    assert_eq!(Version::from_encoded(header.encoded()), header);
    assert!(header.serves_header());
    let newer_minor = Version { minor: header.minor + 1, ..header };
    assert!(newer_minor.serves_header());
    let next_major = Version { major: header.major + 1, ..header };
    assert!(!next_major.serves_header());
    if header.minor > 0 {
        assert!(!Version { minor: header.minor - 1, ..header }.serves_header());
    }
    assert_eq!(Version::from_encoded(10203).to_string(), "1.2.3");
}

#[test]
fn statuses_have_names_and_categories() {
    assert_eq!(Status::BAD_PARAM_NULL_POINTER.name(), "FFPA_STATUS_BAD_PARAM_NULL_POINTER");
    assert_eq!(Status::BAD_PARAM_NULL_POINTER.category(), Status::BAD_PARAM);
    assert_eq!(Status::NOT_INITIALIZED_NO_DEVICE.category(), Status::NOT_INITIALIZED);
    assert_eq!(Status::NOT_SUPPORTED_SHAPE.category(), Status::NOT_SUPPORTED);
    assert_eq!(Status::INTERNAL_ERROR_HOST_ALLOCATION_FAILED.category(), Status::INTERNAL_ERROR);
    assert_eq!(Status::EXECUTION_FAILED_NON_FINITE.category(), Status::EXECUTION_FAILED);
    assert_eq!(Status::SUCCESS.category(), Status::SUCCESS);
    assert_eq!(Status::from_raw(2999).category(), Status::BAD_PARAM);
    assert_eq!(Status::from_raw(2999).name(), "FFPA_STATUS_UNKNOWN");
    assert_eq!(format!("{:?}", Status::BAD_PARAM), "FFPA_STATUS_BAD_PARAM(2000)");
}

#[test]
fn errors_display_status_and_message() {
    let error = Error { status: Status::BAD_PARAM_STRIDE, message: "ffpaX: strides".to_owned() };
    assert_eq!(error.to_string(), "FFPA_STATUS_BAD_PARAM_STRIDE: ffpaX: strides");
    let bare = Error { status: Status::INTERNAL_ERROR, message: String::new() };
    assert_eq!(bare.to_string(), "FFPA_STATUS_INTERNAL_ERROR");
    let boxed: Box<dyn std::error::Error> = Box::new(error);
    assert!(boxed.to_string().contains("strides"));
}

#[test]
fn create_without_gpu_reports_no_device() {
    match Handle::new() {
        Ok(_) => println!("SKIPPED: create_without_gpu_reports_no_device: a GPU is present"),
        Err(e) if e.status == Status::NOT_SUPPORTED_ARCH_MISMATCH => {
            println!("SKIPPED: create_without_gpu_reports_no_device: the GPU is too old ({e})")
        }
        Err(e) => {
            assert_eq!(e.status, Status::NOT_INITIALIZED_NO_DEVICE, "{e}");
            assert!(e.message.contains("ffpaCreate"), "{e}");
        }
    }
}

#[test]
fn knobs_are_listed_and_described() {
    let knobs = ffpa::policy_knobs().unwrap();
    assert!(knobs.contains(&PolicyKnob::STAGES) && knobs.contains(&PolicyKnob::LOG_LEVEL));
    assert!(knobs.windows(2).all(|pair| pair[0] < pair[1]), "not in order: {knobs:?}");
    for knob in knobs {
        let info = ffpa::policy_info(knob).unwrap();
        assert_eq!(info.knob, knob);
        assert!(info.name.starts_with("FFPA_POLICY_"), "{info:?}");
        assert!(!info.description.is_empty(), "{info:?}");
        assert!(info.min <= info.max, "{info:?}");
    }
    let stages = ffpa::policy_info(PolicyKnob::STAGES).unwrap();
    assert_eq!((stages.value_type, stages.min, stages.max), (PolicyType::Int32, 0, 4));
    assert_eq!(stages.environment, ["FFPA_STAGES"]);
    let log = ffpa::policy_info(PolicyKnob::LOG_LEVEL).unwrap();
    assert_eq!(log.value_type, PolicyType::Enum);
    assert_eq!(log.value_names.len() as i64, log.max - log.min + 1, "{log:?}");
}

#[test]
fn unknown_knob_is_refused_with_message() {
    let error = ffpa::policy_info(PolicyKnob::from_raw(9999)).unwrap_err();
    assert_eq!(error.status, Status::BAD_PARAM_OUT_OF_BOUND);
    assert!(error.message.contains("9999"), "{error}");
}
