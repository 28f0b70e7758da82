"""MacroPrimitiveTransform: macro action -> interpolated low-level sequence, and its
execution by MacroActionEnv (against a manual loop over a twin env)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Bounded,
    Categorical,
    Compose,
    Composite,
    HumanoidMacroAction,
    MacroActionEnv,
    MacroPrimitive,
    MacroPrimitiveTransform,
    MultiAction,
    PendulumEnv,
    TargetMacroAction,
    TransformedEnv,
    Unbounded,
    URScriptPrimitiveTransform,
)
from rl_envs.transforms.macro_primitive import interpolate_macro


def test_interpolate_macro_matches_the_closed_form():
    start, target = torch.tensor([[1.0, -2.0]]), torch.tensor([[4.0, 2.0]])
    seq = interpolate_macro(start, target, 3, 2)
    expected = [[1 + 3 * f, -2 + 4 * f] for f in (1 / 3, 2 / 3, 1, 1, 1)]
    torch.testing.assert_close(seq[0], torch.tensor(expected))
    with pytest.raises(ValueError, match="steps >= 1"):
        interpolate_macro(start, target, 0)


def test_raw_tensor_is_a_move_from_zero():
    t = MacroPrimitiveTransform(action_dim=2, macro_steps=4)
    target = torch.tensor([[4.0, 8.0], [-4.0, 0.0]])
    out = t.inv(TensorDict(action=target, batch_size=[2]))["action"]
    assert out.shape == (2, 4, 2)
    torch.testing.assert_close(out[:, 0], target / 4)
    torch.testing.assert_close(out[:, -1], target)


def test_structured_action_durations_and_wait():
    t = MacroPrimitiveTransform(action_dim=3, macro_steps=9)
    move = TargetMacroAction.move(torch.ones(3), steps=2, settle_steps=3)
    out = t.inv(TensorDict(action=move, batch_size=[1]))["action"]
    assert out.shape == (1, 5, 3)  # the action's durations win over macro_steps
    torch.testing.assert_close(out[0, 1:], torch.ones(4, 3))
    wait = TargetMacroAction.wait(action_dim=3, steps=2, batch_size=[1])
    torch.testing.assert_close(
        t.inv(TensorDict(action=wait, batch_size=[1]))["action"], torch.zeros(1, 2, 3)
    )
    # a plain TensorDict with the same fields; mode WAIT ignores the target
    plain = TensorDict(
        mode=torch.tensor([[int(MacroPrimitive.WAIT)]]), target=torch.ones(1, 3), batch_size=[1]
    )
    torch.testing.assert_close(
        t.inv(TensorDict(action=plain, batch_size=[1]))["action"], torch.zeros(1, 9, 3)
    )
    reach = HumanoidMacroAction.reach_control(torch.full((1, 3), 2.0), steps=2)
    assert t.inv(TensorDict(action=reach, batch_size=[1]))["action"][0, -1].tolist() == [2.0] * 3


def test_nested_key_and_errors():
    t = MacroPrimitiveTransform(action_key=("agent", "action"), action_dim=2, macro_steps=2)
    td = TensorDict({("agent", "action"): torch.ones(1, 2)}, batch_size=[1])
    assert t.inv(td)["agent", "action"].shape == (1, 2, 2)
    with pytest.raises(RuntimeError, match="no action under"):
        t.inv(TensorDict(batch_size=[1]))
    plain = MacroPrimitiveTransform(action_dim=2)
    with pytest.raises(RuntimeError, match="'target'"):
        plain.inv(
            TensorDict(action=TensorDict(mode=torch.zeros(1, 1), batch_size=[1]), batch_size=[1])
        )
    with pytest.raises(ValueError, match="steps >= 1"):
        TargetMacroAction.move(torch.ones(2), steps=0)
    with pytest.raises(ValueError, match="macro_steps >= 1"):
        MacroPrimitiveTransform(macro_steps=0)


def test_specs_expose_mode_and_target():
    t = MacroPrimitiveTransform(macro_steps=2)
    action = Composite(action=Bounded(-1.0, 1.0, shape=(3, 5), dtype=torch.float64), shape=(3,))
    spec = t.transform_action_spec(action)
    assert isinstance(spec["action", "mode"], Categorical) and spec["action", "mode"].n == 2
    assert isinstance(spec["action", "target"], Unbounded)
    assert spec["action", "target"].shape == (3, 5)
    assert spec["action", "target"].dtype == torch.float64
    out = t.transform_input_spec(Composite(full_action_spec=action, shape=(3,)))
    assert ("action", "target") in out["full_action_spec"].rand().keys(True, True)
    with pytest.raises(RuntimeError, match="action_dim"):
        t.transform_action_spec(Composite(shape=()))


def test_expand_drives_macro_action_env_like_a_manual_loop():
    plan = MacroPrimitiveTransform(action_dim=1, macro_steps=3, settle_steps=1)
    macro = MacroActionEnv(PendulumEnv(batch_size=[2]), plan.expand, Bounded(-2.0, 2.0, (1,)))
    twin = PendulumEnv(batch_size=[2])
    macro.set_seed(3)
    twin.set_seed(3)
    td, ref = macro.reset(), twin.reset()
    target = torch.tensor([[1.5], [-0.6]])
    out = macro.step(td.set("action", target))["next"]
    total = torch.zeros(2, 1)
    for frac in (1 / 3, 2 / 3, 1.0, 1.0):
        nxt = twin.step(ref.set("action", frac * target))["next"]
        total += nxt["reward"]
        ref = nxt
    torch.testing.assert_close(out["reward"], total)
    torch.testing.assert_close(out["observation"], nxt["observation"])


def test_execute_runs_the_whole_macro_in_one_env_step():
    t = MacroPrimitiveTransform(action_dim=1, macro_steps=3, settle_steps=1, execute=True)
    assert isinstance(t, Compose) and isinstance(t[0], MultiAction)
    assert isinstance(t[1], MacroPrimitiveTransform)
    env = TransformedEnv(PendulumEnv(batch_size=[2]), t)
    twin = PendulumEnv(batch_size=[2])
    env.set_seed(5)
    twin.set_seed(5)
    td, ref = env.reset(), twin.reset()
    target = torch.tensor([[1.2], [-0.9]])
    out = env.step(td.set("action", TargetMacroAction.move(target, steps=3, settle_steps=1)))
    rewards = []
    for frac in (1 / 3, 2 / 3, 1.0, 1.0):
        ref = twin.step(ref.set("action", frac * target))["next"]
        rewards.append(ref["reward"])
    torch.testing.assert_close(out["next", "reward"], torch.stack(rewards, 1))  # stacked
    torch.testing.assert_close(out["next", "observation"], ref["observation"])
    ur = URScriptPrimitiveTransform(macro_steps=2, execute=True, stack_rewards=False)
    assert isinstance(ur[1], URScriptPrimitiveTransform) and not ur[0].stack_rewards
