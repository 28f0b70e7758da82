"""Tiny networks and data for the rl-objectives tests: torch.nn and tensordict.nn only."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D
from torch import nn

OBS, ACT, N_ACT = 3, 2, 4


class TanhNormal(D.TransformedDistribution):
    """Independent Normal squashed by tanh; caches the pre-tanh sample so log_prob is exact."""

    def __init__(self, loc: torch.Tensor, scale: torch.Tensor) -> None:
        base = D.Independent(D.Normal(loc, scale), 1)
        super().__init__(base, [D.TanhTransform(cache_size=1)])


class QNet(nn.Module):
    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS + ACT, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, act], -1))


def make_tanh_actor(hidden: int = 8) -> ProbabilisticTensorDictSequential:
    body = nn.Sequential(
        nn.Linear(OBS, hidden), nn.Tanh(), nn.Linear(hidden, 2 * ACT), NormalParamExtractor()
    )
    return ProbabilisticTensorDictSequential(
        TensorDictModule(body, ["observation"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(
            ["loc", "scale"], ["action"], distribution_class=TanhNormal, return_log_prob=True
        ),
    )


def make_normal_actor(hidden: int = 8) -> ProbabilisticTensorDictSequential:
    def normal(loc, scale):
        return D.Independent(D.Normal(loc, scale), 1)

    body = nn.Sequential(
        nn.Linear(OBS, hidden), nn.Tanh(), nn.Linear(hidden, 2 * ACT), NormalParamExtractor()
    )
    return ProbabilisticTensorDictSequential(
        TensorDictModule(body, ["observation"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(
            ["loc", "scale"], ["action"], distribution_class=normal, return_log_prob=True
        ),
    )


def make_categorical_actor(hidden: int = 8) -> ProbabilisticTensorDictSequential:
    body = nn.Sequential(nn.Linear(OBS, hidden), nn.Tanh(), nn.Linear(hidden, N_ACT))
    return ProbabilisticTensorDictSequential(
        TensorDictModule(body, ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(
            ["logits"], ["action"], distribution_class=D.Categorical, return_log_prob=True
        ),
    )


def make_value(hidden: int = 8, out_key: str = "state_value") -> TensorDictModule:
    return TensorDictModule(
        nn.Sequential(nn.Linear(OBS, hidden), nn.Tanh(), nn.Linear(hidden, 1)),
        ["observation"],
        [out_key],
    )


def make_qvalue() -> TensorDictModule:
    return TensorDictModule(QNet(), ["observation", "action"], ["state_action_value"])


def make_action_value(n: int = N_ACT) -> TensorDictModule:
    return TensorDictModule(
        nn.Sequential(nn.Linear(OBS, 8), nn.Tanh(), nn.Linear(8, n)),
        ["observation"],
        ["action_value"],
    )


def transitions(batch: int = 16, *, action: str = "continuous", seed: int = 0) -> TensorDict:
    """Replay-style transitions with a few terminations and truncations."""
    g = torch.Generator().manual_seed(seed)
    terminated = torch.rand(batch, 1, generator=g) < 0.2
    truncated = (torch.rand(batch, 1, generator=g) < 0.2) & ~terminated
    if action == "continuous":
        act = torch.rand(batch, ACT, generator=g) * 1.8 - 0.9
    elif action == "categorical":
        act = torch.randint(N_ACT, (batch,), generator=g)
    else:
        act = nn.functional.one_hot(torch.randint(N_ACT, (batch,), generator=g), N_ACT).bool()
    return TensorDict(
        {
            "observation": torch.randn(batch, OBS, generator=g),
            "action": act,
            ("next", "observation"): torch.randn(batch, OBS, generator=g),
            ("next", "reward"): torch.randn(batch, 1, generator=g),
            ("next", "terminated"): terminated,
            ("next", "truncated"): truncated,
            ("next", "done"): terminated | truncated,
        },
        batch_size=[batch],
    )
