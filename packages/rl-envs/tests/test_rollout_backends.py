"""The differential harness: every rollout backend is bit-equal to the generic loop.

For each env x policy x mode x backend of the env's class, two rollouts run from the
same seeds (torch's global RNG and the env's): one with ``backend="generic"`` (the
reference loop), one with the backend named. Where the backend supports the call, every
leaf of both results must be ``torch.equal`` (same keys, shapes, dtypes, values), and so
must a second rollout that continues from the first one's last step with
``auto_reset=False`` (the collectors' call), which also checks that the backend leaves
the env in the state the generic loop leaves it. ``test_backends_cover_their_cases``
pins which combinations each backend must support, so the harness cannot pass by
skipping everything.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn

from rl_envs import (
    Compose,
    GymEnv,
    OneHot,
    ParallelEnv,
    PendulumEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    step_mdp,
)
from rl_envs._rollout import fast_policy

STEPS = 25


def _short_gym(name: str, steps: int) -> GymEnv:
    return GymEnv(name, max_episode_steps=steps)


ENVS: dict[str, Callable[[], Any]] = {
    "pendulum": lambda: PendulumEnv(max_episode_steps=7),
    "pendulum_batch": lambda: PendulumEnv(batch_size=[3], max_episode_steps=7),
    "gym_cartpole": lambda: GymEnv("CartPole-v1"),
    "gym_cartpole_categorical": lambda: GymEnv("CartPole-v1", categorical_action_encoding=True),
    "gym_pendulum": lambda: _short_gym("Pendulum-v1", 7),
    "gym_frame_skip": lambda: GymEnv("CartPole-v1", frame_skip=2),
    "serial": lambda: SerialEnv(2, functools.partial(_short_gym, "Pendulum-v1", 6)),
    "parallel": lambda: ParallelEnv(2, functools.partial(_short_gym, "Pendulum-v1", 6)),
    "transformed_pendulum": lambda: TransformedEnv(
        PendulumEnv(batch_size=[2], max_episode_steps=7), Compose(StepCounter(), RewardSum())
    ),
    "transformed_gym": lambda: TransformedEnv(GymEnv("CartPole-v1"), StepCounter()),
}

BACKENDS = {
    "pendulum": ["pendulum"],
    "pendulum_batch": ["pendulum"],
    "gym_cartpole": ["gym"],
    "gym_cartpole_categorical": ["gym"],
    "gym_pendulum": ["gym"],
    "gym_frame_skip": ["gym"],
    "serial": ["batched"],
    "parallel": ["batched"],
    "transformed_pendulum": ["transformed"],
    "transformed_gym": ["transformed"],
}

MODES = {
    "any": {"break_when_any_done": True},
    "none": {"break_when_any_done": False},
    "all": {"break_when_all_done": True},
}
POLICIES = ("random", "td_module", "callable")


class _Net(nn.Module):
    """observation -> action inside the action spec (one-hot, index or box)."""

    def __init__(self, n_obs: int, spec: Any) -> None:
        super().__init__()
        self.spec = spec
        if isinstance(spec, OneHot):
            n_out = spec.shape[-1]
        elif spec.dtype == torch.int64:  # categorical index
            n_out = int(spec.space.n)
        else:
            n_out = spec.shape[-1]
        self.linear = nn.Linear(n_obs, n_out)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.linear(obs.to(torch.float32))
        if isinstance(self.spec, OneHot):
            return nn.functional.one_hot(out.argmax(-1), out.shape[-1])
        if self.spec.dtype == torch.int64:
            return out.argmax(-1)
        return out.tanh() * self.spec.space.high


def _policy(kind: str, env: Any) -> Any:
    if kind == "random":
        return None
    torch.manual_seed(1)
    net = _Net(env.observation_spec["observation"].shape[-1], env.action_spec)
    if kind == "td_module":
        return TensorDictModule(net, ["observation"], ["action"])

    def policy(td: TensorDictBase) -> TensorDictBase:
        # a policy writing an extra root entry it reads back on the next call
        count = td.get("count", None)
        td.set("count", torch.zeros(*td.batch_size, 1) if count is None else count + 1)
        td.set("action", net(td.get("observation")))
        return td

    return policy


@pytest.fixture(scope="module")
def envs() -> Iterator[dict[str, Any]]:
    made: dict[str, Any] = {}
    yield made
    for env in made.values():
        env.close()


def _env(envs: dict[str, Any], name: str) -> Any:
    if name not in envs:
        envs[name] = ENVS[name]()
    return envs[name]


def _rollouts(env: Any, policy: Any, mode: str, backend: str) -> list[TensorDictBase]:
    """A rollout from a seeded reset, then one continuing from its last step.

    The continuation runs with ``backend="auto"`` unless ``backend`` is ``"generic"``:
    its root (e.g. one holding a policy's entry) may not suit the backend, and what it
    checks is that the first rollout left the env where the generic loop leaves it.
    """
    torch.manual_seed(0)
    env.set_seed(0)
    with torch.no_grad():
        first = env.rollout(STEPS, policy, backend=backend, **MODES[mode])
        root = step_mdp(first[..., -1].clone())
        second = env.rollout(
            STEPS,
            policy,
            backend="generic" if backend == "generic" else "auto",
            auto_reset=False,
            tensordict=root,
            **MODES[mode],
        )
    return [first, second]


def _assert_bit_equal(got: TensorDictBase, want: TensorDictBase, where: str) -> None:
    assert got.batch_size == want.batch_size, where
    got_keys = set(got.keys(True, True))
    want_keys = set(want.keys(True, True))
    assert got_keys == want_keys, f"{where}: keys {got_keys ^ want_keys} differ"
    for key in want_keys:
        a, b = got.get(key), want.get(key)
        assert a.dtype == b.dtype and torch.equal(a, b), f"{where}: entry {key} differs"


def _supported(env: Any, policy: Any, mode: str, backend: str) -> bool:
    """Whether ``backend`` supports this call from a fresh reset (the harness's first call)."""
    (chosen,) = [b for b in type(env).rollout_backends if b.name == backend]
    torch.manual_seed(0)
    env.set_seed(0)
    root = env.reset()
    mode_name = mode if not (mode == "all" and not env.batch_size) else "any"
    return chosen.supports(env, root, fast_policy(policy) if policy else None, mode_name)


CASES = [
    (env, policy, mode, backend)
    for env, names in BACKENDS.items()
    for backend in names
    for policy in POLICIES
    for mode in MODES
]


@pytest.mark.parametrize("env_name,policy_kind,mode,backend", CASES)
def test_backend_bit_equal_to_generic(
    envs: dict[str, Any], env_name: str, policy_kind: str, mode: str, backend: str
) -> None:
    env = _env(envs, env_name)
    policy = _policy(policy_kind, env)
    if not _supported(env, policy, mode, backend):
        with pytest.raises(ValueError, match="does not support"):
            _rollouts(env, policy, mode, backend)
        return
    want = _rollouts(env, policy, mode, "generic")
    got = _rollouts(env, policy, mode, backend)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        _assert_bit_equal(g, w, f"{env_name}/{policy_kind}/{mode}/{backend} rollout {i}")
    auto = _rollouts(env, policy, mode, "auto")
    for i, (a, w) in enumerate(zip(auto, want, strict=True)):
        _assert_bit_equal(a, w, f"{env_name}/{policy_kind}/{mode}/auto rollout {i}")


# Which calls each backend must take (so the harness above compares, not skips).
MUST_SUPPORT = [
    ("pendulum", "random", "any"),
    ("pendulum_batch", "random", "none"),
    ("gym_cartpole", "random", "none"),
    ("gym_cartpole", "td_module", "any"),
    ("gym_cartpole_categorical", "td_module", "none"),
    ("gym_pendulum", "callable", "none"),
    ("gym_frame_skip", "random", "none"),
    ("serial", "random", "none"),
    ("parallel", "random", "any"),
    ("transformed_pendulum", "random", "none"),
    ("transformed_gym", "random", "any"),
]


@pytest.mark.parametrize("env_name,policy_kind,mode", MUST_SUPPORT)
def test_backends_cover_their_cases(
    envs: dict[str, Any], env_name: str, policy_kind: str, mode: str
) -> None:
    env = _env(envs, env_name)
    (backend,) = BACKENDS[env_name]
    assert _supported(env, _policy(policy_kind, env), mode, backend)


def test_unknown_backend_and_stepwise_calls_raise() -> None:
    env = PendulumEnv()
    with pytest.raises(ValueError, match=r"no such rollout backend; expected one of \['auto'"):
        env.rollout(3, backend="numba")
    with pytest.raises(ValueError, match="takes no callback"):
        env.rollout(3, callback=lambda e, td: None, backend="pendulum")
    with pytest.raises(ValueError, match="does not support"):
        env.rollout(3, lambda td: td.set("action", torch.zeros(1)), backend="pendulum")


def test_subclass_overriding_a_hook_gets_the_generic_loop() -> None:
    calls = []

    class Counting(PendulumEnv):
        def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
            calls.append(1)
            return super()._step(tensordict)

    Counting().rollout(4, break_when_any_done=False)
    assert len(calls) == 4
