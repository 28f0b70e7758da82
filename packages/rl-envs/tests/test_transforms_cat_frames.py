import pytest
import torch
from tensordict import TensorDict

from rl_envs import CatFrames, Compose, PendulumEnv, StepCounter, TransformedEnv, check_env_specs


def test_in_env_stacks_last_frames():
    env = TransformedEnv(PendulumEnv(batch_size=[2]), StepCounter(max_steps=3))
    env.append_transform(CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["stack"]))
    assert env.observation_spec["stack"].shape == (2, 9)
    r = env.rollout(6, break_when_any_done=False)
    obs, nobs = r["observation"], r["next", "observation"]
    # hand-built expectation for row 0, step 1 (second step of the first episode)
    expected = torch.cat([obs[0, 0], obs[0, 0], nobs[0, 0], nobs[0, 1]][1:], -1)
    torch.testing.assert_close(r["next", "stack"][0, 1], expected)
    # after the reset at step 3 the buffer is refilled with the first frame
    torch.testing.assert_close(r["stack"][0, 3], obs[0, 3].repeat(3))
    check_env_specs(env)


@pytest.mark.parametrize("padding", ["same", "constant"])
def test_on_trajectories_respects_episode_ends(padding):
    obs = torch.arange(1.0, 6.0).reshape(1, 5, 1)  # frames 1..5
    done = torch.tensor([[False, True, False, False, False]]).unsqueeze(-1)
    td = TensorDict(obs=obs, next=TensorDict(done=done, batch_size=[1, 5]), batch_size=[1, 5])
    out = CatFrames(N=2, dim=-1, in_keys=["obs"], padding=padding)(td)["obs"][0]
    pad = 1.0 if padding == "same" else 0.0
    first_of_ep2 = 3.0 if padding == "same" else 0.0
    expected = torch.tensor([[pad, 1.0], [1.0, 2.0], [first_of_ep2, 3.0], [3.0, 4.0], [4.0, 5.0]])
    torch.testing.assert_close(out, expected)


def test_errors():
    with pytest.raises(ValueError, match="negative"):
        CatFrames(N=2, dim=1)
    with pytest.raises(KeyError, match="'pixels'"):
        CatFrames(N=2, dim=-3)._reset(TensorDict(), TensorDict(obs=torch.zeros(1)))


@pytest.mark.parametrize(
    ("padding", "expected"),
    [
        # frames 1..5, an episode ends after frame 2: the window restarts at frame 3
        ("same", [[1.0, 1.0], [1.0, 2.0], [3.0, 3.0], [3.0, 4.0], [4.0, 5.0]]),
        ("constant", [[0.0, 1.0], [1.0, 2.0], [0.0, 3.0], [3.0, 4.0], [4.0, 5.0]]),
    ],
)
def test_as_inverse_stacks_in_inv_and_forward_is_identity(padding, expected):
    obs = torch.arange(1.0, 6.0).reshape(1, 5, 1)
    done = torch.tensor([[False, True, False, False, False]]).unsqueeze(-1)
    td = TensorDict(obs=obs, next=TensorDict(done=done, batch_size=[1, 5]), batch_size=[1, 5])
    t = CatFrames(
        N=2, dim=-1, in_keys=["obs"], out_keys=["stack"], padding=padding, as_inverse=True
    )
    out = t.inv(td)
    assert torch.equal(out["stack"][0], torch.tensor(expected))
    assert "stack" not in set(td.keys())  # inv works on a shallow copy
    assert torch.equal(out["obs"], obs)
    same = t(td)
    assert same is td and "stack" not in set(same.keys())  # forward: identity
    # through a Compose, inv runs it too
    assert torch.equal(Compose(t.clone()).inv(td)["stack"][0], torch.tensor(expected))


def test_as_inverse_three_frames_of_two_features_without_done():
    # two rows of 4 steps, features [t, 10 t] (+ 100 on row 1); no done: one episode per row
    steps = torch.arange(4.0)
    obs = torch.stack([steps, 10 * steps], -1).expand(2, 4, 2) + torch.tensor([[[0.0]], [[100.0]]])
    out = CatFrames(N=3, dim=-1, in_keys=["obs"], as_inverse=True).inv(
        TensorDict(obs=obs, batch_size=[2, 4])
    )["obs"]
    row0 = torch.tensor(
        [
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 1.0, 10.0],
            [0.0, 0.0, 1.0, 10.0, 2.0, 20.0],
            [1.0, 10.0, 2.0, 20.0, 3.0, 30.0],
        ]
    )
    assert torch.equal(out[0], row0)
    assert torch.equal(out[1], row0 + 100.0)


def test_as_inverse_is_refused_in_an_env():
    with pytest.raises(RuntimeError, match=r"as_inverse=True.*cannot sit in an env"):
        TransformedEnv(
            PendulumEnv(), CatFrames(N=2, dim=-1, in_keys=["observation"], as_inverse=True)
        )
    env = TransformedEnv(PendulumEnv(), CatFrames(N=2, dim=-1, in_keys=["observation"]))
    assert env._needs_inv is False  # the default has no inverse: inputs are not copied


@pytest.mark.parametrize(("padding", "fill"), [("same", 0.0), ("constant", -1.0)])
def test_call_outside_env_pushes_frames_into_a_lazily_filled_buffer(padding, fill):
    # TorchRL's online ``_call``: without a reset the buffer starts as zeros
    # ("same") or padding_value ("constant"), then each call shifts in a frame.
    t = CatFrames(N=3, dim=-1, in_keys=["obs"], padding=padding, padding_value=-1.0)
    out = []
    for v in (1.0, 2.0, 3.0, 4.0):
        out.append(t._call(TensorDict(obs=torch.tensor([v])))["obs"])
    expected = [[fill, fill, 1.0], [fill, 1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]]
    torch.testing.assert_close(torch.stack(out), torch.tensor(expected))
    assert out[0] is not out[1]


def test_positive_dim_error_names_the_fix():
    with pytest.raises(ValueError, match="dim must be < 0"):
        CatFrames(N=2, dim=1, in_keys=["obs"])
