"""Actor-critic containers: a shared trunk with policy and value heads."""

from __future__ import annotations

from tensordict.nn import TensorDictModuleBase, TensorDictSequential


class ActorValueOperator(TensorDictSequential):
    """``common -> policy`` and ``common -> value`` (V critic) sharing a trunk.

    Calling it runs all three. :meth:`get_policy_operator` and
    :meth:`get_value_operator` return stand-alone sequences that share the
    parameters (``common`` is the same module object).

    Args:
        common_operator: the trunk (writes e.g. ``"hidden"``).
        policy_operator: the policy head (reads the trunk's output).
        value_operator: the value head (reads the trunk's output).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule as Mod
        >>> trunk = Mod(torch.nn.Linear(3, 8), ["observation"], ["hidden"])
        >>> pi = Mod(torch.nn.Linear(8, 2), ["hidden"], ["action"])
        >>> v = Mod(torch.nn.Linear(8, 1), ["hidden"], ["state_value"])
        >>> op = ActorValueOperator(trunk, pi, v)
        >>> td = op(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))
        >>> sorted(td.keys())
        ['action', 'hidden', 'observation', 'state_value']
    """

    def __init__(
        self,
        common_operator: TensorDictModuleBase,
        policy_operator: TensorDictModuleBase,
        value_operator: TensorDictModuleBase,
    ) -> None:
        super().__init__(common_operator, policy_operator, value_operator)

    def get_policy_operator(self) -> TensorDictSequential:
        """``common -> policy`` (shares parameters)."""
        return TensorDictSequential(self.module[0], self.module[1])

    def get_value_operator(self) -> TensorDictSequential:
        """``common -> value`` (shares parameters)."""
        return TensorDictSequential(self.module[0], self.module[2])

    def get_policy_head(self) -> TensorDictModuleBase:
        return self.module[1]

    def get_value_head(self) -> TensorDictModuleBase:
        return self.module[2]


class ActorCriticOperator(ActorValueOperator):
    """``common -> policy -> value`` where the value head is a Q(s, a) critic.

    The critic reads the action written by the policy. :meth:`get_critic_operator`
    is the whole chain; :meth:`get_policy_operator` stops after the policy.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule as Mod
        >>> trunk = Mod(torch.nn.Linear(3, 8), ["observation"], ["hidden"])
        >>> pi = Mod(torch.nn.Linear(8, 2), ["hidden"], ["action"])
        >>> q = Mod(lambda h, a: torch.cat([h, a], -1).sum(-1, keepdim=True), ["hidden", "action"], ["state_action_value"])
        >>> op = ActorCriticOperator(trunk, pi, q)
        >>> op(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))["state_action_value"].shape
        torch.Size([4, 1])
    """

    def get_critic_operator(self) -> TensorDictSequential:
        """``common -> policy -> value`` (shares parameters)."""
        return TensorDictSequential(self.module[0], self.module[1], self.module[2])

    def get_value_operator(self) -> TensorDictSequential:
        """Same as :meth:`get_critic_operator`: the critic needs the policy's action."""
        return self.get_critic_operator()


class ActorCriticWrapper(TensorDictSequential):
    """A policy and a critic without a shared trunk, callable as one.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule as Mod
        >>> pi = Mod(torch.nn.Linear(3, 2), ["observation"], ["action"])
        >>> v = Mod(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> ActorCriticWrapper(pi, v).get_policy_operator() is pi
        True
    """

    def __init__(
        self, policy_operator: TensorDictModuleBase, value_operator: TensorDictModuleBase
    ) -> None:
        super().__init__(policy_operator, value_operator)

    def get_policy_operator(self) -> TensorDictModuleBase:
        return self.module[0]

    def get_value_operator(self) -> TensorDictModuleBase:
        return self.module[1]

    get_policy_head = get_policy_operator
    get_value_head = get_value_operator
