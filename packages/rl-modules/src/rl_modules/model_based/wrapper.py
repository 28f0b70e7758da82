"""``WorldModelWrapper``: a transition model followed by a reward model (TorchRL's class)."""

from __future__ import annotations

from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase, TensorDictSequential

from rl_modules.model_based.rollout import require_keys

__all__ = ["WorldModelWrapper"]


class WorldModelWrapper(TensorDictSequential):
    """Runs ``transition_model`` then ``reward_model`` on a TensorDict.

    For Dreamer's training the transition model is ``encoder -> RSSMRollout -> decoder``; for
    imagination (``DreamerEnv``) it is the prior alone. Missing inputs raise a ``KeyError``
    naming them and the entries present (e.g. data with ``"observation"`` fed to a pixel
    encoder that reads ``("next", "pixels")``).

    Args:
        transition_model: writes the next world state.
        reward_model: reads the world state and writes the reward.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> wm = WorldModelWrapper(
        ...     TensorDictModule(torch.nn.Linear(2, 2), in_keys=["state"], out_keys=["state"]),
        ...     TensorDictModule(torch.nn.Linear(2, 1), in_keys=["state"], out_keys=["reward"]))
        >>> wm(TensorDict(state=torch.zeros(4, 2), batch_size=[4]))["reward"].shape
        torch.Size([4, 1])
    """

    def __init__(
        self, transition_model: TensorDictModuleBase, reward_model: TensorDictModuleBase
    ) -> None:
        super().__init__(transition_model, reward_model)

    def get_transition_model_operator(self) -> TensorDictModuleBase:
        """The transition model."""
        return self.module[0]

    def get_reward_operator(self) -> TensorDictModuleBase:
        """The reward model."""
        return self.module[1]

    def forward(self, tensordict: TensorDictBase, *args, **kwargs) -> TensorDictBase:
        require_keys(
            tensordict,
            list(self.in_keys),
            "WorldModelWrapper",
            "Point the first module's in_keys at your observation entry (e.g. "
            "in_keys=[('next', 'observation')] for state-based tasks, ('next', 'pixels') "
            "for images).",
        )
        return super().forward(tensordict, *args, **kwargs)
