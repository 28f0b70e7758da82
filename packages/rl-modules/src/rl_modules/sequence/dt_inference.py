"""``DecisionTransformerInferenceWrapper``: run a DT policy on a context window, keep the last step."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey, unravel_key

__all__ = ["DecisionTransformerInferenceWrapper"]


class DecisionTransformerInferenceWrapper(TensorDictModuleBase):
    """Act with a Decision Transformer policy from the last ``inference_context`` steps.

    The input holds windows ``[*batch, T, ...]`` of observations, actions and returns-to-go
    (e.g. stacked by a frame-stacking transform, where the action window ends with the
    *previous* action ``a_{t-1}`` beside ``s_t``). Before the policy runs the actions are
    shifted one step left, with zeros at the newest step (the action being chosen), so each
    action sits beside its own state as in training; then the steps older than the last
    ``inference_context`` are zeroed.
    The output keeps the policy's entries, the last predicted action ``[*batch, action_dim]``
    and the last return-to-go ``[*batch, 1]``; the observation window is left as it came.
    The input TensorDict is not modified.

    Args:
        policy: a TensorDict module reading the observation, action and return-to-go windows
            and writing the action key.

    Keyword Args:
        inference_context: how many of the newest steps the policy sees (5, as TorchRL).

    Raises:
        ValueError: ``inference_context`` below 1, or a window whose length does not match
            across the three entries.

    Examples:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from rl_modules.sequence import DecisionTransformer, DTActor
        >>> config = DecisionTransformer.DTConfig(n_embd=16, n_layer=1, n_head=2, n_inner=32)
        >>> actor = TensorDictModule(DTActor(4, 2, config), ["observation", "action", "return_to_go"],
        ...                          ["action"])
        >>> policy = DecisionTransformerInferenceWrapper(actor, inference_context=3)
        >>> td = TensorDict(observation=torch.randn(1, 20, 4), action=torch.randn(1, 20, 2),
        ...                 return_to_go=torch.randn(1, 20, 1), batch_size=[1])
        >>> out = policy(td)
        >>> out["action"].shape, out["return_to_go"].shape
        (torch.Size([1, 2]), torch.Size([1, 1]))
    """

    def __init__(self, policy: TensorDictModuleBase, *, inference_context: int = 5) -> None:
        super().__init__()
        if inference_context < 1:
            raise ValueError(f"inference_context must be >= 1, got {inference_context}.")
        self.td_module = policy
        self.inference_context = inference_context
        self.observation_key: NestedKey = "observation"
        self.action_key: NestedKey = "action"
        self.out_action_key: NestedKey = "action"
        self.return_to_go_key: NestedKey = "return_to_go"
        self._check_out_action(self.out_action_key)

    @property
    def in_keys(self) -> list[NestedKey]:
        """The observation, action and return-to-go keys."""
        return [self.observation_key, self.action_key, self.return_to_go_key]

    @property
    def out_keys(self) -> list[NestedKey]:
        """The policy's outputs and the three input keys."""
        keys = {*self.td_module.out_keys, *self.in_keys}
        return sorted(keys, key=str)

    def _check_out_action(self, key: NestedKey) -> None:
        if key not in [unravel_key(k) for k in self.td_module.out_keys]:
            raise ValueError(
                f"DecisionTransformerInferenceWrapper: the policy does not write {key!r} (its "
                f"out_keys are {self.td_module.out_keys}); pass set_tensor_keys(out_action=...) "
                "naming the policy's action output."
            )

    def set_tensor_keys(self, **kwargs: NestedKey) -> DecisionTransformerInferenceWrapper:
        """Change ``observation``, ``action``, ``return_to_go`` or ``out_action`` keys."""
        allowed = {"observation", "action", "return_to_go", "out_action"}
        unknown = sorted(set(kwargs) - allowed)
        if unknown:
            raise TypeError(f"unknown key name(s) {unknown}; accepted: {sorted(allowed)}.")
        if "out_action" in kwargs:
            self._check_out_action(unravel_key(kwargs["out_action"]))
        for name, key in kwargs.items():
            setattr(self, f"{name}_key", unravel_key(key))
        return self

    def mask_context(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Zero the steps before the inference context and shift the actions (see above)."""
        obs = tensordict.get(self.observation_key)
        action = tensordict.get(self.action_key)
        rtg = tensordict.get(self.return_to_go_key)
        if not obs.shape[:-1] == action.shape[:-1] == rtg.shape[:-1]:
            raise ValueError(
                "DecisionTransformerInferenceWrapper: the observation, action and return-to-go "
                f"windows must share [*batch, T], got {tuple(obs.shape)}, {tuple(action.shape)} "
                f"and {tuple(rtg.shape)}."
            )
        length, ctx = obs.shape[-2], self.inference_context
        keep = torch.arange(length, device=obs.device) >= length - ctx
        keep = keep.unsqueeze(-1)
        # the action beside step i is a_i of the window shifted left: a zero at the newest step
        shifted = torch.cat([action[..., 1:, :], torch.zeros_like(action[..., :1, :])], dim=-2)
        tensordict.set(self.observation_key, obs * keep)
        tensordict.set(self.action_key, shifted * keep)
        tensordict.set(self.return_to_go_key, rtg * keep)
        return tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The policy on the masked window; the last action and return-to-go."""
        out = tensordict.copy()
        obs = out.get(self.observation_key)
        out = self.td_module(self.mask_context(out))
        action = out.get(self.out_action_key)
        if out.ndim == action.ndim - 1:  # the time dim is part of the batch: drop it
            out.batch_size = out.batch_size[:-1]
        out.set(self.out_action_key, action[..., -1, :])
        out.set(self.return_to_go_key, out.get(self.return_to_go_key)[..., -1, :])
        out.set(self.observation_key, obs)
        return out
