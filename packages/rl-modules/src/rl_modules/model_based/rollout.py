"""``RSSMRollout``: filter a sequence through the RSSM (prior, then posterior, step by step).

Given ``[*B, T]`` actions and observation embeddings (``("next", "encoded_latents")``) and an
initial ``"state"`` / ``"belief"``, each step runs the prior on ``(state, belief, action)``,
then the posterior on ``(("next", "belief"), ("next", "encoded_latents"))``; the posterior's
``("next", "state")`` and the prior's ``("next", "belief")`` become the next step's
``"state"`` / ``"belief"``. Names and keys are TorchRL's (``torchrl.modules.RSSMRollout``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from tensordict.utils import NestedKey, unravel_key

__all__ = ["RSSMRollout", "RSSMRolloutV3"]


class MissingKeyError(KeyError):
    """A ``KeyError`` whose message prints as written (``KeyError`` prints its repr)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def require_keys(td: TensorDictBase, keys: list[NestedKey], owner: str, hint: str) -> None:
    """Raise a ``KeyError`` naming the missing ``keys``, those present, and ``hint``."""
    present = set(td.keys(True, True))
    missing = [k for k in keys if unravel_key(k) not in present]
    if missing:
        raise MissingKeyError(
            f"{owner} expected the entries {missing} in its input, but they are missing. "
            f"Present entries: {sorted(str(k) for k in present)}. {hint}"
        )


class RSSMRollout(TensorDictModuleBase):
    """Runs the RSSM over the time dimension (the last batch dim) of a TensorDict.

    Args:
        rssm_prior: a ``TensorDictModule`` reading ``"state"``, ``"belief"``, ``"action"`` and
            writing (at least) ``("next", "belief")``.
        rssm_posterior: a ``TensorDictModule`` reading ``("next", "belief")`` and the
            embedding, writing ``("next", "state")``.
        reset_key: a bool entry (``[*B, T, 1]``) marking the first step of an episode, where
            state, belief and action are zeroed before the prior runs (``None``: no resets;
            the default here, ``"is_init"`` in :class:`RSSMRolloutV3`, as in TorchRL).
        compile_step: run the step (prior + posterior) through ``torch.compile``.
        compile_backend: backend of ``torch.compile``. Default ``"inductor"``.
        compile_mode: mode of ``torch.compile``.

    Example:
        >>> from tensordict.nn import TensorDictModule
        >>> from rl_modules.model_based import RSSMPosterior, RSSMPrior
        >>> prior = TensorDictModule(
        ...     RSSMPrior(None, hidden_dim=8, rnn_hidden_dim=8, state_dim=4, action_dim=2),
        ...     in_keys=["state", "belief", "action"],
        ...     out_keys=[("next", "prior_mean"), ("next", "prior_std"), "_", ("next", "belief")])
        >>> post = TensorDictModule(
        ...     RSSMPosterior(hidden_dim=8, state_dim=4, rnn_hidden_dim=8, obs_embed_dim=5),
        ...     in_keys=[("next", "belief"), ("next", "encoded_latents")],
        ...     out_keys=[("next", "posterior_mean"), ("next", "posterior_std"), ("next", "state")])
        >>> td = TensorDict({"state": torch.zeros(3, 7, 4), "belief": torch.zeros(3, 7, 8),
        ...                  "action": torch.randn(3, 7, 2),
        ...                  ("next", "encoded_latents"): torch.randn(3, 7, 5)}, [3, 7])
        >>> RSSMRollout(prior, post)(td)["next", "state"].shape
        torch.Size([3, 7, 4])
    """

    def __init__(
        self,
        rssm_prior: TensorDictModuleBase,
        rssm_posterior: TensorDictModuleBase,
        reset_key: NestedKey | None = None,
        compile_step: bool = False,
        compile_backend: str = "inductor",
        compile_mode: str | None = None,
    ) -> None:
        super().__init__()
        seq = TensorDictSequential(rssm_prior, rssm_posterior)
        self.in_keys = list(seq.in_keys)
        self.out_keys = list(seq.out_keys)
        self.rssm_prior = rssm_prior
        self.rssm_posterior = rssm_posterior
        self.reset_key = None if reset_key is None else unravel_key(reset_key)
        self.compile_step = compile_step
        self.compile_backend = compile_backend
        self.compile_mode = compile_mode
        self._compiled: Callable[[TensorDictBase], TensorDictBase] | None = None

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        self.rssm_prior(td)
        self.rssm_posterior(td)
        return td

    def _step_fn(self) -> Callable[[TensorDictBase], TensorDictBase]:
        if not self.compile_step:
            return self._step
        if self._compiled is None:
            self._compiled = torch.compile(
                self._step, backend=self.compile_backend, mode=self.compile_mode
            )
        return self._compiled

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Returns ``tensordict`` (shallow copy) with the per-step ``state`` / ``belief`` carried
        at the root and every output of prior and posterior, all ``[*B, T, ...]``.

        Raises:
            ValueError: the input has no time dimension (``batch_size == []``).
            KeyError: an input entry of the prior or the posterior is missing.
        """
        name = type(self).__name__
        if tensordict.ndim < 1:
            raise ValueError(
                f"{name} needs a time dimension: got batch_size {tuple(tensordict.batch_size)}, "
                "expected [*B, T]. Feed sequences (e.g. from a SliceSampler), or unsqueeze(-1)."
            )
        require_keys(
            tensordict,
            self.in_keys,
            name,
            "The initial 'state'/'belief' come from a TensorDictPrimer on the env (zeros); "
            "('next', 'encoded_latents') from the observation encoder.",
        )
        tdim = tensordict.ndim - 1
        keys = [k for k in self.in_keys if k not in ("state", "belief")]
        if self.reset_key is not None and unravel_key(self.reset_key) in set(
            tensordict.keys(True, True)
        ):
            keys.append(self.reset_key)
        reset_key = self.reset_key if self.reset_key in keys else None
        per_step = {k: tensordict.get(k).unbind(tdim) for k in keys}
        batch = tensordict.batch_size[:tdim]
        state = tensordict.get("state").select(tdim, 0)
        belief = tensordict.get("belief").select(tdim, 0)
        if not self.compile_step and _plain(self.rssm_prior) and _plain(self.rssm_posterior):
            return self._forward_plain(tensordict, per_step, reset_key, state, belief)
        step = self._step_fn()
        roots: list[tuple[torch.Tensor, torch.Tensor]] = []
        outs: list[TensorDictBase] = []
        for t in range(tensordict.shape[-1]):
            td = TensorDict({k: v[t] for k, v in per_step.items()}, batch_size=batch)
            if reset_key is not None:
                reset = td.get(reset_key)
                state, belief = _zero_where(reset, state), _zero_where(reset, belief)
                td.set("action", _zero_where(reset, td.get("action")))
            td.set("state", state)
            td.set("belief", belief)
            td = step(td)
            roots.append((state, belief))
            outs.append(td.select(*self.out_keys, strict=False))
            state, belief = td.get(("next", "state")), td.get(("next", "belief"))
        out = tensordict.copy()
        out.set("state", torch.stack([s for s, _ in roots], tdim))
        out.set("belief", torch.stack([b for _, b in roots], tdim))
        out.update(torch.stack(outs, tdim))
        return out

    def _forward_plain(
        self,
        tensordict: TensorDictBase,
        per_step: dict[NestedKey, tuple[torch.Tensor, ...]],
        reset_key: NestedKey | None,
        state: torch.Tensor,
        belief: torch.Tensor,
    ) -> TensorDictBase:
        """The same loop on plain tensors, for plain ``TensorDictModule`` prior and posterior:
        each module's ``module`` is called on its ``in_keys`` directly (no TensorDict per step)."""
        tdim = tensordict.ndim - 1
        modules = [
            (m.module, [unravel_key(k) for k in m.in_keys], [unravel_key(k) for k in m.out_keys])
            for m in (self.rssm_prior, self.rssm_posterior)
        ]
        out_keys = [k for k in (unravel_key(k) for k in self.out_keys) if k != "_"]
        stacks: dict[NestedKey, list[torch.Tensor]] = {
            k: [] for k in ("state", "belief", *out_keys)
        }
        per_step = {unravel_key(k): v for k, v in per_step.items()}
        next_state, next_belief = ("next", "state"), ("next", "belief")
        for t in range(tensordict.shape[-1]):
            values = {k: v[t] for k, v in per_step.items()}
            if reset_key is not None:
                reset = values[unravel_key(reset_key)]
                state, belief = _zero_where(reset, state), _zero_where(reset, belief)
                values["action"] = _zero_where(reset, values["action"])
            values["state"], values["belief"] = state, belief
            for module, in_keys, module_out in modules:
                result = module(*[values[k] for k in in_keys])
                if not isinstance(result, tuple):
                    result = (result,)
                for key, value in zip(module_out, result, strict=True):
                    if key != "_":
                        values[key] = value
            for key, stack in stacks.items():
                stack.append(values[key])
            state, belief = values[next_state], values[next_belief]
        out = tensordict.copy()
        for key, stack in stacks.items():
            out.set(key, torch.stack(stack, tdim))
        return out


def _plain(module: TensorDictModuleBase) -> bool:
    """An exact ``TensorDictModule`` without hooks: reading ``in_keys`` and writing ``out_keys``
    is all its call does."""
    return (
        type(module) is TensorDictModule
        and not module._forward_hooks
        and not module._forward_pre_hooks
        and list(module.out_keys) == list(getattr(module, "out_keys_source", module.out_keys))
    )


class RSSMRolloutV3(RSSMRollout):
    """:class:`RSSMRollout` for DreamerV3's modules, resetting at ``"is_init"`` by default.

    Args:
        rssm_prior: wraps :class:`~rl_modules.model_based.RSSMPriorV3`, writing
            ``("next", "prior_logits")``, ``("next", "state")``, ``("next", "belief")``.
        rssm_posterior: wraps :class:`~rl_modules.model_based.RSSMPosteriorV3`, writing
            ``("next", "posterior_logits")``, ``("next", "state")``.
        reset_key: see :class:`RSSMRollout`. Default ``"is_init"``.
        **kwargs: ``compile_step`` and co., see :class:`RSSMRollout`.
    """

    def __init__(
        self,
        rssm_prior: TensorDictModuleBase,
        rssm_posterior: TensorDictModuleBase,
        reset_key: NestedKey | None = "is_init",
        **kwargs: Any,
    ) -> None:
        super().__init__(rssm_prior, rssm_posterior, reset_key=reset_key, **kwargs)


def _zero_where(reset: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    mask = (
        reset.reshape(*reset.shape[: value.ndim - 1], -1).any(-1)
        if reset.ndim >= value.ndim
        else reset
    )
    while mask.ndim < value.ndim:
        mask = mask.unsqueeze(-1)
    return torch.where(mask, torch.zeros_like(value), value)
