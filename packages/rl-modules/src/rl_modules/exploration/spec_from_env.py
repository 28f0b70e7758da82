"""Give exploration modules built without a spec the action spec of the env they will act in."""

from __future__ import annotations

from typing import Any

from torch import nn

from rl_modules.exploration.gaussian import AdditiveGaussianModule


def set_exploration_modules_spec_from_env(policy: nn.Module, env: Any) -> None:
    """Set the spec of every :class:`AdditiveGaussianModule` of ``policy`` whose spec is ``None``.

    The spec is the env's ``action_spec_unbatched`` when it has one (a batched
    env: one env's spec, as the module sees one action per batch entry), else
    its ``action_spec``. Modules that already have a spec are left alone.

    Args:
        policy: the policy (any ``nn.Module``) holding the exploration modules.
        env: any env-like object with ``action_spec`` (and optionally ``action_spec_unbatched``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictSequential
        >>> class Box:
        ...     def project(self, v):
        ...         return v.clamp(-1, 1)
        >>> class Env:
        ...     action_spec = Box()
        >>> noise = AdditiveGaussianModule(spec=None, sigma_init=5.0)
        >>> set_exploration_modules_spec_from_env(TensorDictSequential(noise), Env())
        >>> bool(noise(TensorDict(action=torch.zeros(8, 2), batch_size=[8]))["action"].abs().max() <= 1)
        True
    """
    spec = getattr(env, "action_spec_unbatched", None)
    if spec is None:
        spec = env.action_spec
    for module in policy.modules():
        if isinstance(module, AdditiveGaussianModule) and module.spec is None:
            module.spec = spec
