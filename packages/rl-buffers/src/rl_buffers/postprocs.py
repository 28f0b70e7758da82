"""Batch post-processing for collectors: n-step returns and dense rewards (TorchRL's ``torchrl.data.postprocs``)."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import nn

NestedKey = str | tuple[str, ...]


def _steps_left(done: torch.Tensor) -> torch.Tensor:
    """``[*B, T]`` count of steps from ``t`` to the end of its trajectory segment, inclusive.

    A segment ends at a done step or at the batch's last step.
    """
    T = done.shape[-1]
    ends = done.clone()
    ends[..., -1] = True
    time = torch.arange(T, device=done.device).expand_as(done)
    end_index = torch.where(ends, time, torch.full_like(time, T))
    end_index = end_index.flip(-1).cummin(-1).values.flip(-1)
    return end_index - time + 1


class MultiStep(nn.Module):
    """n-step returns for a collected ``[*B, T]`` batch (Sutton, 1988, "Learning to predict
    by the methods of temporal differences"), as TorchRL's ``MultiStep`` postproc.

    For each step ``t`` let ``k_t = min(n_steps, steps left in its segment) - 1``, a segment
    ending at a done step or at the batch's end. Then:

    - ``("next", reward) = sum_{j <= k_t} gamma^j r_{t+j}`` (the one-step reward moves to
      ``("next", "original_reward")``);
    - every other ``"next"`` entry but the done flags is the one of step ``t + k_t``;
    - ``"steps_to_next_obs" = k_t + 1``, ``"gamma" = gamma ** (k_t + 1)`` (the discount of
      the bootstrap value) and ``"nonterminal" = k_t != 0`` (``False`` where
      ``("collector", "mask")`` is ``False``).

    Trajectories cut by the batch's end get shorter sums (TorchRL's note: use it in a
    collector, knowing the last steps of a batch are truncated).

    Args:
        gamma: the discount, in ``(0, 1]``.
        n_steps: the look-ahead, ``>= 1`` (``1``: rewards unchanged).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": torch.arange(4.0), "next": {"obs": torch.arange(1.0, 5.0),
        ...     "reward": torch.ones(4, 1), "done": torch.zeros(4, 1, dtype=torch.bool)}}, [4])
        >>> out = MultiStep(gamma=0.5, n_steps=2)(td)
        >>> out["next", "reward"].flatten().tolist(), out["next", "obs"].tolist()
        ([1.5, 1.5, 1.5, 1.0], [2.0, 3.0, 4.0, 4.0])
    """

    def __init__(self, gamma: float, n_steps: int) -> None:
        super().__init__()
        if n_steps <= 0:
            raise ValueError(f"n_steps must be a positive integer, got {n_steps}.")
        if not 0 < gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], got {gamma}.")
        self.gamma = gamma
        self.n_steps = n_steps
        self.done_key: NestedKey = "done"
        self.done_keys: tuple[NestedKey, ...] = ("done", "terminated", "truncated")
        self.reward_keys: tuple[NestedKey, ...] = ("reward",)
        self.mask_key: NestedKey | None = ("collector", "mask")

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Returns a shallow copy of ``tensordict`` (batch ``[*B, T]``, time last) rewritten."""
        td = tensordict.clone(False)
        done = td.get(("next", self.done_key), None)
        if done is None:
            raise KeyError(
                f"MultiStep reads ('next', {self.done_key!r}); the batch has keys "
                f"{sorted(map(str, td.get('next', td).keys()))}."
            )
        if done.shape != td.shape:
            if done.shape[-1] == 1 and done.shape[:-1] == td.shape:
                done = done.squeeze(-1)
            else:
                raise ValueError(
                    f"('next', {self.done_key!r}) has shape {tuple(done.shape)}; MultiStep expects "
                    f"the batch shape {tuple(td.shape)} (time last), optionally followed by 1."
                )
        done = done.bool()
        T = td.shape[-1]
        k = _steps_left(done).clamp_max(self.n_steps) - 1
        nxt = td.get("next")
        gathered = nxt.exclude(*self.reward_keys, *self.done_keys).gather(
            -1, torch.arange(T, device=k.device).expand_as(k) + k
        )
        for key in self.reward_keys:
            reward = nxt.get(key)
            nxt.set("original_reward", reward)
            nxt.set(key, self._sum_rewards(reward, k))
        nxt.update(gathered)
        td.set("steps_to_next_obs", k + 1)
        td.set("gamma", self.gamma ** (k + 1))
        nonterminal = k != 0
        mask = td.get(self.mask_key, None) if self.mask_key is not None else None
        if mask is not None:
            nonterminal = nonterminal & mask.reshape(nonterminal.shape)
        td.set("nonterminal", nonterminal)
        return td

    def _sum_rewards(self, reward: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """``sum_{j <= k_t} gamma^j r_{t+j}`` along the time dim of ``k`` (reward may have
        trailing dims)."""
        time_dim = k.ndim - 1
        extra = reward.ndim - k.ndim
        k = k.reshape(*k.shape, *([1] * extra))
        padded = torch.cat(
            [
                reward,
                reward.new_zeros(
                    *reward.shape[:time_dim], self.n_steps, *reward.shape[time_dim + 1 :]
                ),
            ],
            dim=time_dim,
        )
        T = reward.shape[time_dim]
        total = torch.zeros_like(reward)
        for j in range(self.n_steps):
            shifted = padded.narrow(time_dim, j, T)
            total = total + torch.where(k >= j, shifted * self.gamma**j, torch.zeros_like(shifted))
        return total


class DensifyReward(nn.Module):
    """Gives every step of a trajectory its reward-to-go, for sparse rewards paid at ``done``.

    ``("next", reward_key_out)[t] = sum_{j >= 0} discount^j r_{t+j}``, the sum stopping at
    the first done step from ``t`` on (or at the batch's end): each step of an episode that
    pays only at its end gets that final reward. Time runs along ``time_dim`` of the batch
    (default: the last batch dim). Intermediate rewards are summed too. The TensorDict is
    updated in place and returned.

    Args:
        reward_key: the reward entry under ``"next"``. Default: ``"reward"``.
        done_key: the done entry under ``"next"``. Default: ``"done"``.
        reward_key_out: where the result goes under ``"next"`` (default: ``reward_key``).
        time_dim: the batch dim along which time runs. Default: ``-1``.
        discount: the per-step discount. Default: ``1.0``.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({("next", "reward"): torch.tensor([[0.0], [2.0], [0.0], [5.0]]),
        ...                  ("next", "done"): torch.tensor([[False], [True], [False], [False]])}, [4])
        >>> DensifyReward()(td)["next", "reward"].squeeze(-1).tolist()
        [2.0, 2.0, 5.0, 5.0]
    """

    def __init__(
        self,
        reward_key: NestedKey = "reward",
        done_key: NestedKey = "done",
        reward_key_out: NestedKey | None = None,
        time_dim: int = -1,
        discount: float = 1.0,
    ) -> None:
        super().__init__()
        as_next = lambda key: ("next", *((key,) if isinstance(key, str) else key))  # noqa: E731
        self.reward_key, self.done_key = as_next(reward_key), as_next(done_key)
        self.reward_key_out = as_next(reward_key_out if reward_key_out is not None else reward_key)
        self.time_dim = time_dim
        self.discount = discount

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        reward, done = tensordict.get(self.reward_key), tensordict.get(self.done_key)
        dim = self.time_dim % tensordict.batch_dims
        reward_t, done_t = reward.movedim(dim, 0), done.movedim(dim, 0).to(reward.dtype)
        to_go = torch.empty_like(reward_t)
        running = torch.zeros_like(reward_t[0])
        for t in range(reward_t.shape[0] - 1, -1, -1):
            running = reward_t[t] + self.discount * running * (1 - done_t[t])
            to_go[t] = running
        tensordict.set(self.reward_key_out, to_go.movedim(0, dim))
        return tensordict
