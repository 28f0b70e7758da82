"""Wrapping a tensor-in / tensor-out ``nn.Module`` policy into a ``TensorDictModule``, as TorchRL."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase
from torch import nn

_TENSORDICT_ARGS = ({"tensordict"}, {"td"})


def _takes_a_tensordict(signature: inspect.Signature) -> bool:
    names = set(signature.parameters)
    if names in _TENSORDICT_ARGS:
        return True
    params = list(signature.parameters.values())
    if len(params) != 1:
        return False
    annotation = params[0].annotation
    return annotation in ("TensorDictBase", "TensorDict") or (
        isinstance(annotation, type) and issubclass(annotation, TensorDictBase)
    )


def auto_wrap_policy(policy: Any, env: Any, trust_policy: bool | None = None) -> Any:
    """``policy`` itself, or a ``TensorDictModule`` around an ``nn.Module`` whose ``forward``
    takes observation tensors by name (``forward(self, observation)``).

    The wrapper reads the observation entries named by ``forward``'s parameters and writes
    ``env.action_keys`` (``"action"``), then ``"output1"``, ``"output2"``... for a module
    returning a tuple. TensorDict modules, ``forward(tensordict)`` / ``forward(td)`` /
    TensorDict-annotated policies, a ``forward`` with one argument that names no observation
    (``nn.Sequential`` of TensorDict modules), plain callables, envs without an
    ``observation_spec`` and ``trust_policy=True`` leave the policy as it is.

    Raises:
        TypeError: ``forward`` needs arguments the env's observations do not provide.

    Examples:
        >>> from rl_collectors_toy_env import ToyEnv  # doctest: +SKIP
        >>> class Net(nn.Module):  # doctest: +SKIP
        ...     def forward(self, observation): return observation[..., :1]
        >>> auto_wrap_policy(Net(), ToyEnv(())).in_keys  # doctest: +SKIP
        ['observation']
    """
    if trust_policy or not isinstance(policy, nn.Module):
        return policy
    if isinstance(policy, TensorDictModuleBase) or type(policy).__name__ == "OptimizedModule":
        return policy
    if hasattr(policy, "in_keys") or hasattr(policy, "out_keys"):
        return policy
    signature = inspect.signature(policy.forward)
    if _takes_a_tensordict(signature):
        return policy
    spec = getattr(env, "observation_spec", None)
    if spec is None:
        return policy  # nothing to match forward's arguments against: called as given
    required = {
        name for name, p in signature.parameters.items() if p.default is inspect.Parameter.empty
    }
    names = set(spec.keys())
    if len(required) == 1 and not required & names:
        return policy  # one argument that names no observation: it takes the TensorDict
    if required - names:
        raise TypeError(
            f"Arguments to policy.forward are incompatible with entries in env.observation_spec: "
            f"{type(policy).__name__}.forward needs {sorted(required)} but the observations are "
            f"{sorted(names)}. Name forward's arguments after observation keys, wrap the policy "
            "in a TensorDictModule, or pass trust_policy=True if it takes a TensorDict."
        )
    in_keys = [name for name in signature.parameters if name in names]
    out_keys: list[Any] = list(getattr(env, "action_keys", None) or ["action"])
    observation = spec.zero()
    with torch.no_grad():
        output = policy(**{key: _to_device(observation.get(key), policy) for key in in_keys})
    if isinstance(output, tuple):
        out_keys += [f"output{i}" for i in range(1, len(output))]
    return TensorDictModule(policy, in_keys=in_keys, out_keys=out_keys)


def _to_device(value: Any, policy: nn.Module) -> Any:
    for tensor in policy.parameters():
        return value.to(tensor.device)
    return value
