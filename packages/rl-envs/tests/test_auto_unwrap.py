import os
import subprocess
import sys

import pytest

from rl_envs import (
    PendulumEnv,
    StepCounter,
    TransformedEnv,
    auto_unwrap_transformed_env,
    set_auto_unwrap_transformed_env,
)


def nested():
    return TransformedEnv(TransformedEnv(PendulumEnv(), StepCounter()))


@pytest.fixture(autouse=True)
def _no_setting(monkeypatch):
    monkeypatch.delenv("AUTO_UNWRAP_TRANSFORMED_ENV", raising=False)


def test_default_unwraps():
    assert auto_unwrap_transformed_env() is True
    assert auto_unwrap_transformed_env(allow_none=True) is None
    assert isinstance(nested().base_env, PendulumEnv)


def test_context_manager_nests_and_restores():
    with set_auto_unwrap_transformed_env(False):
        assert auto_unwrap_transformed_env() is False
        env = nested()
        assert isinstance(env.base_env, TransformedEnv)
        assert isinstance(env.base_env.transform, StepCounter)
        # an explicit argument wins
        assert isinstance(
            TransformedEnv(TransformedEnv(PendulumEnv()), auto_unwrap=True).base_env, PendulumEnv
        )
        with set_auto_unwrap_transformed_env(True):
            assert isinstance(nested().base_env, PendulumEnv)
        assert auto_unwrap_transformed_env() is False
    assert auto_unwrap_transformed_env(allow_none=True) is None


def test_decorator_and_set():
    @set_auto_unwrap_transformed_env(False)
    def build():
        return nested()

    assert isinstance(build().base_env, TransformedEnv)
    assert isinstance(nested().base_env, PendulumEnv)
    setting = set_auto_unwrap_transformed_env(False)
    setting.set()
    assert isinstance(nested().base_env, TransformedEnv)
    setting.__exit__(None, None, None)
    assert isinstance(nested().base_env, PendulumEnv)


def test_child_processes_see_the_setting():
    code = "from rl_envs import auto_unwrap_transformed_env as a; print(a())"
    with set_auto_unwrap_transformed_env(False):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ)
        )
    assert out.stdout.strip() == "False", out.stderr
