"""Q-value heads: greedy actions from per-action values (plain and distributional)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential, dispatch
from tensordict.utils import NestedKey
from torch import nn

from rl_modules._keys import check_in_keys
from rl_modules._spec import ActionSpace, action_space_of, is_composite


def _action_leaf(spec: Any) -> Any:
    """The ``"action"`` entry of a Composite-like spec (else the spec itself)."""
    if is_composite(spec):
        keys = list(spec.keys(True, True))
        key = (
            "action"
            if "action" in keys
            else next((k for k in keys if isinstance(k, tuple) and k[-1] == "action"), None)
        )
        if key is None:
            raise KeyError(
                f"no 'action' entry in the spec (it holds {keys}); pass the action spec itself "
                "or action_space=."
            )
        return spec[key]
    return spec


def _resolve_space(action_space: Any, spec: Any, who: str, allow_multi: bool = True) -> ActionSpace:
    if action_space is None and spec is None:
        raise ValueError(
            f"{who}: Neither action_space nor spec was defined; pass action_space "
            "('categorical', 'one_hot' or 'mult_one_hot') or a spec-like action spec."
        )
    leaf = _action_leaf(spec) if spec is not None else None
    if action_space is None:
        return action_space_of(leaf, who, allow_multi=allow_multi)
    kind = action_space_of(action_space, who, allow_multi=allow_multi)
    if leaf is not None and action_space_of(leaf, who, allow_multi=True) != kind:
        raise ValueError(
            f"{who}: The action spec and the action space do not match: got "
            f"action_space={action_space!r} and a {type(leaf).__name__} spec."
        )
    return kind


def mult_one_hot_action(
    action_value: torch.Tensor, var_nums: Sequence[int], one_hot_dtype: torch.dtype = torch.long
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy multi one-hot action: one argmax per group of ``var_nums`` entries on the last dim.

    Returns:
        ``(action [..., sum(var_nums)], chosen_action_value [..., 1])``, the chosen value
        being the sum of the chosen entries (``(action * values).sum(-1)``, as TorchRL).
    """
    parts = [
        torch.zeros_like(v, dtype=one_hot_dtype).scatter_(-1, v.argmax(-1, keepdim=True), 1)
        for v in action_value.split(list(var_nums), -1)
    ]
    action = torch.cat(parts, -1)
    return action, (action * action_value).sum(-1, keepdim=True)


def greedy_action(
    action_value: torch.Tensor,
    action_space: ActionSpace,
    mask: torch.Tensor | None = None,
    one_hot_dtype: torch.dtype = torch.long,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Argmax action and its value from ``action_value`` ``[..., n]``.

    Args:
        action_value: one value per action on the last dim.
        action_space: ``"categorical"`` (an index ``[...]``) or ``"one_hot"`` (``[..., n]``).
        mask: optional bool ``[..., n]``, ``True`` = allowed.
        one_hot_dtype: dtype of one-hot actions.

    Returns:
        ``(action, chosen_action_value)`` with ``chosen_action_value`` of shape ``[..., 1]``.
    """
    values = action_value
    if mask is not None:
        values = torch.where(mask, values, torch.finfo(values.dtype).min)
    idx = values.argmax(-1, keepdim=True)
    chosen = action_value.gather(-1, idx)
    if action_space == "categorical":
        return idx.squeeze(-1), chosen
    one_hot = torch.zeros_like(action_value, dtype=one_hot_dtype).scatter_(-1, idx, 1)
    return one_hot, chosen


class QValueModule(TensorDictModuleBase):
    """Writes the greedy ``action`` and its ``chosen_action_value`` from ``action_value``.

    Args:
        action_space: ``"categorical"`` or ``"one_hot"``; or give ``spec``.
        action_value_key: where the values ``[*B, n]`` are read.
        out_keys: ``[action, action_value, chosen_action_value]`` keys.
        spec: a spec-like action spec (kind from its class, one-hot dtype from ``spec.dtype``),
            or a Composite-like spec with an ``"action"`` entry.
        action_mask_key: optional bool mask key (``True`` = allowed).
        var_nums: for ``action_space="mult_one_hot"``, the size of each one-hot
            group (default: the spec's ``nvec``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> m = QValueModule(action_space="categorical")
        >>> td = m(TensorDict(action_value=torch.tensor([[1.0, 3.0, 2.0]]), batch_size=[1]))
        >>> td["action"], td["chosen_action_value"]
        (tensor([1]), tensor([[3.]]))
    """

    def __init__(
        self,
        action_space: str | None = None,
        action_value_key: NestedKey | None = "action_value",
        out_keys: Sequence[NestedKey] | None = None,
        spec: Any = None,
        action_mask_key: NestedKey | None = None,
        var_nums: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        action_value_key = "action_value" if action_value_key is None else action_value_key
        self.action_space = _resolve_space(action_space, spec, type(self).__name__)
        self.spec = spec
        if self.action_space == "mult_one_hot" and var_nums is None and spec is not None:
            var_nums = getattr(_action_leaf(spec), "nvec", None)
        self.var_nums = (
            None if var_nums is None else [int(v) for v in torch.as_tensor(var_nums).reshape(-1)]
        )
        self.action_value_key = action_value_key
        self.action_mask_key = action_mask_key
        self.in_keys = [action_value_key] + ([action_mask_key] if action_mask_key else [])
        self.out_keys = (
            ["action", action_value_key, "chosen_action_value"]
            if out_keys is None
            else list(out_keys)
        )
        if len(self.out_keys) != 3:
            raise ValueError(
                f"{type(self).__name__}: out_keys must be [action, action_value, "
                f"chosen_action_value], got {self.out_keys}."
            )
        leaf = _action_leaf(spec) if spec is not None else None
        self._one_hot_dtype = getattr(leaf, "dtype", torch.long) if leaf is not None else torch.long

    def _check_inputs(self, tensordict: TensorDictBase) -> None:
        who = type(self).__name__
        if self.action_mask_key is not None and tensordict.get(self.action_mask_key, None) is None:
            raise KeyError(
                f"{who}: Action mask key {self.action_mask_key} not found in TensorDict "
                f"(it holds {sorted(map(str, tensordict.keys(True, True)))}); write the mask "
                "there or build the module without action_mask_key."
            )
        check_in_keys(tensordict, [self.action_value_key], who)

    @dispatch(auto_batch_size=False)
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Write the greedy action (also callable with tensors: ``m(action_value=...)``)."""
        self._check_inputs(tensordict)
        values = tensordict.get(self.action_value_key)
        mask = tensordict.get(self.action_mask_key) if self.action_mask_key else None
        if self.action_space == "mult_one_hot":
            if self.var_nums is None:
                raise ValueError(
                    f"{type(self).__name__}: var_nums (the size of each one-hot group) must be "
                    "given to the constructor (or a MultiOneHot spec with nvec) for multi one-hot "
                    "action spaces."
                )
            masked = (
                values if mask is None else torch.where(mask, values, torch.finfo(values.dtype).min)
            )
            action, _ = mult_one_hot_action(masked, self.var_nums, self._one_hot_dtype)
            chosen = (action * values).sum(-1, keepdim=True)
        else:
            action, chosen = greedy_action(values, self.action_space, mask, self._one_hot_dtype)
        action_key, value_key, chosen_key = self.out_keys
        tensordict.set(action_key, action)
        if mask is not None:
            # as TorchRL: the masked-out values are written back as the dtype's minimum
            values = torch.where(mask, values, torch.finfo(values.dtype).min)
        if value_key != self.action_value_key or mask is not None:
            tensordict.set(value_key, values)
        tensordict.set(chosen_key, chosen)
        return tensordict


class QValueActor(TensorDictSequential):
    """A Q-network followed by a :class:`QValueModule` (greedy policy).

    Args:
        module: network from the in_keys to ``[*B, n]`` action values.
        in_keys: default ``["observation"]``.
        spec: spec-like action spec (or give ``action_space``).
        action_space: ``"categorical"`` or ``"one_hot"``.
        action_value_key: default ``"action_value"``.
        action_mask_key: optional mask key.
        var_nums: one-hot group sizes for ``action_space="mult_one_hot"``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> actor = QValueActor(torch.nn.Linear(4, 3), action_space="one_hot")
        >>> actor(TensorDict(observation=torch.zeros(2, 4), batch_size=[2]))["action"].shape
        torch.Size([2, 3])
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        spec: Any = None,
        action_space: str | None = None,
        action_value_key: NestedKey | None = "action_value",
        action_mask_key: NestedKey | None = None,
        var_nums: Sequence[int] | None = None,
    ) -> None:
        in_keys = ["observation"] if in_keys is None else in_keys
        action_value_key = "action_value" if action_value_key is None else action_value_key
        if isinstance(module, TensorDictModuleBase):
            net = module
        else:
            net = TensorDictModule(module, in_keys=in_keys, out_keys=[action_value_key])
        head = QValueModule(
            action_space=action_space,
            action_value_key=action_value_key,
            spec=spec,
            action_mask_key=action_mask_key,
            var_nums=var_nums,
        )
        super().__init__(net, head)
        self.spec = spec


class DistributionalQValueModule(QValueModule):
    """Greedy head for distributional Q-values (C51, Bellemare et al., 2017).

    ``action_value`` holds log-probabilities ``[*B, n_atoms, n]`` over the
    atoms of ``support`` (``[n_atoms]``); the action maximises the expected
    value. Writes ``action`` (``chosen_action_value`` is not written).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> m = DistributionalQValueModule("categorical", support=torch.tensor([0.0, 1.0]))
        >>> logp = torch.log(torch.tensor([[[0.9, 0.2], [0.1, 0.8]]]))
        >>> m(TensorDict(action_value=logp, batch_size=[1]))["action"]
        tensor([1])
    """

    def __init__(
        self,
        action_space: str | None = None,
        support: torch.Tensor | None = None,
        action_value_key: NestedKey | None = "action_value",
        out_keys: Sequence[NestedKey] | None = None,
        spec: Any = None,
        action_mask_key: NestedKey | None = None,
        var_nums: Sequence[int] | None = None,
    ) -> None:
        if support is None:
            raise ValueError("DistributionalQValueModule: support (the atom values) is required.")
        super().__init__(
            action_space=action_space,
            action_value_key=action_value_key,
            out_keys=None if out_keys is None else [*out_keys, "chosen_action_value"][:3],
            spec=spec,
            action_mask_key=action_mask_key,
            var_nums=var_nums,
        )
        self.register_buffer("support", torch.as_tensor(support))
        self.out_keys = self.out_keys[:2]

    @dispatch(auto_batch_size=False)
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Write the greedy action (also callable with tensors: ``m(action_value=...)``)."""
        self._check_inputs(tensordict)
        log_probs = tensordict.get(self.action_value_key)
        if log_probs.ndim < 2 or log_probs.shape[-2] != self.support.numel():
            raise ValueError(
                f"{type(self).__name__}: {self.action_value_key!r} must be [*B, n_atoms="
                f"{self.support.numel()}, n_actions], got {tuple(log_probs.shape)}."
            )
        expected = (log_probs.exp() * self.support.unsqueeze(-1)).sum(-2)
        mask = tensordict.get(self.action_mask_key) if self.action_mask_key else None
        if self.action_space == "mult_one_hot":
            if self.var_nums is None:
                raise ValueError(
                    f"{type(self).__name__}: var_nums (the size of each one-hot group) must be "
                    "given for multi one-hot action spaces."
                )
            if mask is not None:
                expected = torch.where(mask, expected, torch.finfo(expected.dtype).min)
            action, _ = mult_one_hot_action(expected, self.var_nums, self._one_hot_dtype)
        else:
            action, _ = greedy_action(expected, self.action_space, mask, self._one_hot_dtype)
        tensordict.set(self.out_keys[0], action)
        if self.out_keys[1] != self.action_value_key:
            tensordict.set(self.out_keys[1], log_probs)
        return tensordict


class _LogSoftmaxAtoms(nn.Module):
    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.module(*inputs), dim=-2)


class DistributionalQValueActor(TensorDictSequential):
    """A distributional Q-network (``[*B, n_atoms, n]`` logits) and its greedy head.

    Args:
        module: network from the in_keys to ``[*B, n_atoms, n]``.
        support: atom values ``[n_atoms]``.
        in_keys: default ``["observation"]``.
        spec: spec-like action spec (or give ``action_space``).
        action_space: ``"categorical"`` or ``"one_hot"``.
        action_value_key: default ``"action_value"``.
        action_mask_key: optional mask key.
        make_log_softmax: apply ``log_softmax`` over the atoms to the output.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_modules import MLP
        >>> net = MLP(in_features=4, out_features=(5, 3), num_cells=[8])
        >>> actor = DistributionalQValueActor(net, support=torch.linspace(-1, 1, 5), action_space="categorical")
        >>> actor(TensorDict(observation=torch.zeros(2, 4), batch_size=[2]))["action"].shape
        torch.Size([2])
    """

    def __init__(
        self,
        module: nn.Module,
        support: torch.Tensor,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        spec: Any = None,
        action_space: str | None = None,
        action_value_key: NestedKey | None = "action_value",
        action_mask_key: NestedKey | None = None,
        make_log_softmax: bool = True,
        var_nums: Sequence[int] | None = None,
    ) -> None:
        in_keys = ["observation"] if in_keys is None else in_keys
        action_value_key = "action_value" if action_value_key is None else action_value_key
        body = _LogSoftmaxAtoms(module) if make_log_softmax else module
        net = TensorDictModule(body, in_keys=in_keys, out_keys=[action_value_key])
        head = DistributionalQValueModule(
            action_space=action_space,
            support=support,
            action_value_key=action_value_key,
            spec=spec,
            action_mask_key=action_mask_key,
            var_nums=var_nums,
        )
        super().__init__(net, head)
        self.spec = spec
