"""step_mdp and partial resets against the contract, on the toy env."""

from __future__ import annotations

import torch
from rl_collectors_toy_env import BoxSpec, ToyEnv
from tensordict import TensorDict

from rl_collectors import Collector
from rl_collectors._env_step import env_step_and_maybe_reset, partial_reset, step_mdp


def test_step_mdp_moves_next_to_root_without_reward() -> None:
    td = TensorDict(
        {"observation": torch.zeros(2), "action": torch.ones(1), "loc": torch.ones(1),
         "next": {"observation": torch.ones(2), "reward": torch.ones(1), "done": torch.zeros(1, dtype=torch.bool)}},
        [],
    )  # fmt: skip
    out = step_mdp(td)
    # rl_envs.step_mdp / TorchRL: the old root's other entries ("loc") are carried over.
    assert sorted(out.keys()) == ["done", "loc", "observation"]
    assert (out["observation"] == 1).all()


def test_step_mdp_follows_the_contract_for_nested_and_custom_keys() -> None:
    td = TensorDict(
        {"observation": torch.zeros(2), ("agent", "act"): torch.ones(1), ("state", "h"): torch.full((3,), 2.0),
         "extra": torch.zeros(1), "score": torch.zeros(1),
         "next": {"observation": torch.ones(2), "score": torch.ones(1), "extra": torch.ones(1),
                  "done": torch.zeros(1, dtype=torch.bool)}},
        [],
    )  # fmt: skip
    out = step_mdp(td, reward_keys=("score",), action_keys=(("agent", "act"),))
    assert set(out.keys(True, True)) == {"observation", "extra", ("state", "h"), "done"}
    assert (out["extra"] == 1).all(), "an entry of 'next' wins over the root's"
    assert (out["state", "h"] == 2).all()


def test_partial_reset_touches_only_masked_entries() -> None:
    env = ToyEnv((3,), min_len=50, span=1)
    root = env.reset()
    for _ in range(2):
        root = env.step(root.set("action", torch.zeros(3, 1)))["next"].exclude("reward")
    mask = torch.tensor([[True], [False], [True]])
    out = partial_reset(env, root, mask)
    assert out["observation"][:, 0].tolist() == [0, 2, 0]
    assert out["observation"][:, 2].tolist() == [1, 0, 1]  # episode numbers


def test_fallback_resets_done_sub_envs() -> None:
    env = ToyEnv((2,), min_len=2, span=1)
    root = env.reset()
    steps = []
    for _ in range(4):
        transition, root = env_step_and_maybe_reset(
            env, root.set("action", torch.zeros(2, 1)), ("reward",), False
        )
        steps.append(
            (transition["next", "done"].squeeze(-1).tolist(), root["observation"][:, 0].tolist())
        )
    assert steps == [([False, False], [1, 1]), ([True, True], [0, 0])] * 2


def test_step_mdp_merges_a_root_sub_tensordict_with_next() -> None:
    td = TensorDict(
        {"rs": {"h": torch.zeros(2), "c": torch.zeros(2)}, "action": torch.ones(1),
         "next": {"rs": {"h": torch.ones(2)}, "observation": torch.ones(2)}},
        [],
    )  # fmt: skip
    out = step_mdp(td)
    assert set(out.keys(True, True)) == {("rs", "h"), ("rs", "c"), "observation"}
    assert (out["rs", "h"] == 1).all() and (out["rs", "c"] == 0).all()


class _GroupDoneEnv:
    """Batch ``[2]``, one group ``"agents"`` of 2 with its own done flags and no root
    ``"done"`` (TorchRL's nested-done layout). Sub-env ``i`` ends after ``3 + i`` steps.
    Like TorchRL's mock envs, it refuses a root ``"_reset"``: resets come per group."""

    batch_size = torch.Size([2])
    device = torch.device("cpu")
    done_keys = (("agents", "done"), ("agents", "terminated"))
    reset_keys = (("agents", "_reset"),)

    def __init__(self) -> None:
        self.t = torch.zeros(2, dtype=torch.int64)
        self.action_spec = BoxSpec((2, 1))
        self.reset_flags: list[torch.Tensor] = []

    def _group(self, done: torch.Tensor) -> TensorDict:
        obs = self.t.float().reshape(2, 1, 1).expand(2, 2, 1).clone()
        return TensorDict({"obs": obs, "done": done, "terminated": done.clone()}, [2, 2])

    def reset(self, tensordict: TensorDict | None = None) -> TensorDict:
        if tensordict is not None and "_reset" in tensordict:
            raise AssertionError("a root '_reset' reached an env without a root 'done'")
        flag = torch.ones(2, 2, 1, dtype=torch.bool)
        if tensordict is not None and ("agents", "_reset") in tensordict.keys(True):
            flag = tensordict.get(("agents", "_reset"))
            self.reset_flags.append(flag.clone())
        self.t[flag.reshape(2, -1).any(-1)] = 0
        return TensorDict({"agents": self._group(torch.zeros(2, 2, 1, dtype=torch.bool))}, [2])

    def step(self, tensordict: TensorDict) -> TensorDict:
        self.t += 1
        done = (self.t >= torch.tensor([3, 4])).reshape(2, 1, 1).expand(2, 2, 1).clone()
        nxt = TensorDict({"agents": self._group(done), "reward": torch.zeros(2, 1)}, [2])
        return tensordict.set("next", nxt)


def test_envs_without_a_root_done_are_reset_per_group() -> None:
    env = _GroupDoneEnv()
    batch = Collector(env, None, frames_per_batch=16, total_frames=16).next()
    # each sub-env restarts its count after its episode: 0 1 2 0 1 2 0 1 / 0 1 2 3 0 1 2 3
    want = torch.tensor([[0, 1, 2, 0, 1, 2, 0, 1], [0, 1, 2, 3, 0, 1, 2, 3]]).float()
    assert torch.equal(batch["agents", "obs"][:, :, 0, 0], want)
    # the group's own done flags were the reset request (sub-env 0 alone, first)
    assert torch.equal(env.reset_flags[0][:, 0, 0], torch.tensor([True, False]))
