"""``InitTracker``: marks the first step of each trajectory."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import reset_mask
from rl_envs.transforms.transform import EnvSpecs, Transform


class InitTracker(Transform):
    """Writes ``is_init``: ``True`` right after a reset, ``False`` after every step.

    Recurrent policies read it to zero their hidden state at trajectory starts.
    On a partial reset only the reset entries are marked.

    Args:
        init_key: the flag's key.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = InitTracker()
        >>> reset_in = TensorDict(_reset=torch.tensor([[True], [False]]), batch_size=[2])
        >>> t._reset(reset_in, TensorDict(batch_size=[2]))["is_init"].squeeze(-1)
        tensor([ True, False])
    """

    def __init__(self, init_key: str = "is_init") -> None:
        super().__init__(in_keys=[], out_keys=[])
        self.init_key = init_key

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        mask = reset_mask(tensordict)
        if mask is None:
            mask = torch.ones(
                (*tensordict_reset.batch_size, 1), dtype=torch.bool, device=tensordict_reset.device
            )
        tensordict_reset.set(self.init_key, mask.clone())
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        next_tensordict.set(
            self.init_key,
            torch.zeros(
                (*next_tensordict.batch_size, 1), dtype=torch.bool, device=next_tensordict.device
            ),
        )
        return next_tensordict

    def _supports_rollout_map(self) -> bool:
        return True

    def _rollout_map(self, trajectory: TensorDictBase) -> TensorDictBase:
        nxt = trajectory.get("next")
        done = nxt.get("done")
        time_dim = trajectory.batch_dims - 1
        first = trajectory.get(self.init_key, None)
        first = (
            first.select(time_dim, 0)
            if first is not None
            else torch.ones_like(done.select(time_dim, 0))
        )
        later = done.narrow(time_dim, 0, done.shape[time_dim] - 1)
        trajectory.set(self.init_key, torch.cat([first.unsqueeze(time_dim), later], time_dim))
        nxt.set(self.init_key, torch.zeros_like(done))
        return trajectory

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "InitTracker cannot be executed without a parent env: it marks resets, use it "
            "inside a TransformedEnv (stored trajectories already hold is_init)."
        )

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        from rl_envs.specs import Categorical

        batch = tuple(specs.observation.shape)
        specs.observation[self.init_key] = Categorical(
            n=2, shape=(*batch, 1), dtype=torch.bool, device=specs.observation.device
        )
        return specs

    def extra_repr(self) -> str:
        return f"init_key={self.init_key!r}"
