import pytest
import torch
from tensordict import TensorDict

from rl_envs import (
    Bounded,
    CenterCrop,
    Composite,
    EnvBase,
    GrayScale,
    Resize,
    ToTensorImage,
    TransformedEnv,
    check_env_specs,
)


class PixelEnv(EnvBase):
    """Renders a [H, W, 3] uint8 image whose value encodes the step count."""

    def __init__(self, h=8, w=6):
        super().__init__()
        self.h, self.w = h, w
        self.observation_spec = Composite(
            pixels=Bounded(0, 255, shape=(h, w, 3), dtype=torch.uint8)
        )
        self.action_spec = Bounded(-1.0, 1.0, shape=(1,))

    def _img(self):
        return torch.full((self.h, self.w, 3), 10 * self.t, dtype=torch.uint8)

    def _reset(self, td):
        self.t = 0
        return TensorDict(pixels=self._img())

    def _step(self, td):
        self.t += 1
        return TensorDict(
            pixels=self._img(), reward=torch.zeros(1), terminated=torch.zeros(1, dtype=torch.bool)
        )

    def _set_seed(self, seed):
        pass


def test_to_tensor_image():
    img = torch.randint(0, 256, (2, 4, 5, 3), dtype=torch.uint8)
    out = ToTensorImage()(TensorDict(pixels=img, batch_size=[2]))["pixels"]
    torch.testing.assert_close(out, img.permute(0, 3, 1, 2).float() / 255)


def test_grayscale_weights():
    img = torch.rand(3, 2, 2)
    out = GrayScale()(TensorDict(pixels=img))["pixels"]
    torch.testing.assert_close(out[0], 0.2989 * img[0] + 0.587 * img[1] + 0.114 * img[2])
    with pytest.raises(ValueError, match="3, H, W"):
        GrayScale()(TensorDict(pixels=torch.rand(4, 2, 2)))


def test_center_crop_and_resize():
    img = torch.arange(36.0).reshape(1, 6, 6)
    out = CenterCrop(2, 4)(TensorDict(pixels=img))["pixels"]
    torch.testing.assert_close(out, img[:, 2:4, 1:5])
    const = torch.full((2, 3, 8, 8), 0.25)
    out = Resize(4, 2)(TensorDict(pixels=const, batch_size=[2]))["pixels"]
    assert out.shape == (2, 3, 4, 2)
    torch.testing.assert_close(out, torch.full((2, 3, 4, 2), 0.25))
    nearest = Resize(2, 2, interpolation="nearest")
    img = torch.arange(16.0).reshape(1, 4, 4)
    torch.testing.assert_close(nearest(TensorDict(pixels=img))["pixels"], img[:, ::2, ::2])


def test_pipeline_specs_in_env():
    env = TransformedEnv(PixelEnv(), ToTensorImage())
    env.append_transform(GrayScale())
    env.append_transform(Resize(4, 4))
    env.append_transform(CenterCrop(2))
    spec = env.observation_spec["pixels"]
    assert spec.shape == (1, 2, 2) and spec.dtype == torch.float32
    r = env.rollout(3)
    assert r["next", "pixels"].shape == (3, 1, 2, 2)
    torch.testing.assert_close(
        r["next", "pixels"][2], torch.full((1, 2, 2), (0.2989 + 0.587 + 0.114) * 30 / 255)
    )
    check_env_specs(env)


def test_missing_pixels_key():
    with pytest.raises(KeyError, match="'pixels'"):
        ToTensorImage()(TensorDict(obs=torch.zeros(1)))
