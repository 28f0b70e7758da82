"""rl-modules' sequence models trained by rl-objectives' losses: DT, Online DT, ACT."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rl_modules import (
    ACTModel,
    DecisionTransformer,
    DTActor,
    OnlineDTActor,
    ProbabilisticActor,
    TanhNormal,
)
from rl_objectives import ACTLoss, DTLoss, OnlineDTLoss

CFG = DecisionTransformer.DTConfig(n_embd=32, n_layer=1, n_head=2, n_inner=64, n_positions=24,
                                   resid_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
KEYS = ["observation", "action", "return_to_go"]


def windows(n: int = 16, t: int = 8) -> TensorDict:
    g = torch.Generator().manual_seed(0)
    obs = torch.randn(n, t, 3, generator=g)
    # actions a deterministic function of the state: learnable from the state token alone
    act = torch.tanh(obs[..., :2] * 1.5)
    return TensorDict(observation=obs, action=act, return_to_go=torch.randn(n, t, 1, generator=g),
                      batch_size=[n])  # fmt: skip


def fit(loss_module, td, key: str, steps: int = 60) -> tuple[float, float]:
    optim = torch.optim.Adam(loss_module.parameters(), lr=3e-3)
    first = None
    for _ in range(steps):
        out = loss_module(td)
        total = sum(v for k, v in out.items() if k.startswith("loss"))
        optim.zero_grad()
        total.backward()
        optim.step()
        first = float(out[key].detach()) if first is None else first
    return first, float(loss_module(td)[key].detach())


def test_dt_actor_learns_with_dt_loss():
    torch.manual_seed(0)
    loss = DTLoss(TensorDictModule(DTActor(3, 2, CFG), KEYS, ["action"]))
    first, last = fit(loss, windows(), "loss")
    assert last < 0.3 * first


def test_online_dt_actor_learns_with_online_dt_loss():
    torch.manual_seed(0)
    actor = ProbabilisticActor(
        TensorDictModule(OnlineDTActor(3, 2, CFG), KEYS, ["loc", "scale"]),
        in_keys=["loc", "scale"], distribution_class=TanhNormal, return_log_prob=False,
    )  # fmt: skip
    loss = OnlineDTLoss(actor, target_entropy=-2.0, alpha_init=0.1)
    alpha0 = float(loss.alpha)
    first, last = fit(loss, windows(), "loss_log_likelihood")
    assert last < first - 1.0
    assert float(loss.alpha) != alpha0  # the temperature moved


def test_act_model_learns_with_act_loss():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(16, 5, generator=g)
    chunk = torch.tanh(obs[:, None, :2] * torch.linspace(0.5, 1.5, 4)[None, :, None])
    td = TensorDict({"observation": obs, ("vla_action", "chunk"): chunk}, batch_size=[16])
    model = ACTModel(5, 2, 4, hidden_dim=32, nheads=2, num_encoder_layers=1, num_decoder_layers=1,
                     latent_dim=4, dropout=0.0)  # fmt: skip
    actor = TensorDictModule(
        model, ["observation", "action_chunk"], ["action_pred", "mu", "log_var"]
    )
    first, last = fit(ACTLoss(actor, kl_weight=1.0), td, "loss_reconstruction")
    assert last < 0.5 * first
