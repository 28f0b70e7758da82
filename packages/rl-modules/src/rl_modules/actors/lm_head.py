"""An actor-value operator built from a language model with an LM head (TorchRL's name)."""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from rl_modules.actors.actor_critic import ActorValueOperator
from rl_modules.actors.safe import SafeProbabilisticModule, SafeProbabilisticTensorDictSequential


def _last_position(x: torch.Tensor) -> torch.Tensor:
    """The hidden state of the last token: ``[batch, tokens, d] -> [batch, d]``."""
    return x[:, -1, :]


class LMHeadActorValueOperator(ActorValueOperator):
    """A token policy and a value head on the last hidden state of a causal language model.

    ``base_model`` is any module with a ``.transformer`` (called with
    ``input_ids`` and ``attention_mask``, returning ``(hidden states, ...)``, as
    transformers' ``GPT2LMHeadModel`` with ``return_dict=False``) and a linear
    ``.lm_head``. The trunk writes ``"x"``, the last position's hidden state; the
    policy head is the model's own ``lm_head`` (``"logits"``) followed by a
    categorical over the vocabulary (``"action"``, ``"action_log_prob"``); the
    value head is a new ``Linear(d, 1, bias=False)`` (``"state_value"``).

    Args:
        base_model: the language model (its ``transformer`` and ``lm_head`` are shared, not copied).

    Raises:
        TypeError: ``base_model`` lacks ``.transformer`` or a linear ``.lm_head``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Trunk(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.embed = torch.nn.Embedding(10, 4)
        ...     def forward(self, input_ids, attention_mask):
        ...         h = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        ...         return h, None
        >>> class TinyLM(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.transformer, self.lm_head = Trunk(), torch.nn.Linear(4, 10)
        >>> op = LMHeadActorValueOperator(TinyLM())
        >>> td = TensorDict(input_ids=torch.randint(10, (2, 3)), attention_mask=torch.ones(2, 3), batch_size=[2])
        >>> out = op(td)
        >>> out["action"].shape, out["state_value"].shape
        (torch.Size([2]), torch.Size([2, 1]))
    """

    def __init__(self, base_model: nn.Module) -> None:
        transformer = getattr(base_model, "transformer", None)
        lm_head = getattr(base_model, "lm_head", None)
        if not isinstance(transformer, nn.Module) or not isinstance(lm_head, nn.Linear):
            raise TypeError(
                "LMHeadActorValueOperator: base_model must have a .transformer module and a "
                f"linear .lm_head (a *LMHeadModel), got {type(base_model).__name__} with "
                f"transformer={type(transformer).__name__}, lm_head={type(lm_head).__name__}."
            )
        common = TensorDictSequential(
            TensorDictModule(
                transformer,
                in_keys={"input_ids": "input_ids", "attention_mask": "attention_mask"},
                out_keys=["x", "_"],
            ),
            TensorDictModule(_last_position, in_keys=["x"], out_keys=["x"]),
        )
        policy = SafeProbabilisticTensorDictSequential(
            TensorDictModule(lm_head, in_keys=["x"], out_keys=["logits"]),
            SafeProbabilisticModule(
                in_keys=["logits"],
                out_keys=["action"],
                distribution_class=torch.distributions.Categorical,
                return_log_prob=True,
            ),
        )
        value = TensorDictModule(
            nn.Linear(lm_head.in_features, 1, bias=False), in_keys=["x"], out_keys=["state_value"]
        )
        super().__init__(common, policy, value)
