"""rl_envs.vla: RobotDatasetMetadata and UniformActionTokenizer against closed forms."""

from __future__ import annotations

import pytest
import torch

from rl_envs import Bounded, Unbounded
from rl_envs.vla import ACTION_TOKENS_KEY, RobotDatasetMetadata, UniformActionTokenizer


def test_uniform_tokenizer_bins_and_centres():
    tok = UniformActionTokenizer(4, low=-1.0, high=1.0)
    x = torch.tensor([-1.0, -0.51, -0.49, 0.0, 0.99, 1.0, 7.0, -7.0])
    # bins of width 0.5: [-1,-.5) [-.5,0) [0,.5) [.5,1]; outside values go to the end bins
    assert tok.encode(x).tolist() == [0, 0, 1, 2, 3, 3, 3, 0]
    assert tok.decode(torch.arange(4)).tolist() == [-0.75, -0.25, 0.25, 0.75]
    assert tok.vocab_size == 4 and tok.action_dim is None
    a = torch.rand(100, 3) * 2 - 1
    fine = UniformActionTokenizer(256, low=-1.0, high=1.0)
    assert (fine.decode(fine.encode(a)) - a).abs().max() <= 1 / 256 + 1e-6


def test_per_dimension_bounds_and_errors():
    tok = UniformActionTokenizer(10, low=torch.tensor([0.0, -5.0]), high=torch.tensor([1.0, 5.0]))
    assert tok.encode(torch.tensor([[0.05, 4.9]])).tolist() == [[0, 9]]
    assert UniformActionTokenizer(8, low=0.0, high=1.0, action_dim=3).action_dim == 3
    with pytest.raises(ValueError, match="exceed"):
        UniformActionTokenizer(8, low=1.0, high=1.0)
    with pytest.raises(ValueError, match="same shape"):
        UniformActionTokenizer(8, low=torch.zeros(2), high=torch.ones(3))
    with pytest.raises(ValueError, match="num_bins"):
        UniformActionTokenizer(0, low=0.0, high=1.0)


def test_metadata_specs_and_tokenizer():
    meta = RobotDatasetMetadata(
        "bridge", action_dim=2, action_low=[-1.0, 0.0], action_high=[1.0, 4.0]
    )
    assert isinstance(meta.action_low, torch.Tensor) and meta.action_low.dtype == torch.float32
    spec = meta.make_action_spec(shape_prefix=(5,))
    assert isinstance(spec, Bounded) and spec.shape == (5, 2)
    assert spec.space.high[3].tolist() == [1.0, 4.0]
    free = RobotDatasetMetadata(
        "bridge", action_dim=7, action_mean=torch.zeros(7), action_std=torch.ones(7)
    )
    assert isinstance(free.make_action_spec(), Unbounded)
    tok = UniformActionTokenizer.from_metadata(meta, 4)
    assert tok.encode(torch.tensor([0.9, 3.9])).tolist() == [3, 3]
    with pytest.raises(ValueError, match="no action bounds"):
        UniformActionTokenizer.from_metadata(free, 4)
    with pytest.raises(ValueError, match="action_dim"):
        RobotDatasetMetadata("x").make_action_spec()


def test_metadata_validation():
    with pytest.raises(ValueError, match="action_space"):
        RobotDatasetMetadata("x", action_space="teleport")
    with pytest.raises(ValueError, match="gripper_mode"):
        RobotDatasetMetadata("x", gripper_mode="magnetic")
    with pytest.raises(ValueError, match="positive int"):
        RobotDatasetMetadata("x", action_dim=0)
    with pytest.raises(ValueError, match="action_dim=3"):
        RobotDatasetMetadata("x", action_dim=3, action_mean=torch.zeros(2))


def test_metadata_json_round_trip(tmp_path):
    meta = RobotDatasetMetadata(
        "bridge",
        embodiment_id="widowx",
        action_dim=2,
        action_names=("x", "grip"),
        action_space="eef_delta",
        gripper_mode="binary",
        camera_keys=(("observation", "image"), "wrist"),
        action_key=("robot", "action"),
        action_mean=torch.tensor([1.0, 2.0]),
        action_std=torch.tensor([2.0, 4.0]),
    )
    back = RobotDatasetMetadata.from_json(meta.to_json(str(tmp_path / "meta.json")))
    assert bool((back == meta).all())
    assert back.camera_keys == (("observation", "image"), "wrist")
    assert back.action_key == ("robot", "action") and back.action_names == ("x", "grip")
    from_file = RobotDatasetMetadata.from_json(str(tmp_path / "meta.json"))
    torch.testing.assert_close(from_file.action_std, torch.tensor([2.0, 4.0]))
    assert (
        RobotDatasetMetadata.from_json('{"dataset_id": "a", "future_field": 1}').dataset_id == "a"
    )
    assert ACTION_TOKENS_KEY == ("vla_action", "tokens")
