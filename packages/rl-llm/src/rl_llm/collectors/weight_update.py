"""``TransformersUpdater``: pushes a trainer's weights into the model that generates."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn


def _as_state_dict(weights: Any) -> Mapping[str, torch.Tensor]:
    if isinstance(weights, nn.Module):
        return weights.state_dict(keep_vars=False)
    if isinstance(weights, TensorDictBase):
        return {".".join(k) if isinstance(k, tuple) else k: v for k, v in weights.items(True, True)}
    if isinstance(weights, Mapping):
        return weights
    raise TypeError(
        "TransformersUpdater.push_weights expects an nn.Module, a state_dict or a TensorDict of "
        f"parameters (TensorDict.from_module); got {type(weights).__name__}."
    )


def _model_of(target: Any) -> nn.Module:
    """The ``nn.Module`` holding the generating weights: the object itself or its ``.model``."""
    if isinstance(getattr(target, "model", None), nn.Module):
        return target.model
    if isinstance(target, nn.Module):
        return target
    raise TypeError(
        "TransformersUpdater needs the generating model: an nn.Module (e.g. a transformers "
        f"PreTrainedModel) or a wrapper with a .model attribute; got {type(target).__name__}."
    )


class TransformersUpdater:
    """Copies trainer weights, in place, into the ``transformers`` model a collector generates with.

    The generating model may live on another device or dtype than the trainer's
    (a bf16 copy for generation, say): each tensor is cast and copied into the
    existing parameter or buffer, so references held elsewhere (a wrapper, a
    compiled graph) see the new values. The copy runs under a lock that
    :class:`AsyncLLMCollector` also holds while generating, so a reply never mixes
    two versions of the weights. This is the role of TorchRL's ``vLLMUpdater`` for
    a model served by ``transformers`` in the same process.

    Args:
        model: the generating model, or a wrapper with a ``.model`` attribute
            (e.g. ``TransformersWrapper``).
        strict: every tensor of the generating model must be given (``True``), or only
            those given are copied (``False``).

    Examples:
        >>> import torch
        >>> trainer, generator = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
        >>> updater = TransformersUpdater(generator)
        >>> updater.push_weights(trainer)
        >>> torch.equal(generator.weight, trainer.weight)
        True
    """

    def __init__(self, model: Any, *, strict: bool = True) -> None:
        self.model = _model_of(model)
        self.strict = strict
        self.lock = threading.RLock()
        self.num_updates = 0

    def push_weights(self, weights: Any) -> None:
        """Copies ``weights`` (module, ``state_dict`` or TensorDict) into the generating model.

        Raises:
            KeyError: an unknown name, or (``strict``) a tensor of the model not given.
            ValueError: a tensor whose shape differs from the model's.
        """
        source = _as_state_dict(weights)
        target = self.model.state_dict(keep_vars=True)
        unknown = sorted(set(source) - set(target))
        if unknown:
            raise KeyError(
                f"TransformersUpdater: weights {unknown[:5]} are not in the generating model (it has e.g. "
                f"{sorted(target)[:5]}); the trainer and generator must be the same architecture."
            )
        if self.strict:
            missing = sorted(set(target) - set(source))
            if missing:
                raise KeyError(
                    f"TransformersUpdater: the weights lack {missing[:5]} ({len(missing)} in all); pass the "
                    "whole model or build the updater with strict=False."
                )
        for name, value in source.items():
            if tuple(value.shape) != tuple(target[name].shape):
                raise ValueError(
                    f"TransformersUpdater: {name!r} has shape {tuple(value.shape)}, the generating model's "
                    f"{tuple(target[name].shape)}."
                )
        with self.lock, torch.no_grad():
            for name, value in source.items():
                dest = target[name]
                # Tied weights (e.g. GPT-2's lm_head and embeddings) are one tensor: copying twice is harmless.
                dest.copy_(value.detach().to(device=dest.device, dtype=dest.dtype))
            self.num_updates += 1

    __call__ = push_weights
