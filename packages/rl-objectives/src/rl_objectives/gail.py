"""GAIL's discriminator loss (Ho and Ermon 2016, arXiv:1606.03476), with an optional gradient penalty."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._keys import normalize_key
from rl_objectives._nets import output_of
from rl_objectives.common import LossModule, loss_output

__all__ = ["GAILLoss"]


class GAILLoss(LossModule):
    """The discriminator of generative adversarial imitation learning.

    The discriminator ``D(s, a)`` outputs the probability that a pair is the expert's (end it
    with a sigmoid; TorchRL's key name ``d_logits`` is kept). On a batch holding expert pairs
    and as many policy (collector) pairs:

    * ``loss = BCE(D(s_E, a_E), 1) + BCE(D(s_pi, a_pi), 0)``, both halves in one call;
    * with ``use_grad_penalty``: ``+ gp_lambda * mean((||grad_x D(x)||_2 - 1)^2)`` on points
      ``x = eps * (s_pi, a_pi) + (1 - eps) * (s_E, a_E)``, ``eps ~ U(0, 1)`` drawn per sample
      (Gulrajani et al. 2017, arXiv:1704.00028; TorchRL draws it per element).

    The discriminator reads the expert keys (``observation`` and ``action`` by default); the
    policy's pairs come from ``collector_observation`` / ``collector_action`` and are fed to it
    under the expert keys. The policy's reward (e.g. ``-log(1 - D(s, a))``) is the training
    loop's business.

    Args:
        discriminator_network: a TensorDict module reading the expert keys and writing
            ``d_logits`` (probabilities, ``[*B, 1]``).
        use_grad_penalty: add the gradient penalty (``gp_loss`` is then reported).
        gp_lambda: weight of the penalty.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        debug: raise on non-finite inputs.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> class D(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.lin = torch.nn.Linear(5, 1)
        ...     def forward(self, obs, act):
        ...         return torch.sigmoid(self.lin(torch.cat([obs, act], -1)))
        >>> disc = TensorDictModule(D(), ["observation", "action"], ["d_logits"])
        >>> td = TensorDict(observation=torch.randn(8, 3), action=torch.randn(8, 2),
        ...                 collector_observation=torch.randn(8, 3),
        ...                 collector_action=torch.randn(8, 2), batch_size=[8])
        >>> out = GAILLoss(disc, use_grad_penalty=True)(td)
        >>> sorted(out.keys())
        ['gp_loss', 'loss']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`GAILLoss`."""

        expert_action: NestedKey = "action"
        expert_observation: NestedKey = "observation"
        collector_action: NestedKey = "collector_action"
        collector_observation: NestedKey = "collector_observation"
        discriminator_pred: NestedKey = "d_logits"

    default_keys = _AcceptedKeys

    def __init__(
        self,
        discriminator_network: nn.Module,
        *,
        use_grad_penalty: bool = False,
        gp_lambda: float = 10,
        reduction: str | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug)
        self.convert_to_functional(discriminator_network, "discriminator_network")
        self.use_grad_penalty = use_grad_penalty
        self.gp_lambda = gp_lambda

    def _default_out_keys(self) -> list[str]:
        return ["loss", "gp_loss"] if self.use_grad_penalty else ["loss"]

    @property
    def in_keys(self) -> list[NestedKey]:
        """The entries read (TorchRL's attribute): the expert and collector pairs."""
        keys = self.tensor_keys
        names = (
            keys.expert_action, keys.expert_observation,
            keys.collector_action, keys.collector_observation,
        )  # fmt: skip
        return list(dict.fromkeys(normalize_key(k) for k in names))

    def _discriminate(
        self, obs: torch.Tensor, act: torch.Tensor, batch: torch.Size
    ) -> torch.Tensor:
        keys = self.tensor_keys
        td = TensorDict({keys.expert_observation: obs, keys.expert_action: act}, batch_size=batch)
        pred = output_of(self.discriminator_network, td, keys.discriminator_pred)
        if pred.shape != (*batch, 1):
            raise ValueError(
                f"GAILLoss: the discriminator wrote {keys.discriminator_pred!r} with shape "
                f"{tuple(pred.shape)}, expected {(*batch, 1)} (one probability per pair)."
            )
        return pred

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``loss`` (and the detached ``gp_loss`` with ``use_grad_penalty``)."""
        names = ("expert_observation", "expert_action", "collector_observation", "collector_action")
        obs_e, act_e, obs_c, act_c = (self._get(tensordict, name) for name in names)
        for (expert, collector), what in (
            ((obs_e, obs_c), "observation"),
            ((act_e, act_c), "action"),
        ):
            if expert.shape != collector.shape:
                raise ValueError(
                    f"GAILLoss: the expert and collector {what}s must have the same shape (as "
                    f"many policy pairs as expert pairs); got {tuple(expert.shape)} and "
                    f"{tuple(collector.shape)}."
                )
        batch = tensordict.shape
        if not batch:
            raise ValueError("GAILLoss needs a batch: got a TensorDict with no batch dims.")
        both = torch.Size([2 * batch[0], *batch[1:]])
        pred = self._discriminate(torch.cat([obs_e, obs_c], 0), torch.cat([act_e, act_c], 0), both)
        pred_e, pred_c = pred.split(batch[0], dim=0)
        loss = F.binary_cross_entropy(pred_e, torch.ones_like(pred_e), reduction="none")
        loss = loss + F.binary_cross_entropy(pred_c, torch.zeros_like(pred_c), reduction="none")
        out = {}
        if self.use_grad_penalty:
            eps = torch.rand(*batch, 1, device=obs_e.device, dtype=obs_e.dtype)
            obs_mix = (eps * obs_c + (1 - eps) * obs_e).detach().requires_grad_(True)
            act_mix = (eps * act_c + (1 - eps) * act_e).detach().requires_grad_(True)
            with torch.enable_grad():
                d_mix = self._discriminate(obs_mix, act_mix, batch)
                grads = torch.autograd.grad(
                    d_mix, (obs_mix, act_mix), torch.ones_like(d_mix), create_graph=True
                )
            norm = torch.cat(grads, -1).norm(dim=-1)
            gp_loss = self.gp_lambda * (norm - 1).pow(2).mean()
            loss = loss + gp_loss
            out["gp_loss"] = gp_loss.detach()
        out["loss"] = self._reduce(loss)
        return loss_output(out)
