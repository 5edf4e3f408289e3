"""Policies: knob names and descriptions from the library, typed round trips, sources."""

import pytest

import ffpa


def test_knobs_come_from_the_library():
    infos = ffpa.knobs()
    assert [info.knob for info in infos] == list(ffpa.Knob)
    for info in infos:
        assert info.name == "FFPA_POLICY_" + ffpa.Knob(info.knob).name
        assert info.short_name == ffpa.Knob(info.knob).name.lower()
        assert info.description and info.environment and info.min <= info.max
    stages = ffpa.policy_info("stages")
    assert (stages.type, stages.min, stages.max, stages.environment) == (
        ffpa.PolicyType.INT32, 0, 4, ("FFPA_STAGES",))
    level = ffpa.policy_info(ffpa.Knob.LOG_LEVEL)
    assert level.type is ffpa.PolicyType.ENUM
    assert level.value_names == ("off", "error", "warning", "info", "debug")
    assert level.default == ffpa.LogLevel.WARNING and level.default_string == "warning"
    accumulator = ffpa.policy_info("FFPA_POLICY_ACCUMULATOR")
    assert accumulator.environment[0] == "FFPA_ACCUMULATOR"


@pytest.mark.parametrize("name", ["stages", "STAGES", "FFPA_POLICY_STAGES", " Stages ",
                                  ffpa.Knob.STAGES, 12])
def test_knobs_by_name_or_value(described, name):
    described.set_policy(name, 2)
    assert described.get_policy("stages") == 2


def test_typed_round_trips_and_sources(described):
    for info in ffpa.knobs():
        assert described.policy_source(info.knob) is ffpa.PolicySource.DEFAULT
    values = {
        "prefetch_qkv": False,
        "stages": 3,
        "reference_chunk_bytes": 1 << 20,
        "accumulator": ffpa.Accumulator.QK_F16,
        "autotune_mode": "max",
        "tuned_config_dir": "/opt/ffpa/tuned",
    }
    for knob, value in values.items():
        described.set_policy(knob, value)
        assert described.policy_source(knob) is ffpa.PolicySource.SETTER
    assert described.get_policy("prefetch_qkv") is False
    assert described.get_policy("stages") == 3
    assert described.get_policy("reference_chunk_bytes") == 1 << 20
    assert described.get_policy("accumulator") == ffpa.Accumulator.QK_F16
    assert described.get_policy("autotune_mode") == ffpa.AutotuneMode.MAX
    assert described.get_policy("tuned_config_dir") == "/opt/ffpa/tuned"
    described.set_policy("log_level", "DEBUG")
    assert described.get_policy("log_level") == ffpa.LogLevel.DEBUG


def test_refused_values_name_the_knob(described):
    with pytest.raises(ffpa.BadParamError) as caught:
        described.set_policy("stages", 7)
    assert caught.value.status is ffpa.Status.BAD_PARAM_OUT_OF_BOUND
    assert "FFPA_POLICY_STAGES" in caught.value.message and "7" in caught.value.message
    assert described.get_policy("stages") == 0
    with pytest.raises(ValueError, match="does not fit its int32 type"):
        described.set_policy("stages", 1 << 40)
    with pytest.raises(TypeError, match="takes an integer"):
        described.set_policy("plan_cache_capacity", 1.5)
    with pytest.raises(ValueError, match="not one of off, error, warning, info, debug"):
        described.set_policy("log_level", "loud")
    with pytest.raises(ValueError, match="NUL"):
        described.set_policy("tuned_config_dir", "a\0b")
    with pytest.raises(ValueError, match="unknown knob 'turbo'.*stages"):
        described.set_policy("turbo", 1)
    with pytest.raises(ffpa.BadParamError):
        described.get_policy(9999)


def test_environment_is_read_when_the_handle_is_created(monkeypatch):
    monkeypatch.setenv("FFPA_STAGES", "2")
    monkeypatch.setenv("FFPA_LOGGER_LEVEL", "info")
    monkeypatch.setenv("ENABLE_FFPA_PREFETCH_QKV", "off")
    with ffpa.Handle(device=ffpa.DeviceDesc()) as handle:
        assert handle.get_policy("stages") == 2
        assert handle.get_policy("log_level") == ffpa.LogLevel.INFO
        assert handle.get_policy("prefetch_qkv") is False
        for knob in ("stages", "log_level", "prefetch_qkv"):
            assert handle.policy_source(knob) is ffpa.PolicySource.ENVIRONMENT
        assert handle.policy_source("plan_cache_capacity") is ffpa.PolicySource.DEFAULT
        handle.set_policy("stages", 1)
        assert handle.policy_source("stages") is ffpa.PolicySource.SETTER


def test_a_malformed_variable_fails_handle_creation(monkeypatch):
    monkeypatch.setenv("FFPA_PLAN_CACHE_CAPACITY", "lots")
    with pytest.raises(ffpa.BadParamError) as caught:
        ffpa.Handle(device=ffpa.DeviceDesc())
    assert caught.value.status is ffpa.Status.BAD_PARAM_ENVIRONMENT
    assert "FFPA_PLAN_CACHE_CAPACITY" in caught.value.message and "lots" in caught.value.message
