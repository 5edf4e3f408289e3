"""Status codes, categories and the exceptions that carry the library's message."""

import threading

import pytest

import ffpa
from ffpa import _errors


def test_categories_and_names():
    assert ffpa.Status.BAD_PARAM_NULL_POINTER.category is ffpa.Status.BAD_PARAM
    assert ffpa.Status.EXECUTION_FAILED_NON_FINITE.category is ffpa.Status.EXECUTION_FAILED
    assert ffpa.category(1001) is ffpa.Status.NOT_INITIALIZED
    assert ffpa.category(3999) is ffpa.Status.NOT_SUPPORTED
    assert ffpa.status_name(ffpa.Status.BAD_PARAM_STRIDE) == "FFPA_STATUS_BAD_PARAM_STRIDE"
    assert ffpa.status_name(4242) == "FFPA_STATUS_UNKNOWN"
    for status in ffpa.Status:
        assert ffpa.status_name(status) == "FFPA_STATUS_" + status.name


@pytest.mark.parametrize("status, error_class", [
    (ffpa.Status.NOT_INITIALIZED_NO_DEVICE, ffpa.NotInitializedError),
    (ffpa.Status.BAD_PARAM_OUT_OF_BOUND, ffpa.BadParamError),
    (ffpa.Status.NOT_SUPPORTED_SHAPE, ffpa.NotSupportedError),
    (ffpa.Status.INTERNAL_ERROR, ffpa.InternalError),
    (ffpa.Status.EXECUTION_FAILED_CUDA, ffpa.ExecutionFailedError),
])
def test_each_category_has_its_exception(status, error_class):
    error = error_class(status, "something")
    assert isinstance(error, ffpa.FfpaError)
    assert error.status is status and error.message == "something"
    assert str(error) == f"FFPA_STATUS_{status.name}: something"


def test_a_failing_call_raises_with_the_threads_message():
    with pytest.raises(ffpa.BadParamError) as caught:
        ffpa.TensorDesc(ffpa.DataType.FLOAT16, (1, 2, 3, 4), (24, 12, 4, 0))
    error = caught.value
    assert error.status is ffpa.Status.BAD_PARAM_STRIDE
    assert error.message.startswith("ffpaSetTensorDescriptor")
    assert error.message == _errors.last_error_message()
    assert isinstance(error, ValueError)  # a bad argument is a ValueError too


def test_unknown_codes_stay_integers():
    assert _errors.category(9001) == 9000
    error = ffpa.FfpaError(9001, "from a newer library")
    assert error.status == 9001 and "FFPA_STATUS_UNKNOWN" in str(error)
    with pytest.raises(ffpa.FfpaError) as caught:
        _errors.check(9001)
    assert type(caught.value) is ffpa.FfpaError


def test_long_messages_are_read_whole(monkeypatch):
    # The message quotes the malformed variable: longer than the first buffer tried.
    monkeypatch.setenv("FFPA_STAGES", "9" * 3000)
    with pytest.raises(ffpa.BadParamError) as caught:
        ffpa.Handle(device=ffpa.DeviceDesc())
    assert '"' + "9" * 3000 + '"' in caught.value.message
    assert len(caught.value.message) == ffpa.library().ffpaGetLastErrorString(None, 0)


def test_each_error_carries_the_message_of_its_own_call():
    failures = []

    def provoke(first):
        with ffpa.Handle(device=ffpa.DeviceDesc()) as handle:
            for value in range(first, first + 200):  # out of range, different in every call
                try:
                    handle.set_policy("stages", value)
                except ffpa.BadParamError as error:
                    if f"FFPA_POLICY_STAGES: {value} is out of range" not in error.message:
                        failures.append((value, error.message))

    threads = [threading.Thread(target=provoke, args=(5 + 1000 * i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
