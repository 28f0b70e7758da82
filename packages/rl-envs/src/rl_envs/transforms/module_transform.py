"""``ModuleTransform``: a TensorDict module (a network, a preprocessor) run as a transform."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms.transform import Transform

SpecEdit = Any  # a spec that replaces the env's, or a callable spec -> spec


def _edit(edit: SpecEdit, spec: Any) -> Any:
    if edit is None:
        return spec
    return edit(spec) if callable(edit) and not hasattr(edit, "shape") else edit


class ModuleTransform(Transform):
    """Runs ``module`` (reads ``module.in_keys``, writes ``module.out_keys``) on env outputs.

    On every reset / step output and on ``forward`` (a replay-buffer sample) the module
    runs; with ``inverse=True`` it runs on the inputs instead (actions on their way to the
    inner env, data written to a buffer). The env's specs stay as they are unless a
    ``*_spec_transform`` (a spec, or a callable editing one) says how the module changes
    them.

    Keyword Args:
        module: the module (e.g. a ``TensorDictModule``); exclusive with ``module_factory``.
        module_factory: a callable building it (e.g. in each worker of a ``ParallelEnv``).
        no_grad: run the module under ``torch.no_grad()`` (default ``False``).
        inverse: run on inputs instead of outputs (default ``False``).
        device: move the data there before the module runs (default: leave it).
        observation_spec_transform, action_spec_transform, reward_spec_transform,
        done_spec_transform, state_spec_transform: the new full spec of that kind, or a
            callable mapping the old one to it (default: unchanged).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class AddOne(torch.nn.Module):
        ...     in_keys, out_keys = ["obs"], ["obs"]
        ...     def forward(self, td):
        ...         return td.set("obs", td["obs"] + 1)
        >>> ModuleTransform(module=AddOne())(TensorDict(obs=torch.zeros(2)))["obs"]
        tensor([1., 1.])
    """

    def __init__(
        self,
        *,
        module: Any = None,
        module_factory: Callable[[], Any] | None = None,
        no_grad: bool = False,
        inverse: bool = False,
        device: torch.device | str | None = None,
        observation_spec_transform: SpecEdit = None,
        action_spec_transform: SpecEdit = None,
        reward_spec_transform: SpecEdit = None,
        done_spec_transform: SpecEdit = None,
        state_spec_transform: SpecEdit = None,
    ) -> None:
        if (module is None) == (module_factory is None):
            raise ValueError(
                "ModuleTransform: pass exactly one of `module` or `module_factory` "
                "(at least one must be provided, and not both)."
            )
        super().__init__()
        self.module = module if module is not None else module_factory()
        keys_in = list(getattr(self.module, "in_keys", []))
        keys_out = list(getattr(self.module, "out_keys", []))
        if inverse:  # outside, the module's inputs; inside, what it writes
            self.in_keys_inv, self.out_keys_inv = keys_out, keys_in
        else:
            self.in_keys, self.out_keys = keys_in, keys_out
        self.no_grad = no_grad
        self.inverse = inverse
        self.device = torch.device(device) if device is not None else None
        self.spec_edits = {
            "observation": observation_spec_transform,
            "action": action_spec_transform,
            "reward": reward_spec_transform,
            "done": done_spec_transform,
            "state": state_spec_transform,
        }

    def _run(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.device is not None:
            tensordict = tensordict.to(self.device)
        with torch.no_grad() if self.no_grad else contextlib.nullcontext():
            return self.module(tensordict)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict if self.inverse else self._run(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._run(tensordict) if self.inverse else tensordict

    def _has_inverse(self) -> bool:
        return self.inverse

    def transform_observation_spec(self, observation_spec: Any) -> Any:
        return _edit(self.spec_edits["observation"], observation_spec)

    def transform_action_spec(self, action_spec: Any) -> Any:
        return _edit(self.spec_edits["action"], action_spec)

    def transform_reward_spec(self, reward_spec: Any) -> Any:
        return _edit(self.spec_edits["reward"], reward_spec)

    def transform_done_spec(self, done_spec: Any) -> Any:
        return _edit(self.spec_edits["done"], done_spec)

    def transform_state_spec(self, state_spec: Any) -> Any:
        return _edit(self.spec_edits["state"], state_spec)

    def extra_repr(self) -> str:
        return (
            f"module={type(self.module).__name__}, inverse={self.inverse}, no_grad={self.no_grad}"
        )
