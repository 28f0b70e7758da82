"""``MultiStepTransform``: n-step returns computed as data enters a replay buffer."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey, as_key_list
from rl_envs.transforms.transform import Transform


def _steps_left(done: torch.Tensor) -> torch.Tensor:
    """``[*B, T]``: steps from ``t`` to the end of its segment, inclusive (a segment ends
    at a done step or at the last step)."""
    T = done.shape[-1]
    ends = done.clone()
    ends[..., -1] = True
    time = torch.arange(T, device=done.device).expand_as(done)
    end_at = torch.where(ends, time, torch.full_like(time, T))
    end_at = end_at.flip(-1).cummin(-1).values.flip(-1)
    return end_at - time + 1


def _discounted_sum(reward: torch.Tensor, k: torch.Tensor, gamma: float) -> torch.Tensor:
    """``sum_{j <= k_t} gamma^j r_{t+j}``; time is dim ``k.ndim - 1`` of ``reward``."""
    tdim = k.ndim - 1
    extra = reward.ndim - k.ndim
    k = k.reshape(*k.shape, *[1] * extra)
    T = reward.shape[tdim]
    out = torch.zeros_like(reward)
    for j in range(int(k.max()) + 1):
        ahead = reward.narrow(tdim, j, T - j)
        pad = torch.zeros_like(reward.narrow(tdim, 0, j))
        shifted = torch.cat([ahead, pad], tdim)
        out = out + torch.where(k >= j, (gamma**j) * shifted, torch.zeros_like(shifted))
    return out


def multi_step(
    tensordict: TensorDictBase,
    *,
    n_steps: int,
    gamma: float,
    reward_keys: list[NestedKey],
    done_key: NestedKey,
    done_keys: list[NestedKey],
    mask_key: NestedKey | None,
) -> TensorDictBase:
    """n-step rewrite of a ``[*B, T]`` batch (time last); see :class:`MultiStepTransform`."""
    td = tensordict.clone(False)
    done = td.get(("next", done_key), None)
    if done is None:
        raise KeyError(
            f"MultiStepTransform reads ('next', {done_key!r}), absent from the data "
            f"(next keys: {sorted(map(str, td.get('next').keys(True, True)))}): pass done_key=."
        )
    if done.shape != td.shape:
        if done.shape[-1] == 1 and done.shape[:-1] == td.shape:
            done = done.squeeze(-1)
        else:
            raise ValueError(
                f"('next', {done_key!r}) has shape {tuple(done.shape)}; MultiStepTransform "
                f"expects the batch shape {tuple(td.shape)} (time last), optionally followed by 1."
            )
    T = td.shape[-1]
    k = _steps_left(done.bool()).clamp_max(n_steps) - 1
    nxt = td.get("next")
    gathered = nxt.exclude(*reward_keys, *done_keys).gather(
        -1, torch.arange(T, device=k.device).expand_as(k) + k
    )
    for key in reward_keys:
        reward = nxt.get(key)
        nxt.set("original_reward", reward)
        nxt.set(key, _discounted_sum(reward, k, gamma))
    nxt.update(gathered)
    td.set("steps_to_next_obs", k + 1)
    td.set("gamma", gamma ** (k + 1))
    nonterminal = k != 0
    mask = td.get(mask_key, None) if mask_key is not None else None
    if mask is not None:
        nonterminal = nonterminal & mask.reshape(nonterminal.shape).bool()
    td.set("nonterminal", nonterminal)
    return td


class MultiStepTransform(Transform):
    """n-step returns for a replay buffer, insensitive to how the data was chunked.

    A replay-buffer (write-side) transform: each ``extend`` batch ``[*B, T]`` (time last)
    is appended to the last ``n_steps`` steps kept from the previous batch; the steps
    whose ``n_steps`` look-ahead is now known are rewritten and returned, the last
    ``n_steps`` are kept for the next call (``None`` is returned while fewer than
    ``n_steps + 1`` steps are known). For a step ``t`` let ``k_t = min(n_steps, steps
    left in its trajectory) - 1``:

    - ``("next", r) = sum_{j <= k_t} gamma^j r_{t+j}`` for each reward key, the one-step
      reward moving to ``("next", "original_reward")``;
    - every other ``"next"`` entry but the done keys is the one of step ``t + k_t``;
    - ``"steps_to_next_obs" = k_t + 1``, ``"gamma" = gamma ** (k_t + 1)`` and
      ``"nonterminal" = k_t != 0`` (``False`` where ``mask_key`` is ``False``).

    Sutton (1988), "Learning to predict by the methods of temporal differences".

    Args:
        n_steps: the look-ahead (>= 1); may be changed between calls.
        gamma: the discount.
        reward_keys: the rewards summed (default ``["reward"]``), under ``"next"``.
        done_key: the flag that ends a trajectory (default ``"done"``), under ``"next"``.
        done_keys: the ``"next"`` entries left untouched (default done, terminated,
            truncated).
        mask_key: valid-step mask (default ``"mask"``; ignored where absent).

    Raises:
        ValueError: inside an env (it only transforms replay-buffer writes).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = MultiStepTransform(n_steps=2, gamma=0.5)
        >>> td = TensorDict({"obs": torch.arange(4.0), "next": {"obs": torch.arange(1.0, 5.0),
        ...     "reward": torch.ones(4, 1), "done": torch.zeros(4, 1, dtype=torch.bool)}}, [4])
        >>> out = t.inv(td)  # the last 2 steps wait for the next batch
        >>> out["next", "reward"].flatten().tolist(), out["next", "obs"].tolist()
        ([1.5, 1.5], [2.0, 3.0])
    """

    ENV_ERR = (
        "MultiStepTransform only transforms replay-buffer writes (its inverse): use it as "
        "ReplayBuffer(transform=...), not in an env."
    )

    def __init__(
        self,
        n_steps: int,
        gamma: float,
        *,
        reward_keys: list[NestedKey] | None = None,
        done_key: NestedKey | None = None,
        done_keys: list[NestedKey] | None = None,
        mask_key: NestedKey | None = None,
    ) -> None:
        super().__init__()
        self.n_steps = n_steps
        self.gamma = gamma
        self.reward_keys = as_key_list(reward_keys) if reward_keys is not None else ["reward"]
        self.done_key = done_key if done_key is not None else "done"
        self.done_keys = (
            as_key_list(done_keys) if done_keys is not None else ["done", "truncated", "terminated"]
        )
        self.mask_key = mask_key if mask_key is not None else "mask"
        self._buffer: TensorDictBase | None = None

    @property
    def n_steps(self) -> int:
        """The look-ahead; can be changed during training."""
        return self._n_steps

    @n_steps.setter
    def n_steps(self, value: int) -> None:
        if not isinstance(value, int) or value < 1:
            raise ValueError(
                f"The value of n_steps must be a strictly positive integer, got {value!r}."
            )
        self._n_steps = value

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase | None:
        if self._env_and_index()[0] is not None:
            raise ValueError(self.ENV_ERR)
        buffered = self._buffer
        joined = tensordict if buffered is None else torch.cat([buffered, tensordict], -1)
        self._buffer = joined[..., -self.n_steps :].copy()
        if joined.shape[-1] <= self.n_steps:
            return None
        out = multi_step(
            joined,
            n_steps=self.n_steps,
            gamma=self.gamma,
            reward_keys=self.reward_keys,
            done_key=self.done_key,
            done_keys=self.done_keys,
            mask_key=self.mask_key,
        )
        return out[..., : -self.n_steps]

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase | None:
        return self._inv_call(tensordict)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Samples pass unchanged (the work happens on writes)."""
        return tensordict

    def extra_repr(self) -> str:
        return f"n_steps={self.n_steps}, gamma={self.gamma}"
