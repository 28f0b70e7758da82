"""``WorldModel``: encoder, dynamics and heads of a model-based agent in one module (TorchRL's class).

It predicts; it does not roll out. Imagined trajectories come from an env that drives
:attr:`WorldModel.step_module` (``rl_envs.model_based.WorldModelEnv``), so that they follow
the same reset / step / done rules as real ones.
"""

from __future__ import annotations

from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase, TensorDictSequential

__all__ = ["WorldModel"]


class WorldModel(TensorDictModuleBase):
    """Encoder, dynamics, reward head and optional done head / decoder, routed by keys.

    ``forward`` runs ``encoder -> dynamics -> reward_head [-> done_head] [-> decoder]``;
    :meth:`encode`, :meth:`step` and :meth:`decode` run one part. Every component is a
    TensorDict module; the keys it reads and writes are its own ``in_keys`` / ``out_keys``
    (e.g. ``"latent" -> ("next", "latent")`` for the dynamics).

    Args:
        encoder: observation -> latent.
        dynamics: (latent, action) -> next latent.
        reward_head: next latent -> ``("next", "reward")``.
        done_head: next latent -> ``("next", "done")`` (optional).
        decoder: latent -> reconstructed observation (optional; needed by :meth:`decode`).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> enc = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["latent"])
        >>> dyn = TensorDictModule(lambda z, a: z + a, ["latent", "action"], [("next", "latent")])
        >>> rew = TensorDictModule(torch.nn.Linear(2, 1), [("next", "latent")], [("next", "reward")])
        >>> wm = WorldModel(enc, dyn, rew)
        >>> td = TensorDict(observation=torch.zeros(4, 3), action=torch.ones(4, 2), batch_size=[4])
        >>> wm(td)["next", "reward"].shape
        torch.Size([4, 1])
    """

    def __init__(
        self,
        encoder: TensorDictModuleBase,
        dynamics: TensorDictModuleBase,
        reward_head: TensorDictModuleBase,
        *,
        done_head: TensorDictModuleBase | None = None,
        decoder: TensorDictModuleBase | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.dynamics = dynamics
        self.reward_head = reward_head
        self.done_head = done_head
        self.decoder = decoder
        heads = [m for m in (done_head, decoder) if m is not None]
        self._step_seq = TensorDictSequential(dynamics, reward_head, *heads)
        full = TensorDictSequential(encoder, dynamics, reward_head, *heads)
        self.in_keys = full.in_keys
        self.out_keys = full.out_keys

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Encodes the observation, then takes one step (:meth:`step`)."""
        return self.step(self.encoder(tensordict))

    def encode(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes the latent of the observation in ``tensordict``."""
        return self.encoder(tensordict)

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """One imagined step from the latent already in ``tensordict`` (no encoder)."""
        return self._step_seq(tensordict)

    def decode(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes the observation reconstructed from the latent.

        Raises:
            RuntimeError: the model was built without a ``decoder``.
        """
        if self.decoder is None:
            raise RuntimeError(
                "WorldModel.decode() needs a decoder: build it with "
                "WorldModel(encoder, dynamics, reward_head, decoder=...)."
            )
        return self.decoder(tensordict)

    @property
    def step_module(self) -> TensorDictSequential:
        """The step-only sequence (dynamics and heads, no encoder), as an env drives it."""
        return self._step_seq
