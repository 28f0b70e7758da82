"""Small local stand-ins for the components a Trainer drives (no sibling package)."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn.probabilistic import interaction_type  # where tensordict 0.14 has it too

from rl_trainers import FakeCollector

OBS_DIM = 4
SPEC = {
    "observation": ((OBS_DIM,), torch.float32),
    "action": {"shape": (1,), "dtype": torch.int64, "low": 0, "high": 2},
}


def make_collector(frames_per_batch: int = 16, seed: int = 0, **kwargs: Any) -> FakeCollector:
    return FakeCollector(SPEC, frames_per_batch=frames_per_batch, seed=seed, **kwargs)


class RegressionLoss(torch.nn.Module):
    """A two-term loss: regress the reward from the observation, plus a small L2 penalty."""

    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(OBS_DIM, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
        )

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        pred = self.net(td["observation"])
        return TensorDict(
            loss_value=(pred - td["next", "reward"]).pow(2).mean(),
            loss_l2=1e-3 * sum(p.pow(2).sum() for p in self.parameters()),
            pred_mean=pred.detach().mean(),
        )


class ListBuffer:
    """A minimal replay buffer: extend / sample (global torch RNG) / state_dict."""

    def __init__(self, batch_size: int = 8) -> None:
        self.batch_size = batch_size
        self.data: TensorDictBase | None = None
        self.priority_updates = 0

    def extend(self, td: TensorDictBase) -> None:
        td = td.reshape(-1)
        self.data = td.clone() if self.data is None else torch.cat([self.data, td])

    def sample(self, batch_size: int | None = None) -> TensorDictBase:
        n = self.batch_size if batch_size is None else batch_size
        return self.data[torch.randint(len(self.data), (n,))]

    def update_tensordict_priority(self, td: TensorDictBase) -> None:
        self.priority_updates += 1

    def state_dict(self) -> dict[str, Any]:
        if self.data is None:
            return {"data": None}
        return {"data": self.data.to_dict(), "n": len(self.data)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.data = None
        if state["data"] is not None:
            self.data = TensorDict.from_dict(state["data"], batch_size=[state["n"]])


class ToyEnv:
    """An env stand-in with TorchRL's ``rollout`` signature: reward 1 a step, done every ``period``."""

    def __init__(self, period: int = 5, batch: tuple[int, ...] = ()) -> None:
        self.period = period
        self.batch = batch
        self.calls: list[dict[str, Any]] = []

    def rollout(self, max_steps: int, policy: Any = None, **kwargs: Any) -> TensorDictBase:
        self.calls.append(kwargs)
        obs = torch.zeros(*self.batch, max_steps, OBS_DIM)
        td = TensorDict({"observation": obs}, [*self.batch, max_steps])
        if policy is not None:
            td = policy(td)
        done = (torch.arange(max_steps) % self.period == self.period - 1).expand(
            *self.batch, max_steps
        )
        td.set(("next", "reward"), torch.ones(*self.batch, max_steps, 1))
        td.set(("next", "done"), done.unsqueeze(-1).clone())
        return td


class RecordingPolicy(torch.nn.Module):
    """Writes an action and remembers the interaction type and mode it ran under."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(OBS_DIM, 1)
        self.seen: list[tuple[Any, bool, bool]] = []

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        self.seen.append((interaction_type(), self.training, torch.is_inference_mode_enabled()))
        td.set("action", self.lin(td["observation"]))
        return td


def make_regression_net(hidden: int = 16) -> torch.nn.Module:
    """The same initial network in every process (its own seed)."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(OBS_DIM, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
    )


class DDPRegression(torch.nn.Module):
    """Mean-squared reward regression around any network (plain or DDP-wrapped)."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        return TensorDict(
            loss_value=(self.net(td["observation"]) - td["next", "reward"]).pow(2).mean()
        )


class ConcatCollector:
    """The batches of several collectors concatenated: what N data-parallel ranks see together."""

    def __init__(self, *collectors: FakeCollector) -> None:
        self.collectors = collectors

    def __iter__(self):
        for batches in zip(*self.collectors, strict=False):
            yield torch.cat(list(batches))
