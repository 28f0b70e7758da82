"""Decision Transformer losses: supervised action prediction (DT) and its online, max-entropy form (ODT)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import distributions as D
from torch import nn

from rl_objectives._alpha import Temperature
from rl_objectives._keys import normalize_key
from rl_objectives._nets import dist_of, in_keys_of, output_of
from rl_objectives.common import LossModule, loss_output
from rl_objectives.functional import distance_loss

__all__ = ["DTLoss", "OnlineDTLoss"]

_DISTANCES = ("l2", "l1", "smooth_l1")


def _checked_target(loss: LossModule, td: TensorDictBase) -> torch.Tensor:
    target = loss._get(td, "action_target")
    if target.requires_grad:
        raise RuntimeError(
            f"{type(loss).__name__}: the target action {loss.tensor_keys.action_target!r} is "
            "part of an autograd graph; targets are data: pass them detached."
        )
    return target


class DTLoss(LossModule):
    """Decision Transformer's loss (Chen et al. 2021, arXiv:2106.01345): predict the data's actions.

    The actor reads windows of returns-to-go, states and actions and writes its predicted
    actions at ``action_pred``; the loss is the element-wise distance to the dataset's
    actions at ``action_target`` (both ``"action"`` by default: the actor reads the action
    window and overwrites it with its prediction in its own output), reduced over every
    element (batch, time and action dims).

    Args:
        actor_network: a TensorDict module writing ``action_pred``.

    Keyword Args:
        loss_function: ``"l2"`` (the paper's MSE), ``"l1"`` or ``"smooth_l1"``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (element-wise).
        device: if given, the loss (and the actor) moves there.

    Raises:
        ValueError: an unknown ``loss_function``; a prediction whose shape differs from the
            target's.
        KeyError: the target action is missing (its key is named, with the ``set_keys`` fix).

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> actor = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action"])
        >>> td = TensorDict(observation=torch.randn(4, 5, 3), action=torch.randn(4, 5, 2),
        ...                 batch_size=[4])
        >>> DTLoss(actor)(td)["loss"].shape
        torch.Size([])
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`DTLoss`: the dataset's actions and the actor's prediction."""

        action_target: NestedKey = "action"
        action_pred: NestedKey = "action"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss",)

    def __init__(
        self,
        actor_network: nn.Module,
        *,
        loss_function: str = "l2",
        reduction: str | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(reduction=reduction)
        if loss_function not in _DISTANCES:
            raise ValueError(
                f"DTLoss: loss_function must be one of {_DISTANCES}, got {loss_function!r}."
            )
        self.convert_to_functional(actor_network, "actor_network")
        self.loss_function = loss_function
        if device is not None:
            self.to(device)

    @property
    def in_keys(self) -> list[NestedKey]:
        """The actor's inputs and the target action."""
        keys = [*in_keys_of(self.actor_network), self.tensor_keys.action_target]
        return list(dict.fromkeys(normalize_key(k) for k in keys))

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``loss``: the reduced distance between predicted and dataset actions."""
        target = _checked_target(self, tensordict)
        pred = output_of(self.actor_network, tensordict, self.tensor_keys.action_pred)
        if pred.shape != target.shape:
            raise ValueError(
                f"DTLoss: the prediction {self.tensor_keys.action_pred!r} has shape "
                f"{tuple(pred.shape)} but the target {self.tensor_keys.action_target!r} has "
                f"{tuple(target.shape)}; the actor must predict one action per step of the window."
            )
        return loss_output({"loss": self._reduce(distance_loss(pred, target, self.loss_function))})


class OnlineDTLoss(LossModule):
    """Online Decision Transformer's loss (Zheng et al. 2022, arXiv:2202.05607).

    With ``pi`` the actor's distribution on each window step and ``lambda = exp(log_alpha)``:

    * ``loss_log_likelihood = -log pi(a | tau)`` on the dataset's actions;
    * ``loss_entropy = -lambda H`` with ``H = -E[log pi(a~)]``, estimated from
      ``samples_mc_entropy`` reparameterised samples (``lambda`` detached);
    * ``loss_alpha = lambda (H - target_entropy)`` (``H`` detached): the dual step that
      keeps the entropy above ``target_entropy``;
    * ``entropy`` and ``alpha``: detached diagnostics.

    Args:
        actor_network: a probabilistic TensorDict actor (``get_dist``), e.g. an
            :class:`~rl_modules.OnlineDTActor` under a ``TanhNormal``.

    Keyword Args:
        alpha_init: initial temperature.
        min_alpha, max_alpha: clamps of the temperature (``None``: none).
        fixed_alpha: keep the temperature constant.
        target_entropy: a float, or ``"auto"``: ``-action_dim``, from the actor's ``spec``
            at ``action_pred`` when it has one, else from the target action's last dim.
        samples_mc_entropy: samples for the entropy estimate.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (per window step).
        scalar_output_mode: ``"exclude"`` drops ``alpha`` and ``entropy`` from the output;
            ``None`` or ``"non_tensor"`` keep them (the output's batch size is ``[]``, so the
            scalars fit alongside unreduced losses and need no warning).

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import NormalParamExtractor, ProbabilisticTensorDictModule as Prob
        >>> from tensordict.nn import ProbabilisticTensorDictSequential, TensorDictModule
        >>> body = TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 4), NormalParamExtractor()),
        ...                         ["observation"], ["loc", "scale"])
        >>> normal = lambda loc, scale: torch.distributions.Independent(
        ...     torch.distributions.Normal(loc, scale), 1)
        >>> actor = ProbabilisticTensorDictSequential(body, Prob(["loc", "scale"], ["action"],
        ...                                           distribution_class=normal))
        >>> td = TensorDict(observation=torch.randn(4, 5, 3), action=torch.randn(4, 5, 2),
        ...                 batch_size=[4])
        >>> out = OnlineDTLoss(actor)(td)
        >>> sorted(out.keys())
        ['alpha', 'entropy', 'loss_alpha', 'loss_entropy', 'loss_log_likelihood']
    """

    @dataclass(frozen=True)
    class _AcceptedKeys:
        """Keys of :class:`OnlineDTLoss`: the dataset's actions and the actor's action output."""

        action_target: NestedKey = "action"
        action_pred: NestedKey = "action"

    default_keys = _AcceptedKeys
    default_out_keys = ("loss_log_likelihood", "loss_entropy", "loss_alpha", "alpha", "entropy")

    def __init__(
        self,
        actor_network: nn.Module,
        *,
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        fixed_alpha: bool = False,
        target_entropy: str | float = "auto",
        samples_mc_entropy: int = 1,
        reduction: str | None = None,
        scalar_output_mode: str | None = None,
    ) -> None:
        super().__init__(reduction=reduction)
        if scalar_output_mode not in (None, "exclude", "non_tensor"):
            raise ValueError(
                "OnlineDTLoss: scalar_output_mode must be None, 'exclude' or 'non_tensor', got "
                f"{scalar_output_mode!r}."
            )
        if samples_mc_entropy < 1:
            raise ValueError(
                f"OnlineDTLoss: samples_mc_entropy must be >= 1, got {samples_mc_entropy}."
            )
        self.convert_to_functional(actor_network, "actor_network")
        self.temperature = Temperature(alpha_init, min_alpha, max_alpha, fixed_alpha)
        self.fixed_alpha = fixed_alpha
        self.samples_mc_entropy = samples_mc_entropy
        self.scalar_output_mode = scalar_output_mode
        if target_entropy == "auto":
            spec = getattr(actor_network, "spec", None)
            shape = None
            if spec is not None:
                try:
                    shape = spec[self.tensor_keys.action_pred].shape
                except (KeyError, TypeError, IndexError):
                    shape = getattr(spec, "shape", None)
            target_entropy = -float(shape[-1]) if shape is not None and len(shape) else None
        self._target_entropy: float | None = target_entropy

    @property
    def log_alpha(self) -> torch.Tensor:
        """The log-temperature (a parameter unless ``fixed_alpha``)."""
        return self.temperature.log_alpha

    @property
    def alpha(self) -> torch.Tensor:
        """The detached temperature (clamped to its bounds)."""
        return self.temperature.alpha()

    @property
    def target_entropy(self) -> float | None:
        """The target entropy (``None`` until read from the first batch when ``"auto"``)."""
        return self._target_entropy

    @property
    def in_keys(self) -> list[NestedKey]:
        """The actor's inputs and the target action."""
        keys = [*in_keys_of(self.actor_network), self.tensor_keys.action_target]
        return list(dict.fromkeys(normalize_key(k) for k in keys))

    def _entropy(self, dist: D.Distribution) -> torch.Tensor:
        """``-mean log pi(a~)`` over ``samples_mc_entropy`` reparameterised samples."""
        shape = torch.Size([self.samples_mc_entropy])
        both = getattr(dist, "rsample_and_log_prob", None)
        if callable(both):
            _, log_p = both(shape)
        else:
            sample = dist.rsample(shape)
            log_p = dist.log_prob(sample)
        return -log_p.mean(0)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The three losses and the ``alpha`` / ``entropy`` diagnostics (see the class docstring)."""
        target = _checked_target(self, tensordict)
        if self._target_entropy is None:
            self._target_entropy = -float(target.shape[-1])
        dist = dist_of(self.actor_network, tensordict)
        expected = dist.batch_shape + dist.event_shape
        if target.shape != expected:
            raise ValueError(
                f"OnlineDTLoss: the target action {self.tensor_keys.action_target!r} has shape "
                f"{tuple(target.shape)} but the actor's distribution gives actions of shape "
                f"{tuple(expected)}: the target action must have the shape of the actor's "
                "actions ([*batch, T, action_dim])."
            )
        log_likelihood = dist.log_prob(target)
        entropy = self._entropy(dist)
        alpha = self.temperature.alpha()
        out = {
            "loss_log_likelihood": self._reduce(-log_likelihood),
            "loss_entropy": self._reduce(-alpha * entropy),
            "loss_alpha": self._reduce(
                self.log_alpha.exp() * (entropy.detach() - self._target_entropy)
            ),
        }
        if self.scalar_output_mode != "exclude":
            out["alpha"] = alpha
            out["entropy"] = entropy.detach().mean()
        return loss_output(out)

    def _default_out_keys(self) -> list[str]:
        keys = list(self.default_out_keys)
        return keys[:3] if self.scalar_output_mode == "exclude" else keys
