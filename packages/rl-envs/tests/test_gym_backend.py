"""``set_gym_backend`` / ``gym_backend``: Gymnasium accepted, other backends refused."""

from __future__ import annotations

import gymnasium
import pytest

from rl_envs import GymEnv, gym_backend, set_gym_backend


@pytest.mark.parametrize("backend", ["gymnasium", gymnasium, lambda: gymnasium])
def test_gymnasium_backend_as_context_manager(backend: object) -> None:
    with set_gym_backend(backend):
        assert gym_backend() is gymnasium
        assert GymEnv("CartPole-v1").rollout(3).batch_size == (3,)


def test_decorator_and_set() -> None:
    @set_gym_backend("gymnasium")
    def spaces() -> object:
        return gym_backend("spaces")

    assert spaces() is gymnasium.spaces
    set_gym_backend("gymnasium").set()
    assert gym_backend("wrappers") is gymnasium.wrappers


@pytest.mark.parametrize("backend", ["gym", "my_gym"])
def test_other_backends_are_refused(backend: str) -> None:
    with pytest.raises(ValueError, match="only Gymnasium is supported"):
        set_gym_backend(backend)


def test_callable_returning_another_module_is_refused_when_used() -> None:
    import math

    ctx = set_gym_backend(lambda: math)
    with pytest.raises(ValueError, match="'math'"), ctx:
        pass
    with pytest.raises(TypeError, match="string, a module or a callable"):
        set_gym_backend(3)


def test_also_importable_from_the_gym_module_as_in_torchrl() -> None:
    from rl_envs.libs import gym as gym_module

    assert gym_module.gym_backend is gym_backend and callable(gym_module.gym_backend)
    assert gym_module.set_gym_backend is set_gym_backend
