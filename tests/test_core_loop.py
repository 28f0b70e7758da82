"""The core loop across packages: env -> collector -> buffer -> loss, keys lining up end to end.

These are the only tests that install several packages together: each package's
own tests use local fixtures, so here we prove the contract holds between them.
"""

from __future__ import annotations

import functools

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from rl_buffers import (
    LazyTensorStorage,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictPrioritizedReplayBuffer,
)
from rl_collectors import Collector, MultiSyncCollector
from rl_envs import (
    Compose,
    DoubleToFloat,
    GymEnv,
    InitTracker,
    ParallelEnv,
    PendulumEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)
from rl_modules import (
    MLP,
    EGreedyModule,
    NormalParamExtractor,
    ProbabilisticActor,
    QValueActor,
    TanhNormal,
    ValueOperator,
)
from rl_objectives import GAE, ClipPPOLoss, DQNLoss, SoftUpdate


def _pendulum_agent(env) -> tuple[ProbabilisticActor, ValueOperator]:
    obs_dim = env.observation_spec["observation"].shape[-1]
    params = TensorDictModule(
        nn.Sequential(MLP(obs_dim, 2, num_cells=[16]), NormalParamExtractor()),
        in_keys=["observation"],
        out_keys=["loc", "scale"],
    )
    actor = ProbabilisticActor(
        params,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        spec=env.action_spec_unbatched,
        return_log_prob=True,
    )
    critic = ValueOperator(MLP(obs_dim, 1, num_cells=[16]), in_keys=["observation"])
    return actor, critic


def test_ppo_step_on_batched_torch_pendulum() -> None:
    torch.manual_seed(0)
    env = TransformedEnv(PendulumEnv(batch_size=[4]), Compose(StepCounter(50), RewardSum()))
    check_env_specs(env)
    actor, critic = _pendulum_agent(env)
    collector = Collector(env, actor, frames_per_batch=200, total_frames=400)
    loss_fn = ClipPPOLoss(actor, critic, normalize_advantage=True)
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=critic)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=1e-3)
    batches = 0
    for batch in collector:
        assert batch.batch_size == torch.Size([4, 50])
        assert batch["action_log_prob"].shape == (4, 50)
        traj_ids = batch["collector", "traj_ids"]
        assert traj_ids.shape == (4, 50)
        with torch.no_grad():
            gae(batch)
        assert batch["advantage"].shape == (4, 50, 1)
        before = [p.detach().clone() for p in actor.parameters()]
        losses = loss_fn(batch.reshape(-1))
        total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
        optim.zero_grad()
        total.backward()
        optim.step()
        assert any(not torch.equal(b, p) for b, p in zip(before, actor.parameters(), strict=True))
        batches += 1
    assert batches == 2
    collector.shutdown()


def test_dqn_on_gym_cartpole_through_a_prioritized_buffer() -> None:
    torch.manual_seed(0)
    env = TransformedEnv(GymEnv("CartPole-v1"), Compose(DoubleToFloat(), StepCounter()))
    env.set_seed(0)
    value_net = MLP(4, 2, num_cells=[32])
    actor = QValueActor(value_net, in_keys=["observation"], spec=env.action_spec)
    explore = torch.nn.Sequential(actor, EGreedyModule(env.action_spec, eps_init=1.0))
    collector = Collector(env, explore, frames_per_batch=64, total_frames=256)
    buffer = TensorDictPrioritizedReplayBuffer(
        alpha=0.7, beta=0.5, storage=LazyTensorStorage(1000), batch_size=32
    )
    loss_fn = DQNLoss(actor, action_space=env.action_spec, delay_value=True, double_dqn=True)
    target = SoftUpdate(loss_fn, eps=0.9)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=1e-3)
    for batch in collector:
        buffer.extend(batch)
        sample = buffer.sample()
        assert {"index", "priority_weight"} <= set(sample.keys())
        losses = loss_fn(sample)
        optim.zero_grad()
        losses["loss"].backward()
        optim.step()
        target.step()
        assert sample["td_error"].shape == (32,)
        buffer.update_tensordict_priority(sample)
    assert len(buffer) == 256
    collector.shutdown()


@pytest.mark.parametrize("batched_cls", [SerialEnv, ParallelEnv])
def test_batched_envs_feed_a_collector_with_mixed_episode_ends(batched_cls) -> None:
    env = batched_cls(2, lambda: TransformedEnv(GymEnv("CartPole-v1"), InitTracker()))
    env.set_seed(1)
    try:
        collector = Collector(env, None, frames_per_batch=200, total_frames=200)
        batch = next(iter(collector))
        assert batch.batch_size == torch.Size([2, 100])
        done = batch["next", "done"].squeeze(-1)
        assert done.any(), "random CartPole episodes end well within 100 steps"
        # after each done, the next step starts a new trajectory flagged by is_init
        ids = batch["collector", "traj_ids"]
        is_init = batch["is_init"].squeeze(-1)
        for env_idx, t in done[:, :-1].nonzero().tolist():
            assert is_init[env_idx, t + 1]
            assert ids[env_idx, t + 1] != ids[env_idx, t]
        collector.shutdown()
    finally:
        env.close()


def test_multisync_collector_with_pendulum_workers_fills_a_buffer() -> None:
    env_fn = functools.partial(PendulumEnv, batch_size=[2])  # picklable for spawned workers
    actor, _ = _pendulum_agent(env_fn())
    buffer = ReplayBuffer(storage=LazyTensorStorage(1000), sampler=SamplerWithoutReplacement())
    collector = MultiSyncCollector(
        [env_fn, env_fn], actor, frames_per_batch=100, total_frames=200, track_policy_version=True
    )
    try:
        for batch in collector:
            assert batch["policy_version"].shape == batch.shape
            buffer.extend(batch.reshape(-1))
    finally:
        collector.shutdown()
    assert len(buffer) == 200


def test_cat_frames_as_inverse_stacks_frames_when_the_buffer_is_written() -> None:
    """A TorchRL pattern: frame stacking done once, on the way into the replay buffer."""
    from tensordict import TensorDict

    from rl_envs import CatFrames

    stack = CatFrames(N=2, dim=-1, in_keys=["obs"], out_keys=["stack"], as_inverse=True)
    rb = ReplayBuffer(storage=LazyTensorStorage(8), transform=stack, batch_size=2)
    obs = torch.arange(1.0, 5.0).reshape(4, 1)
    done = torch.tensor([False, True, False, False]).reshape(4, 1)
    rb.extend(TensorDict(obs=obs, next=TensorDict(done=done, batch_size=[4]), batch_size=[4]))
    # frame t is [obs[t-1], obs[t]] within an episode, the first frame repeated at its start
    expected = torch.tensor([[1.0, 1.0], [1.0, 2.0], [3.0, 3.0], [3.0, 4.0]])
    assert torch.equal(rb.storage.get(torch.arange(4))["stack"], expected)
