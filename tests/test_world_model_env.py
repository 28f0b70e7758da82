"""rl_modules.WorldModel driven by rl_envs.WorldModelEnv: imagined rollouts from encoded latents."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_envs import Composite, EnvBase, Unbounded, WorldModelEnv
from rl_modules import WorldModel


class _Ref(EnvBase):
    """A reference env with a 2-d latent observation; only its specs are read."""

    def __init__(self) -> None:
        super().__init__(batch_size=[3])
        self.observation_spec = Composite(latent=Unbounded((3, 2)), shape=[3])
        self.action_spec = Unbounded((3, 2))


def test_rollout_of_a_world_model_follows_its_dynamics():
    enc = TensorDictModule(lambda o: o[..., :2], ["observation"], ["latent"])
    dyn = TensorDictModule(lambda z, a: 0.5 * z + a, ["latent", "action"], [("next", "latent")])
    rew = TensorDictModule(lambda z: -z.norm(dim=-1, keepdim=True), [("next", "latent")],
                           [("next", "reward")])  # fmt: skip
    wm = WorldModel(enc, dyn, rew)
    env = WorldModelEnv(wm, base_env=_Ref())
    obs = torch.arange(12.0).reshape(3, 4)
    start = wm.encode(TensorDict(observation=obs, batch_size=[3]))
    actions = [torch.full((3, 2), float(t)) for t in range(5)]
    out = env.rollout(5, actions=actions, tensordict=start)
    z = obs[..., :2]
    for t in range(5):
        z = 0.5 * z + t
        torch.testing.assert_close(out["next", "latent"][:, t], z)
        torch.testing.assert_close(out["next", "reward"][:, t], -z.norm(dim=-1, keepdim=True))
    assert out.batch_size == (3, 5) and not out["next", "done"].any()
