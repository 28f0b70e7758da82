import pytest
import torch
from tensordict import TensorDict

from rl_envs import RandomCropTensorDict


def test_windows_are_contiguous_slices_of_each_row():
    torch.manual_seed(0)
    x = torch.randn(5, 12, 3)
    td = TensorDict(x=x, nested=TensorDict(y=x[..., 0], batch_size=[5, 12]), batch_size=[5, 12])
    out = RandomCropTensorDict(4, -1)(td)
    assert out.shape == (5, 4)
    for row in range(5):
        # each window is x[row, s:s + 4] for some start s
        starts = [s for s in range(9) if torch.equal(x[row, s : s + 4], out["x"][row])]
        assert len(starts) == 1
        assert torch.equal(out["nested", "y"][row], x[row, starts[0] : starts[0] + 4, 0])


def test_the_mask_bounds_the_window_and_short_rows_raise():
    torch.manual_seed(0)
    steps = torch.arange(10).expand(200, 10)
    mask = steps < torch.randint(6, 11, (200, 1))
    td = TensorDict(t=steps, mask=mask, batch_size=[200, 10])
    out = RandomCropTensorDict(6, mask_key="mask")(td)
    assert out["mask"].all()  # never past a row's valid prefix
    with pytest.raises(RuntimeError, match="Cannot sample trajectories of length 11"):
        RandomCropTensorDict(11)(td)
