"""set_auto_unwrap_transformed_env / auto_unwrap_transformed_env: a scoped mode, never global."""

from __future__ import annotations

import contextvars
import threading

import pytest

from rl_envs import (
    PendulumEnv,
    StepCounter,
    TransformedEnv,
    auto_unwrap_transformed_env,
    set_auto_unwrap_transformed_env,
)


def _nested() -> TransformedEnv:
    return TransformedEnv(TransformedEnv(PendulumEnv(), StepCounter()), StepCounter())


def test_default_unwraps_and_reports_none_when_unset():
    assert auto_unwrap_transformed_env() is True
    assert auto_unwrap_transformed_env(allow_none=True) is None
    assert type(_nested().base_env) is PendulumEnv


@pytest.mark.parametrize("mode", [True, False])
def test_context_manager_scopes_the_mode(mode):
    with set_auto_unwrap_transformed_env(mode):
        assert auto_unwrap_transformed_env() is mode
        env = _nested()
    assert auto_unwrap_transformed_env(allow_none=True) is None
    assert (type(env.base_env) is PendulumEnv) is mode


def test_nested_scopes_restore_the_outer_mode():
    with set_auto_unwrap_transformed_env(False):
        with set_auto_unwrap_transformed_env(True):
            assert auto_unwrap_transformed_env() is True
        assert auto_unwrap_transformed_env() is False


def test_explicit_argument_wins_over_the_mode():
    with set_auto_unwrap_transformed_env(False):
        env = TransformedEnv(TransformedEnv(PendulumEnv(), StepCounter()), auto_unwrap=True)
    assert type(env.base_env) is PendulumEnv


def test_decorator_sets_the_mode_only_during_the_call():
    @set_auto_unwrap_transformed_env(False)
    def build():
        return auto_unwrap_transformed_env(), _nested()

    mode, env = build()
    assert mode is False
    assert type(env.base_env) is TransformedEnv
    assert auto_unwrap_transformed_env(allow_none=True) is None


def test_decorated_generator_keeps_the_mode_while_it_runs():
    @set_auto_unwrap_transformed_env(False)
    def gen():
        yield auto_unwrap_transformed_env()

    assert list(gen()) == [False]


def test_set_changes_only_the_current_context():
    def body():
        set_auto_unwrap_transformed_env(False).set()
        return auto_unwrap_transformed_env()

    assert contextvars.copy_context().run(body) is False
    assert auto_unwrap_transformed_env(allow_none=True) is None


def test_plain_construction_changes_nothing():
    set_auto_unwrap_transformed_env(False)
    assert auto_unwrap_transformed_env(allow_none=True) is None


def test_other_threads_do_not_see_the_mode():
    seen = []
    with set_auto_unwrap_transformed_env(False):
        thread = threading.Thread(target=lambda: seen.append(auto_unwrap_transformed_env()))
        thread.start()
        thread.join()
    assert seen == [True]


def test_non_bool_mode_is_refused():
    with pytest.raises(TypeError, match="takes a bool"):
        set_auto_unwrap_transformed_env("false")  # type: ignore[arg-type]
