import multiprocessing as mp

import pytest
import torch
from tensordict import TensorDict

from rl_envs import ParallelEnv, PendulumEnv, TransformedEnv, VecNorm


def test_matches_a_running_reference():
    torch.manual_seed(0)
    decay, eps = 0.9, 1e-4
    t = VecNorm(in_keys=["obs"], decay=decay, eps=eps)
    s = torch.zeros(3)
    ss = torch.zeros(3)
    c = 0.0
    for _ in range(5):
        x = torch.randn(4, 3) * 3 + 1
        out = t(TensorDict(obs=x.clone(), batch_size=[4]))["obs"]
        s = decay * s + x.sum(0)
        ss = decay * ss + (x**2).sum(0)
        c = decay * c + 4
        mean = s / c
        std = (ss / c - mean**2).clamp_min(eps).sqrt()
        torch.testing.assert_close(out, (x - mean) / std)


def test_frozen_and_state_dict_roundtrip():
    t = VecNorm(in_keys=["obs"], decay=1.0)
    t(TensorDict(obs=torch.tensor([[1.0], [3.0]]), batch_size=[2]))
    state = t.state_dict()
    t2 = VecNorm(in_keys=["obs"], decay=1.0, shapes=[(1,)])
    t2.load_state_dict(state)
    x = TensorDict(obs=torch.tensor([[5.0]]), batch_size=[1])
    frozen = t2.frozen_copy()
    torch.testing.assert_close(frozen(x.clone())["obs"], torch.tensor([[3.0]]))
    torch.testing.assert_close(frozen(x.clone())["obs"], torch.tensor([[3.0]]))  # unchanged stats
    norm = t.to_observation_norm()
    torch.testing.assert_close(norm(x.clone())["obs"], torch.tensor([[3.0]]))


def test_stats_shared_across_workers():
    base = PendulumEnv()
    shared = VecNorm.build_td_for_shared_vecnorm(base, ["observation"])
    lock = mp.get_context("fork").Lock()

    def make():
        return TransformedEnv(
            PendulumEnv(), VecNorm(in_keys=["observation"], shared_td=shared, lock=lock)
        )

    with ParallelEnv(2, make, mp_start_method="fork") as env:
        env.rollout(5)
    # 2 workers x (1 reset + 5 steps) observations, decay 0.9999 per update
    assert shared["observation_count"].item() == pytest.approx(12, rel=1e-2)


def test_missing_key_and_shared_td_check():
    with pytest.raises(KeyError, match="'obs'"):
        VecNorm(in_keys=["obs"])(TensorDict(x=torch.zeros(1)))
    with pytest.raises(KeyError, match="build_td_for_shared_vecnorm"):
        VecNorm(in_keys=["obs"], shared_td=TensorDict())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("batch", [(), (4,), (2, 3)])
def test_cpu_results_bit_equal_to_the_torch_formula(dtype, batch):
    """CPU entries are normalised through numpy views (a speed path): every output and
    statistic must be bit-equal to the formula computed with torch ops, frozen or not."""
    g = torch.Generator().manual_seed(0)
    decay, eps = 0.999, 1e-4
    t = VecNorm(in_keys=["obs"], decay=decay, eps=eps)
    total = torch.zeros(5, dtype=dtype)
    ssq = torch.zeros(5, dtype=dtype)
    count = torch.zeros((), dtype=dtype)
    dims = tuple(range(len(batch)))
    n = float(torch.Size(batch).numel())
    for step in range(60):
        t.frozen = step >= 40
        x = (torch.randn(*batch, 5, generator=g) * 3 + 1).to(dtype)
        out = t(TensorDict(obs=x.clone(), batch_size=batch))["obs"]
        if not t.frozen:
            total.mul_(decay).add_(x.sum(dims) if dims else x)
            ssq.mul_(decay).add_((x * x).sum(dims) if dims else x * x)
            count.mul_(decay).add_(n)
        c = count.clamp_min(1e-12)
        mean = total / c
        std = (ssq / c - mean * mean).clamp_min(eps).sqrt().clamp_min(eps)
        expected = (x - mean) / std
        assert out.dtype == dtype
        assert torch.equal(out, expected), (step, (out - expected).abs().max())
    assert torch.equal(t.stats["obs_sum"], total)
    assert torch.equal(t.stats["obs_ssq"], ssq)
    assert torch.equal(t.stats["obs_count"], count)
