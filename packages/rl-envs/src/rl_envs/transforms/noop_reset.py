"""``NoopResetEnv``: random actions after each reset (Atari start-state diversity)."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rl_envs.transforms.transform import Transform

_MAX_TRIALS = 10


class NoopResetEnv(Transform):
    """After each reset, runs up to ``noops`` random steps and starts from where they end.

    The number of steps is uniform in ``[1, noops]`` with ``random=True``, else
    ``noops``. The steps go through the env beneath this transform (``inner_env``:
    the base env and the transforms placed before this one); if an episode ends during them, the env is reset and the
    no-ops start over (at most 10 times). Like TorchRL's, it works on an env without batch
    dims: a batched env raises ``ValueError`` (put it inside each sub-env instead).

    Args:
        noops: the maximum number of no-op steps (0: none).
        random: draw the number of steps (``True``) or always run ``noops``.

    Example:
        >>> from rl_envs import PendulumEnv, TransformedEnv, StepCounter
        >>> env = TransformedEnv(PendulumEnv(), StepCounter())
        >>> env.append_transform(NoopResetEnv(noops=3, random=False))
        TransformedEnv(...)
        >>> env.reset()["step_count"].item()
        3
    """

    steps_inner_env = True

    def __init__(self, noops: int = 30, random: bool = True) -> None:
        if noops < 0:
            raise ValueError(f"NoopResetEnv: noops must be >= 0, got {noops}.")
        super().__init__()
        self.noops = noops
        self.random = random

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        inner = self.inner_env
        if inner is None:
            raise RuntimeError(
                "NoopResetEnv.parent not found. Make sure that the parent is set. The "
                "transform steps an env: use it in a TransformedEnv."
            )
        if tensordict_reset.batch_dims:
            raise ValueError(
                "The parent environment batch-size is non-null: NoopResetEnv runs random "
                "steps on a single env. Put it inside each sub-env (e.g. "
                "SerialEnv(n, lambda: TransformedEnv(make_env(), NoopResetEnv())))."
            )
        reward_keys = inner.reward_keys
        for _ in range(_MAX_TRIALS):
            n = self.noops
            if self.random and n:
                n = int(torch.randint(1, self.noops + 1, ()))
            root = tensordict_reset
            for _ in range(n):
                step_in = root.clone(False)
                step_in.update(inner.full_action_spec.rand())
                nxt = inner.step(step_in)
                if bool(nxt.get("done").any()):
                    break
                root = nxt.exclude(*reward_keys)
            else:
                return root
            tensordict_reset = inner.reset(None)
        raise RuntimeError(
            f"NoopResetEnv: episodes ended during the no-ops {_MAX_TRIALS} times in a row; "
            "lower noops."
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "NoopResetEnv.parent not found. Make sure that the parent is set. The transform "
            "steps an env: use it in a TransformedEnv."
        )

    def extra_repr(self) -> str:
        return f"noops={self.noops}, random={self.random}"
