//! Policy environment variables, read when a handle is created.
//!
//! The environment is process-wide and the tests of this file run in parallel threads, so every
//! test holds ENV_LOCK while it sets variables and creates handles. No other test file sets any.

mod common;

use std::sync::{Mutex, MutexGuard};

use common::{assert_error, planner};
use ffpa::{Accumulator, Handle, PolicyKnob, PolicySource, PolicyValue, Status};

static ENV_LOCK: Mutex<()> = Mutex::new(());

/// Sets variables for the duration of a test, and removes them again even if it fails.
struct Env {
    names: Vec<&'static str>,
    _lock: MutexGuard<'static, ()>,
}

impl Env {
    fn set(vars: &[(&'static str, &str)]) -> Env {
        // A test that failed while holding the lock leaves nothing behind: Drop cleaned up.
        let lock = ENV_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for (name, value) in vars {
            std::env::set_var(name, value);
        }
        Env { names: vars.iter().map(|(name, _)| *name).collect(), _lock: lock }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for name in &self.names {
            std::env::remove_var(name);
        }
    }
}

#[test]
fn environment_sets_values_and_setter_wins() {
    let _env = Env::set(&[("FFPA_STAGES", "3"), ("FFPA_DETERMINISTIC_MODE", "yes")]);
    let handle = planner();
    assert_eq!(handle.policy(PolicyKnob::STAGES).unwrap(), PolicyValue::Int32(3));
    assert_eq!(handle.policy_source(PolicyKnob::STAGES).unwrap(), PolicySource::Environment);
    assert_eq!(handle.policy(PolicyKnob::DETERMINISTIC).unwrap(), PolicyValue::Bool(true));
    handle.set_policy(PolicyKnob::STAGES, 2i32).unwrap();
    assert_eq!(handle.policy(PolicyKnob::STAGES).unwrap(), PolicyValue::Int32(2));
    assert_eq!(handle.policy_source(PolicyKnob::STAGES).unwrap(), PolicySource::Setter);
}

#[test]
fn enumerations_accept_names() {
    let _env = Env::set(&[("FFPA_ACCUMULATOR", "qk_f16"), ("FFPA_LOGGER_LEVEL", "DEBUG")]);
    let handle = planner();
    assert_eq!(handle.policy(PolicyKnob::ACCUMULATOR).unwrap(), Accumulator::QkF16.into());
    assert_eq!(handle.policy(PolicyKnob::LOG_LEVEL).unwrap(), ffpa::LogLevel::Debug.into());
}

#[test]
fn variables_are_read_only_at_creation() {
    let handle = {
        let _env = Env::set(&[("FFPA_PLAN_CACHE_CAPACITY", "5")]);
        planner()
    };
    let _env = Env::set(&[("FFPA_PLAN_CACHE_CAPACITY", "9")]);
    assert_eq!(handle.policy(PolicyKnob::PLAN_CACHE_CAPACITY).unwrap(), PolicyValue::Int32(5));
    assert_eq!(handle.plan_cache_stats().unwrap().capacity, 5);
}

#[test]
fn empty_variable_counts_as_unset() {
    let _env = Env::set(&[("FFPA_STAGES", "")]);
    let handle = planner();
    assert_eq!(handle.policy_source(PolicyKnob::STAGES).unwrap(), PolicySource::Default);
}

#[test]
fn malformed_variable_fails_creation_naming_it() {
    let _env = Env::set(&[("FFPA_STAGES", "many")]);
    let result = Handle::for_device(&common::a100());
    assert_error(result, Status::BAD_PARAM_ENVIRONMENT, &["FFPA_STAGES", "many"]);
}

#[test]
fn exclusive_accumulator_variables_fail_creation() {
    let _env = Env::set(&[("ENABLE_FFPA_FORCE_QK_F16", "1"), ("ENABLE_FFPA_FORCE_PV_F16", "1")]);
    let result = Handle::for_device(&common::a100());
    assert_error(
        result,
        Status::BAD_PARAM_EXCLUSIVE_OPTIONS,
        &["ENABLE_FFPA_FORCE_QK_F16", "ENABLE_FFPA_FORCE_PV_F16"],
    );
}
