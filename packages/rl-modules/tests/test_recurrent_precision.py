"""set_recurrent_matmul_precision / get_recurrent_matmul_precision: a scoped mode."""

from __future__ import annotations

import contextvars

import pytest
import torch

from rl_modules import get_recurrent_matmul_precision, set_recurrent_matmul_precision


@pytest.mark.parametrize("mode", ["ieee", "tf32", "tf32x3"])
def test_concrete_modes_scope(mode):
    before = get_recurrent_matmul_precision()
    with set_recurrent_matmul_precision(mode):
        assert get_recurrent_matmul_precision() == mode
    assert get_recurrent_matmul_precision() == before


@pytest.mark.parametrize(
    "torch_precision, expected_cpu", [("highest", "ieee"), ("high", "ieee"), ("medium", "ieee")]
)
def test_auto_follows_torch_and_presets_fall_back_without_tensor_cores(
    torch_precision, expected_cpu, monkeypatch
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision(torch_precision)
        for mode in (None, "auto"):
            with set_recurrent_matmul_precision(mode):
                assert get_recurrent_matmul_precision() == expected_cpu
    finally:
        torch.set_float32_matmul_precision(previous)


@pytest.mark.parametrize("preset, expected", [("fast", "tf32"), ("high-prec", "tf32x3")])
def test_presets_on_tensor_core_gpus(preset, expected, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: (9, 0))
    monkeypatch.setattr(torch.version, "hip", None)
    with set_recurrent_matmul_precision(preset):
        assert get_recurrent_matmul_precision() == expected
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: (7, 0))
    with set_recurrent_matmul_precision(preset):
        assert get_recurrent_matmul_precision() == "ieee"


def test_decorator_set_and_invalid_mode():
    @set_recurrent_matmul_precision("tf32")
    def inside():
        return get_recurrent_matmul_precision()

    assert inside() == "tf32"
    outside = get_recurrent_matmul_precision()

    def body():
        set_recurrent_matmul_precision("tf32x3").set()
        return get_recurrent_matmul_precision()

    assert contextvars.copy_context().run(body) == "tf32x3"
    assert get_recurrent_matmul_precision() == outside  # .set() stayed in that context
    with pytest.raises(ValueError, match="recurrent matmul precision"):
        set_recurrent_matmul_precision("fp16")
