"""Bad inputs get errors that name the argument; backend selection never fails on "auto"."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from kernels_test_backends import needs_triton

from rl_kernels import _backend, scans


def _gae_args(shape=(2, 5, 1)):
    v = torch.zeros(shape)
    done = torch.zeros(shape, dtype=torch.bool)
    return [0.9, 0.8, v, v.clone(), v.clone(), done, done.clone()]


def test_mismatched_shapes_name_the_argument():
    args = _gae_args()
    args[4] = torch.zeros(2, 5)  # reward without its feature dim
    with pytest.raises(ValueError, match=r"reward has shape \(2, 5\).*unsqueeze"):
        scans.generalized_advantage_estimate(*args)
    args = _gae_args()
    args[5] = torch.zeros(2, 4, 1, dtype=torch.bool)
    with pytest.raises(ValueError, match="done has shape"):
        scans.generalized_advantage_estimate(*args)


def test_non_bool_done_is_refused():
    args = _gae_args()
    args[5] = torch.zeros(2, 5, 1)
    with pytest.raises(TypeError, match=r"done must be a bool tensor.*done.bool\(\)"):
        scans.generalized_advantage_estimate(*args)
    args = _gae_args()
    args[6] = torch.zeros(2, 5, 1, dtype=torch.long)
    with pytest.raises(TypeError, match="terminated must be a bool tensor"):
        scans.generalized_advantage_estimate(*args)


def test_integer_reward_is_refused():
    args = _gae_args()
    args[4] = torch.zeros(2, 5, 1, dtype=torch.long)
    with pytest.raises(TypeError, match="reward must be a floating-point tensor"):
        scans.generalized_advantage_estimate(*args)


def test_zero_steps_and_bad_time_dim():
    with pytest.raises(ValueError, match="no time steps"):
        scans.generalized_advantage_estimate(*_gae_args((2, 0, 1)))
    with pytest.raises(ValueError, match="time_dim=3 is out of range"):
        scans.generalized_advantage_estimate(*_gae_args(), time_dim=3)
    with pytest.raises(ValueError, match="unsqueeze"):
        scans.reward2go(torch.ones(5), torch.zeros(5, dtype=torch.bool))


def test_non_tensor_and_bad_discount():
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor"):
        scans.discounted_cumsum([1.0, 2.0], 0.5)
    with pytest.raises(ValueError, match="discount of shape"):
        scans.discounted_cumsum(torch.ones(2, 5, 1), torch.ones(3))


def test_unknown_backend():
    with pytest.raises(ValueError, match="backend must be one of"):
        scans.generalized_advantage_estimate(*_gae_args(), backend="cuda")


@needs_triton
def test_triton_on_cpu_without_interpreter_is_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match=r"needs CUDA tensors.*TRITON_INTERPRET=1"):
        scans.generalized_advantage_estimate(*_gae_args(), backend="triton")
    # "auto" on CPU never needs Triton
    adv, _ = scans.generalized_advantage_estimate(*_gae_args(), backend="auto")
    assert adv.shape == (2, 5, 1)


def test_triton_missing(monkeypatch):
    monkeypatch.setattr(_backend, "triton_available", lambda: False)
    with pytest.raises(ImportError, match=r"rl-kernels\[triton\]"):
        _backend.resolve_backend("triton", torch.device("cpu"))
    assert _backend.resolve_backend("auto", torch.device("cuda")) == "torch"


def test_auto_prefers_triton_on_cuda_and_falls_back_once(monkeypatch):
    monkeypatch.setattr(_backend, "_broken", set())
    monkeypatch.setattr(_backend, "triton_available", lambda: True)
    assert _backend.resolve_backend("auto", torch.device("cuda")) == "triton"
    assert _backend.resolve_backend("auto", torch.device("cpu")) == "torch"

    def failing():
        raise RuntimeError("no compiler")

    with pytest.warns(RuntimeWarning, match="no compiler"):
        assert _backend.run_with_fallback("auto", "triton", failing, lambda: 1) == 1
    assert _backend.resolve_backend("auto", torch.device("cuda")) == "torch"
    with pytest.raises(RuntimeError, match="no compiler"):
        _backend.run_with_fallback("triton", "triton", failing, lambda: 1)


def test_package_works_without_triton():
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch, rl_kernels\n"
        "from rl_kernels import scans, _backend\n"
        "assert not _backend.triton_available()\n"
        "v = torch.zeros(2, 3, 1); d = torch.zeros(2, 3, 1, dtype=torch.bool)\n"
        "adv, _ = scans.generalized_advantage_estimate(0.9, 0.9, v, v, v + 1, d)\n"
        "assert adv.shape == (2, 3, 1)\n"
        "try:\n"
        "    scans.generalized_advantage_estimate(0.9, 0.9, v, v, v, d, backend='triton')\n"
        "except ImportError as err:\n"
        "    assert 'rl-kernels[triton]' in str(err)\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
