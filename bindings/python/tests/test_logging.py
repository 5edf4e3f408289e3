"""The log callback."""

import threading

import pytest

import ffpa
from test_plans import forward_problem


class Captured:
    """Collects (level, message); the library may call from several threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.messages = []

    def __call__(self, level, message):
        with self.lock:
            self.messages.append((level, message))

    def count(self, level, fragment):
        with self.lock:
            return sum(1 for lv, text in self.messages if lv is level and fragment in text)


@pytest.fixture
def captured():
    receiver = Captured()
    ffpa.set_log_callback(receiver)
    yield receiver
    ffpa.set_log_callback(None)


def test_debug_messages_reach_the_callback(captured, described):
    described.set_policy("log_level", ffpa.LogLevel.DEBUG)
    # A shape no other test plans: each debug line is emitted once per process.
    described.forward_workspace_size(ffpa.AttentionDesc(), *forward_problem(hq=3, hkv=1, nq=67,
                                                                            nkv=83, d=48))
    assert captured.count(ffpa.LogLevel.DEBUG, "Nq=67") >= 1, captured.messages
    assert captured.count(ffpa.LogLevel.INFO, "plan: forward fp16 B=1 Hq=3 Hkv=1 Nq=67") == 1


def test_refused_calls_are_logged_as_info(captured, described):
    described.set_policy("log_level", "info")
    with pytest.raises(ffpa.BadParamError):
        described.set_policy("stages", 9)
    refusal = "FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND in ffpaSetPolicy"
    assert captured.count(ffpa.LogLevel.INFO, refusal) == 1


def test_replaced_and_removed_callbacks_are_not_called(described):
    first, second = Captured(), Captured()
    ffpa.set_log_callback(first)
    ffpa.set_log_callback(second)
    try:
        described.set_policy("log_level", "info")
        with pytest.raises(ffpa.BadParamError):
            described.set_policy("stages", 9)
    finally:
        ffpa.set_log_callback(None)
    described.set_policy("log_level", "off")  # nothing to standard error from here
    with pytest.raises(ffpa.BadParamError):
        described.set_policy("stages", 9)
    assert first.messages == [] and len(second.messages) == 1
