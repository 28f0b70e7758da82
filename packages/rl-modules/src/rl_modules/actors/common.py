"""Deterministic actors, value operators and spec-safe modules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey
from torch import nn

from rl_modules._spec import as_composite, project_into


def leaf_spec(spec: Any, key: NestedKey, n_keys: int) -> Any:
    """The spec of ``key``: ``spec[key]`` for a Composite-like object, else ``spec`` itself."""
    if spec is None:
        return None
    if callable(getattr(spec, "keys", None)):
        keys = list(spec.keys(True, True)) if n_keys else []
        if key in keys:
            return spec[key]
        if n_keys > 1:
            return None
    return spec


class SafeModule(TensorDictModule):
    """A TensorDictModule that can keep its outputs inside a spec.

    With ``safe=True`` every output whose spec is known is replaced by
    ``spec.project(value)`` (clamped to bounds, snapped to a category...).
    ``spec`` is any spec-like object (``docs/contract.md`` section 6): one
    spec for a single out_key, or a Composite-like object keyed by out_keys.
    As in TorchRL, a single spec is stored as ``Composite({out_key: spec})``
    (built with the Composite class of the spec's own library).

    Args:
        module: the network.
        in_keys: keys read, in the order of the module's arguments.
        out_keys: keys written, in the order of the module's outputs.
        spec: optional spec-like object of the outputs.
        safe: project outputs into ``spec``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Box:  # a tiny spec-like object
        ...     def project(self, v):
        ...         return v.clamp(-1, 1)
        >>> m = SafeModule(torch.nn.Linear(3, 2), ["observation"], ["action"], spec=Box(), safe=True)
        >>> td = m(TensorDict(observation=torch.full((4, 3), 10.0), batch_size=[4]))
        >>> bool(td["action"].abs().max() <= 1)
        True
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: NestedKey | Sequence[NestedKey],
        out_keys: NestedKey | Sequence[NestedKey],
        spec: Any = None,
        safe: bool = False,
    ) -> None:
        super().__init__(module, in_keys=in_keys, out_keys=out_keys)
        if safe and spec is None:
            raise ValueError(
                f"{type(self).__name__}: safe=True needs a spec to project into; pass spec=."
            )
        self.spec = as_composite(spec, list(self.out_keys), type(self).__name__)
        self.safe = safe

    def forward(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        # As TensorDictModule: a missing in_key reaches the module as None (recurrent nets
        # take hidden=None at the first step); if the module fails on it, tensordict raises
        # a KeyError naming the missing keys.
        out = super().forward(tensordict, *args, **kwargs)
        if self.safe:
            for key in self.out_keys:
                spec = leaf_spec(self.spec, key, len(self.out_keys))
                if spec is not None:
                    out.set(key, project_into(spec, out.get(key), type(self).__name__))
        return out


class Actor(SafeModule):
    """A deterministic policy: reads ``["observation"]``, writes ``["action"]``.

    Args:
        module: the network.
        in_keys: default ``["observation"]``.
        out_keys: default ``["action"]``.
        spec: optional spec-like object of the action.
        safe: project the action into ``spec``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> actor = Actor(torch.nn.Linear(3, 2))
        >>> actor(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))["action"].shape
        torch.Size([4, 2])
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        *,
        spec: Any = None,
        safe: bool = False,
    ) -> None:
        super().__init__(
            module,
            in_keys=["observation"] if in_keys is None else in_keys,
            out_keys=["action"] if out_keys is None else out_keys,
            spec=spec,
            safe=safe,
        )


class ValueOperator(SafeModule):
    """A critic: ``state_value`` from the observation, or ``state_action_value``
    when ``"action"`` is among the in_keys.

    Args:
        module: the network.
        in_keys: default ``["observation"]``.
        out_keys: default ``["state_value"]``, or ``["state_action_value"]``
            if ``"action"`` is an in_key.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rl_modules import MLP
        >>> q = ValueOperator(MLP(out_features=1, num_cells=[8]), in_keys=["observation", "action"])
        >>> td = TensorDict(observation=torch.zeros(4, 3), action=torch.zeros(4, 2), batch_size=[4])
        >>> q(td)["state_action_value"].shape
        torch.Size([4, 1])
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        in_keys = ["observation"] if in_keys is None else in_keys
        if out_keys is None:
            keys = [in_keys] if isinstance(in_keys, str) else list(in_keys)
            out_keys = ["state_action_value"] if "action" in keys else ["state_value"]
        super().__init__(module, in_keys=in_keys, out_keys=out_keys)
