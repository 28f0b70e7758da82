"""ACT's loss: chunk reconstruction plus a KL-weighted CVAE prior term."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._keys import normalize_key
from rl_objectives.common import LossModule, loss_output
from rl_objectives.functional import distance_loss

__all__ = ["ACTLoss", "gaussian_kl_to_standard"]

_DISTANCES = ("l1", "l2", "smooth_l1")


def gaussian_kl_to_standard(mu: torch.Tensor, log_var: torch.Tensor) -> torch.Tensor:
    """``KL(N(mu, exp(log_var)) || N(0, I))`` summed over the last dim (closed form).

    Examples:
        >>> gaussian_kl_to_standard(torch.zeros(2, 3), torch.zeros(2, 3))
        tensor([0., 0.])
    """
    return 0.5 * (mu.pow(2) + log_var.exp() - 1.0 - log_var).sum(-1)


class ACTLoss(LossModule):
    """Action Chunking with Transformers' loss (Zhao et al. 2023, arXiv:2304.13705).

    ``loss_act = recon(a_pred, a_chunk) + kl_weight * KL(q(z | o, a) || N(0, I))``: the
    reconstruction is the element-wise distance (``"l1"`` as the paper) averaged over the
    chunk and action dims, the KL is summed over the latent dims; both are then reduced over
    the batch. ``loss_reconstruction`` and ``loss_kl`` are the detached terms, for logs.

    The actor (e.g. :class:`~rl_modules.ACTModel` in a ``TensorDictModule``) is called on a
    TensorDict holding ``"observation"`` and ``"action_chunk"`` (read from this loss's
    ``observation`` and ``action_chunk`` keys) and must write ``action_pred``, ``mu`` and
    ``log_var``, as TorchRL's.

    Args:
        actor_network: the CVAE policy.

    Keyword Args:
        kl_weight: ``beta`` on the KL (10, as the paper).
        loss_function: ``"l1"`` (default), ``"l2"`` or ``"smooth_l1"`` reconstruction.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (per batch element).

    Raises:
        ValueError: a predicted chunk whose shape differs from the expert chunk's.
        KeyError: a missing entry (its key is named, with the ``set_keys`` fix).

    Examples:
        >>> from tensordict.nn import TensorDictModule
        >>> class Tiny(torch.nn.Module):
        ...     def forward(self, obs, chunk):
        ...         return chunk * 0 + obs[..., None, :1], obs[..., :2], obs[..., :2] * 0
        >>> actor = TensorDictModule(Tiny(), ["observation", "action_chunk"],
        ...                          ["action_pred", "mu", "log_var"])
        >>> td = TensorDict({"observation": torch.zeros(4, 3),
        ...                  ("vla_action", "chunk"): torch.ones(4, 5, 2)}, batch_size=[4])
        >>> ACTLoss(actor)(td)["loss_act"]
        tensor(1.)
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`ACTLoss`."""

        observation: NestedKey = "observation"
        action_chunk: NestedKey = ("vla_action", "chunk")
        action_pred: NestedKey = "action_pred"
        mu: NestedKey = "mu"
        log_var: NestedKey = "log_var"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss_act", "loss_reconstruction", "loss_kl")

    def __init__(
        self,
        actor_network: nn.Module,
        *,
        kl_weight: float = 10.0,
        loss_function: str = "l1",
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction=reduction)
        if loss_function not in _DISTANCES:
            raise ValueError(
                f"ACTLoss: loss_function must be one of {_DISTANCES}, got {loss_function!r}."
            )
        self.convert_to_functional(actor_network, "actor_network")
        self.kl_weight = kl_weight
        self.loss_function = loss_function

    @property
    def in_keys(self) -> list[NestedKey]:
        """The observation and the expert chunk."""
        return [
            normalize_key(self.tensor_keys.observation),
            normalize_key(self.tensor_keys.action_chunk),
        ]

    def _actor_outputs(
        self, td: TensorDictBase, obs: torch.Tensor, chunk: torch.Tensor
    ) -> list[torch.Tensor]:
        td_in = TensorDict._new_unsafe(
            {"observation": obs, "action_chunk": chunk}, batch_size=td.batch_size, device=td.device
        )
        out = self.actor_network(td_in)
        keys = self.tensor_keys
        values = []
        for name in ("action_pred", "mu", "log_var"):
            value = out.get(getattr(keys, name), None)
            if value is None:
                raise KeyError(
                    f"ACTLoss: the actor did not write {getattr(keys, name)!r} (its '{name}' key); "
                    f"it wrote {sorted(map(str, out.keys(True, True)))}. Make the actor's out_keys "
                    f"include it, or point the loss at your key with set_keys({name}=...)."
                )
            values.append(value)
        return values

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``loss_act`` (differentiable), ``loss_reconstruction`` and ``loss_kl`` (detached)."""
        obs = self._get(tensordict, "observation")
        chunk = self._get(tensordict, "action_chunk")
        pred, mu, log_var = self._actor_outputs(tensordict, obs, chunk)
        if pred.shape != chunk.shape:
            raise ValueError(
                f"ACTLoss: the predicted chunk {self.tensor_keys.action_pred!r} has shape "
                f"{tuple(pred.shape)} but the expert chunk {self.tensor_keys.action_chunk!r} has "
                f"{tuple(chunk.shape)}; both must be [*batch, chunk_size, action_dim]."
            )
        recon = self._reduce(distance_loss(pred, chunk, self.loss_function).mean((-2, -1)))
        kl = self._reduce(gaussian_kl_to_standard(mu, log_var))
        return loss_output(
            {
                "loss_act": recon + self.kl_weight * kl,
                "loss_reconstruction": recon.detach(),
                "loss_kl": kl.detach(),
            }
        )
