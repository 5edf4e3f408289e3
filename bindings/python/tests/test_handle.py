"""Handles: creation with and without a device, the described device, stream, closing."""

import pytest

import ffpa
from conftest import A100


def test_no_gpu_handle_creation_fails_with_the_librarys_message():
    try:
        handle = ffpa.Handle()
    except ffpa.NotInitializedError as error:
        assert error.status is ffpa.Status.NOT_INITIALIZED_NO_DEVICE
        assert error.message.startswith("ffpaCreate: ")
        return
    handle.close()
    pytest.skip("a GPU is present: ffpa.Handle() succeeded")


def test_described_device_round_trip(described):
    assert described.device == A100
    assert described.stream == 0
    described.stream = 0x7f00
    assert described.stream == 0x7f00  # stored, never used: this handle cannot execute
    described.stream = None
    assert described.stream == 0


def test_long_device_names_are_cut():
    with ffpa.Handle(device=ffpa.DeviceDesc(name="n" * 400)) as handle:
        assert handle.device.name == "n" * 255


@pytest.mark.parametrize("field, value, status, fragment", [
    ("sm_count", 0, ffpa.Status.BAD_PARAM_OUT_OF_BOUND, "smCount"),
    ("shared_mem_per_block_optin", 1024, ffpa.Status.BAD_PARAM_OUT_OF_BOUND,
     "sharedMemPerBlockOptin"),
    ("sm_version", 75, ffpa.Status.NOT_SUPPORTED_ARCH_MISMATCH, "75"),
])
def test_described_fields_are_checked(field, value, status, fragment):
    device = ffpa.DeviceDesc(**{**A100.__dict__, field: value})
    with pytest.raises(ffpa.FfpaError) as caught:
        ffpa.Handle(device=device)
    assert caught.value.status is status
    assert fragment in caught.value.message


def test_closed_handles_refuse_calls():
    handle = ffpa.Handle(device=A100)
    with handle:
        pass
    handle.close()  # twice is fine
    with pytest.raises(ffpa.BadParamError) as caught:
        handle.plan_cache_stats()
    assert caught.value.status is ffpa.Status.BAD_PARAM_NULL_POINTER
