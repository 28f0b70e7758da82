"""VideoRecorder (TorchRL's torchrl.record.VideoRecorder); transforms that only create entries;
Timer refuses a call outside an env."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs import (
    Compose,
    PendulumEnv,
    SerialEnv,
    StepCounter,
    Timer,
    Transform,
    TransformedEnv,
    Unbounded,
    VideoRecorder,
)


class AddPixels(Transform):
    """No input key, one output key: writes constant 8x8 RGB frames."""

    def __init__(self) -> None:
        super().__init__(in_keys=[], out_keys=["pixels"])

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        shape = (*next_tensordict.batch_size, 3, 8, 8)
        return next_tensordict.set("pixels", torch.zeros(shape, dtype=torch.uint8))

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec):
        shape = (*observation_spec.shape, 3, 8, 8)
        observation_spec["pixels"] = Unbounded(shape=shape, dtype=torch.uint8)
        return observation_spec


class Capture:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def log_video(self, name=None, video=None, step=None, **kwargs):
        self.calls.append({"name": name, "video": video, "step": step, **kwargs})


def pixels_env(max_steps=None):
    ts = [AddPixels()] + ([StepCounter(max_steps=max_steps)] if max_steps else [])
    return TransformedEnv(PendulumEnv(), Compose(*ts))


@pytest.mark.parametrize(
    "frame, n",
    [((1, 16, 16), 1), ((16, 16, 3), 1), ((4, 1, 16, 16), 4), ((2, 16, 16, 3), 2)],
)
def test_frames_become_rgb_chw_and_batches_are_flattened_outside_an_env(frame, n):
    recorder = VideoRecorder(None, None, fps=30)
    recorder._apply_transform(torch.zeros(frame, dtype=torch.uint8))
    assert len(recorder.obs) == n
    assert all(f.shape == (3, 16, 16) for f in recorder.obs)


def test_max_frames_caps_until_dump_and_is_checked():
    with pytest.raises(ValueError, match="max_frames"):
        VideoRecorder(None, None, max_frames=0)
    recorder = VideoRecorder(None, None, max_frames=5, make_grid=False)
    for _ in range(3):
        recorder._apply_transform(torch.zeros(4, 3, 8, 8, dtype=torch.uint8))
    assert len(recorder.obs) == 5
    recorder.dump()
    assert recorder.obs == [] and recorder.count == 0


def test_batched_env_is_recorded_as_one_grid_video():
    logger = Capture()
    env = TransformedEnv(SerialEnv(2, pixels_env), VideoRecorder(logger, tag="grid"))
    env.rollout(3)
    env.transform.dump(step=7)
    env.close()
    (call,) = logger.calls
    assert call["name"] == "grid" and call["step"] == 7
    assert call["video"].shape == (1, 4, 3, 8, 16)  # reset + 3 steps, two 8x8 frames side by side


@pytest.mark.parametrize("batched", [False, True])
def test_dump_on_done(batched):
    logger = Capture()
    recorder = VideoRecorder(logger, tag="done", dump_on_done=True, fps=15)
    base = SerialEnv(2, lambda: pixels_env(max_steps=4)) if batched else pixels_env(4)
    env = TransformedEnv(base, recorder)
    env.rollout(10)
    env.close()
    (call,) = logger.calls
    assert call["video"].shape[1] == 5 and call["fps"] == 15
    assert recorder.obs == []


def test_skip_keeps_one_call_in_skip():
    recorder = VideoRecorder(None, None, skip=2)
    for _ in range(5):
        recorder._apply_transform(torch.zeros(3, 4, 4, dtype=torch.uint8))
    assert len(recorder.obs) == 3


def test_to_animation_empties_the_same_buffer():
    pytest.importorskip("matplotlib")
    from matplotlib.animation import ArtistAnimation

    recorder = VideoRecorder(None, None, fps=30)
    recorder._apply_transform(torch.zeros(3, 8, 8, dtype=torch.uint8))
    buffer = recorder.obs
    assert isinstance(recorder.to_animation(title="t"), ArtistAnimation)
    assert recorder.obs is buffer and buffer == []


def test_mismatched_keys_still_raise_when_there_are_inputs():
    with pytest.raises(ValueError, match="same number of input and output keys"):
        Transform(in_keys=["a", "b"], out_keys=["c"])


@pytest.mark.parametrize("wrap", [lambda t: t, Compose])
def test_timer_outside_an_env_is_refused(wrap):
    with pytest.raises(NotImplementedError, match="TransformedEnv"):
        wrap(Timer())(TensorDict())
