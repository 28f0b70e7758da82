"""Behaviour cloning: regress (or maximise the likelihood of) the expert's actions."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rl_objectives._alpha import sum_to_batch
from rl_objectives._keys import normalize_key
from rl_objectives._nets import dist_of, in_keys_of, output_of
from rl_objectives.common import LossModule, loss_output

__all__ = ["BCLoss"]

_ELEMENTWISE: dict[str, Callable[..., torch.Tensor]] = {
    "l1": F.l1_loss,
    "l2": F.mse_loss,
    "mse": F.mse_loss,
    "smooth_l1": F.smooth_l1_loss,
}
_DIST_PARAMS = ("loc", "scale", "logits", "probs")


def _cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if target.ndim == logits.ndim:  # [*B, 1] indices
        target = target.squeeze(-1)
    return F.cross_entropy(logits.movedim(-1, 1) if logits.ndim > 2 else logits, target.long(),
                           reduction="none")  # fmt: skip


class BCLoss(LossModule):
    """Behaviour cloning on expert data (Pomerleau 1991; the supervised baseline of offline RL).

    What the loss compares, in TorchRL's order:

    * ``loss_function`` given: ``"l1"``, ``"l2"`` / ``"mse"``, ``"smooth_l1"`` (element-wise,
      on the actor's prediction at the action key), ``"cross_entropy"`` (the prediction is
      logits, the expert action indices) or any callable ``f(prediction, expert)``;
    * otherwise, an actor with a distribution (``get_dist`` and ``loc`` / ``scale`` /
      ``logits`` / ``probs`` outputs): the negative log-likelihood ``-log pi(a | s)`` (for a
      categorical policy this is the cross-entropy);
    * otherwise, integer expert actions: cross-entropy with the prediction as logits;
    * otherwise: the squared error (element-wise).

    Masks: ``tensor_keys.pad_mask`` (``True`` marks padding, ``set_keys(pad_mask=...)``) and
    ``loss_mask_key`` (default ``("collector", "mask")``, ``False`` marks padding, as a slice
    sampler pads) drop entries from the reduction; a mask broadcasts over trailing dims, and
    with ``reduction="none"`` the output is the flat tensor of kept elements.

    Args:
        actor_network: the policy (deterministic, writing the action key, or probabilistic).
        loss_function: see above; ``None`` chooses from the actor and the data.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        debug: raise on non-finite inputs.

    Raises:
        RuntimeError: the actor writes no prediction at the action key (nor at ``"action"``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> actor = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action"])
        >>> td = TensorDict(observation=torch.randn(8, 3), action=torch.randn(8, 2), batch_size=[8])
        >>> BCLoss(actor, loss_function="l2")(td)["loss_bc"].shape
        torch.Size([])
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`BCLoss`."""

        action: NestedKey = "action"
        pad_mask: NestedKey | None = None

    default_keys = _AcceptedKeys
    default_out_keys = ("loss_bc",)

    def __init__(
        self,
        actor_network: nn.Module,
        *,
        loss_function: str | Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        reduction: str | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(reduction=reduction, debug=debug)
        valid = (*_ELEMENTWISE, "cross_entropy")
        if isinstance(loss_function, str) and loss_function not in valid:
            raise ValueError(
                f"BCLoss: unsupported loss_function {loss_function!r}; use one of {valid}, "
                "a callable f(prediction, expert) or None."
            )
        self.convert_to_functional(actor_network, "actor_network")
        self.loss_function = loss_function
        self.loss_mask_key: NestedKey | None = ("collector", "mask")

    def set_keys(self, **kwargs: NestedKey | None) -> BCLoss:
        """Change the keys; ``pad_mask=None`` switches the padding mask off again."""
        reset_pad = "pad_mask" in kwargs and kwargs["pad_mask"] is None
        super().set_keys(**{k: v for k, v in kwargs.items() if k != "pad_mask" or not reset_pad})
        if reset_pad:
            self._tensor_keys = dataclasses.replace(self._tensor_keys, pad_mask=None)
        return self

    @property
    def in_keys(self) -> list[NestedKey]:
        """The entries read: the actor's inputs, the expert action and the padding mask if set."""
        keys = [*in_keys_of(self.actor_network), self.tensor_keys.action]
        if self.tensor_keys.pad_mask is not None:
            keys.append(self.tensor_keys.pad_mask)
        return list(dict.fromkeys(normalize_key(k) for k in keys))

    def _prediction(self, td: TensorDictBase) -> torch.Tensor:
        """The actor's output at the action key (or, with a warning, at ``"action"``)."""
        key = self.tensor_keys.action
        out_keys = [normalize_key(k) for k in getattr(self.actor_network, "out_keys", [])]
        if key in out_keys:
            return output_of(self.actor_network, td, key)
        if key != "action" and "action" in out_keys:
            warnings.warn(
                f"BCLoss: the actor writes its prediction at the hardcoded 'action' key while the "
                f"loss's action key is {key!r}; reading 'action'. Make the actor write {key!r} "
                "(this fallback follows TorchRL and will go).",
                FutureWarning,
                stacklevel=3,
            )
            return output_of(self.actor_network, td, "action")
        raise RuntimeError(
            f"BCLoss: the actor did not write a prediction at {key!r} (its out_keys are "
            f"{out_keys}); make the actor's out_keys include the loss's action key, or point "
            "the loss at it with set_keys(action=...)."
        )

    def _uses_distribution(self) -> bool:
        out_keys = getattr(self.actor_network, "out_keys", [])
        return hasattr(self.actor_network, "get_dist") and any(k in out_keys for k in _DIST_PARAMS)

    def _elementwise(self, td: TensorDictBase, expert: torch.Tensor) -> torch.Tensor:
        fn = self.loss_function
        if fn is None:
            if self._uses_distribution():
                dist = dist_of(self.actor_network, td)
                return -sum_to_batch(dist.log_prob(expert), td.ndim)
            if not expert.is_floating_point():
                return _cross_entropy(self._prediction(td), expert)
            fn = "l2"
        if callable(fn):
            return fn(self._prediction(td), expert)
        pred = self._prediction(td)
        if fn == "cross_entropy":
            return _cross_entropy(pred, expert)
        if pred.shape != expert.shape:
            raise ValueError(
                f"BCLoss: the actor's prediction has shape {tuple(pred.shape)} but the expert "
                f"action {self.tensor_keys.action!r} has shape {tuple(expert.shape)}; they must match."
            )
        return _ELEMENTWISE[fn](pred, expert, reduction="none")

    def _keep_mask(self, td: TensorDictBase, loss: torch.Tensor) -> torch.Tensor | None:
        keep = None
        if self.tensor_keys.pad_mask is not None:
            pad = td.get(self.tensor_keys.pad_mask, None)
            if pad is not None:
                keep = ~pad.bool()
        if self.loss_mask_key is not None:
            mask = td.get(self.loss_mask_key, None)
            if mask is not None:
                keep = mask.bool() if keep is None else keep & mask.bool()
        if keep is None:
            return None
        if keep.ndim > loss.ndim:
            raise RuntimeError(
                f"BCLoss: the mask has more dimensions ({keep.ndim}, shape {tuple(keep.shape)}) "
                f"than the computed loss ({loss.ndim}, shape {tuple(loss.shape)}): per-element "
                "masking requires an element-wise loss_function (e.g. 'l2'), or a mask of the "
                "batch's shape."
            )
        keep = keep.reshape(*keep.shape, *(1,) * (loss.ndim - keep.ndim))
        return keep.expand_as(loss)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``loss_bc``: the reduced imitation loss (see the class docstring)."""
        expert = self._get(tensordict, "action")
        loss = self._elementwise(tensordict, expert)
        keep = self._keep_mask(tensordict, loss) if loss.ndim else None
        if keep is not None:
            loss = loss[keep]
        return loss_output({"loss_bc": self._reduce(loss)})
