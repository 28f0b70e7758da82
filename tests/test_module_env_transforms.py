"""rl_envs' get_primers_from_module / get_env_transforms_from_module on rl_modules' stateful modules."""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from rl_envs import (
    Compose,
    InitTracker,
    PendulumEnv,
    SerialEnv,
    StepCounter,
    TensorDictPrimer,
    TransformedEnv,
    get_env_transforms_from_module,
    get_primers_from_module,
)
from rl_modules import ConsistentDropoutModule, GRUModule, LSTMModule


def test_recurrent_policy_gets_its_tracker_and_states():
    gru = GRUModule(input_size=3, hidden_size=5, in_key="observation", out_key="features")
    lstm = LSTMModule(input_size=5, hidden_size=4, in_keys=["features", "h", "c", "is_init"],
                      out_keys=["out", ("next", "h"), ("next", "c")])  # fmt: skip
    policy = TensorDictSequential(gru, lstm)
    primers = get_primers_from_module(policy)
    assert isinstance(primers, Compose) and len(primers) == 2
    assert set(primers[0].primers) == {"recurrent_state"}
    assert set(primers[1].primers) == {"h", "c"}
    transforms = get_env_transforms_from_module(gru)
    assert [type(t) for t in transforms.transforms] == [InitTracker, TensorDictPrimer]
    env = TransformedEnv(PendulumEnv(batch_size=[2]), get_env_transforms_from_module(policy))
    td = env.reset()
    assert td["is_init"].all() and td["recurrent_state"].shape == (2, 1, 5)
    assert td["h"].shape == (2, 1, 4)


def test_consistent_dropout_mask_is_fixed_within_a_trajectory():
    torch.manual_seed(0)
    dropout = ConsistentDropoutModule(0.5, in_keys="hidden", input_shape=(2, 8))
    policy = TensorDictSequential(
        TensorDictModule(torch.nn.Linear(3, 8), in_keys=["observation"], out_keys=["hidden"]),
        dropout,
        TensorDictModule(
            torch.nn.Sequential(torch.nn.Linear(8, 1), torch.nn.Tanh()),
            in_keys=["hidden"],
            out_keys=["action"],
        ),
    )
    env = SerialEnv(2, [lambda: TransformedEnv(PendulumEnv(), StepCounter(4))] * 2)
    env = TransformedEnv(env, get_primers_from_module(policy))
    with torch.no_grad():
        rollout = env.rollout(7, policy, break_when_any_done=False)
    mask = rollout[dropout.in_keys[1]]
    # steps 0-3 are one trajectory (StepCounter(4) truncates), steps 4-6 the next
    assert (mask[:, 1:4] == mask[:, :1]).all() and (mask[:, 5:] == mask[:, 4:5]).all()
    assert (mask[:, 4] != mask[:, 0]).any()
