"""rl-objectives vs TorchRL 0.14 vs the raw limit, in one process.

Run: ``.venv-bench/bin/python benchmarks/bench_objectives.py`` (needs torchrl; CPU).

* GAE on [8, 256], [64, 1000] and [1024, 256] (1% dones, half of them terminations):
  ours (doubling or blocked reverse scan), TorchRL's ``vec_generalized_advantage_estimate``,
  and the reference Python loop over time.
* ClipPPOLoss and SACLoss forward + backward on minibatches of 64 and 4096 with
  64-unit MLPs: ours, TorchRL's, and the same maths written in plain torch (the limit).
  The plain versions compute every output the losses return: PPO's diagnostics
  (``kl_approx``, ``clip_fraction``, ``ESS``, ``entropy``) and SAC's ``td_error`` (written
  into the batch, as the losses do), ``alpha`` and ``entropy``.

Single-threaded (``torch.set_num_threads(1)``): the machine may be shared, and one
thread keeps the ratios comparable. Each figure is the median of ``REPEATS * reps`` calls
made in turn with the other contenders', so load spikes hit every contender alike.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable

import torch
from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D
from torch import nn
from torchrl.objectives import ClipPPOLoss as TorchRLClipPPO
from torchrl.objectives import SACLoss as TorchRLSAC
from torchrl.objectives.value.functional import vec_generalized_advantage_estimate

from rl_objectives import ClipPPOLoss, SACLoss
from rl_objectives.value.functional import generalized_advantage_estimate

OBS, ACT, HID = 17, 6, 64
# NormalParamExtractor's default scale: softplus(x + bias) + 0.01 with softplus(bias) = 0.99,
# floored at 1e-4 ("biased_softplus_1.0", scale_lb=1e-4)
SCALE_BIAS = math.log(math.expm1(0.99))


def scale_of(x: torch.Tensor) -> torch.Tensor:
    return (nn.functional.softplus(x + SCALE_BIAS) + 0.01).clamp_min(1e-4)


REPEATS = 5


def compare(fns: list[Callable[[], object]], reps: list[int], warmup: int = 3) -> list[float]:
    """Median wall time (ms) of each function over ``REPEATS * reps[i]`` calls.

    The calls are interleaved one by one (round robin), so a load spike on the shared machine
    hits every contender alike instead of one contender's whole block.
    """
    for fn in fns:
        for _ in range(warmup):
            fn()
    budget = [REPEATS * r for r in reps]
    samples: list[list[float]] = [[] for _ in fns]
    while any(len(s) < b for s, b in zip(samples, budget, strict=True)):
        for fn, s, b in zip(fns, samples, budget, strict=True):
            if len(s) < b:
                t0 = time.perf_counter()
                fn()
                s.append(time.perf_counter() - t0)
    return [statistics.median(s) * 1e3 for s in samples]


def row(name: str, ours: float, torchrl: float, limit: float, limit_name: str) -> None:
    print(
        f"{name:<28} ours {ours:9.3f} ms | torchrl {torchrl:9.3f} ms ({torchrl / ours:5.2f}x ours)"
        f" | {limit_name} {limit:9.3f} ms (ours/limit {ours / limit:5.2f})"
    )


# -- GAE -----------------------------------------------------------------------------


def gae_loop(gamma, lmbda, v, nv, r, done, term):
    adv = torch.empty_like(r)
    running = torch.zeros_like(r[..., 0, :])
    nt, nd = (~term).to(r.dtype), (~done).to(r.dtype)
    for t in range(r.shape[-2] - 1, -1, -1):
        delta = r[..., t, :] + gamma * nt[..., t, :] * nv[..., t, :] - v[..., t, :]
        running = delta + gamma * lmbda * nd[..., t, :] * running
        adv[..., t, :] = running
    return adv, adv + v


def bench_gae() -> None:
    for batch, steps in [(8, 256), (64, 1000), (1024, 256)]:
        g = torch.Generator().manual_seed(0)
        shape = (batch, steps, 1)
        v, nv, r = (torch.randn(shape, generator=g) for _ in range(3))
        done = torch.rand(shape, generator=g) < 0.01
        term = done & (torch.rand(shape, generator=g) < 0.5)
        args = (0.99, 0.95, v, nv, r, done, term)
        ours_adv = generalized_advantage_estimate(*args)[0]
        torch.testing.assert_close(ours_adv, gae_loop(*args)[0], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(
            ours_adv, vec_generalized_advantage_estimate(*args)[0], atol=1e-4, rtol=1e-4
        )
        ours, trl, loop = compare(
            [
                lambda a=args: generalized_advantage_estimate(*a),
                lambda a=args: vec_generalized_advantage_estimate(*a),
                lambda a=args: gae_loop(*a),
            ],
            [20, 5, 3],
        )
        row(f"GAE [{batch}, {steps}]", ours, trl, loop, "loop")


# -- networks ------------------------------------------------------------------------


def mlp(i: int, o: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(i, HID), nn.Tanh(), nn.Linear(HID, HID), nn.Tanh(), nn.Linear(HID, o)
    )


def normal(loc, scale):
    return D.Independent(D.Normal(loc, scale), 1)


class TanhNormal(D.TransformedDistribution):
    def __init__(self, loc, scale):
        super().__init__(D.Independent(D.Normal(loc, scale), 1), [D.TanhTransform(cache_size=1)])


def actor(dist_cls) -> ProbabilisticTensorDictSequential:
    body = nn.Sequential(mlp(OBS, 2 * ACT), NormalParamExtractor())
    return ProbabilisticTensorDictSequential(
        TensorDictModule(body, ["observation"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(
            ["loc", "scale"], ["action"], distribution_class=dist_cls, return_log_prob=True
        ),
    )


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(OBS + ACT, 1)

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], -1))


def data(n: int) -> TensorDict:
    g = torch.Generator().manual_seed(1)
    term = torch.rand(n, 1, generator=g) < 0.05
    return TensorDict(
        {
            "observation": torch.randn(n, OBS, generator=g),
            "action": torch.rand(n, ACT, generator=g) * 1.8 - 0.9,
            "action_log_prob": -torch.rand(n, generator=g) - 3,
            "sample_log_prob": -torch.rand(n, generator=g) - 3,
            "advantage": torch.randn(n, 1, generator=g),
            "value_target": torch.randn(n, 1, generator=g),
            ("next", "observation"): torch.randn(n, OBS, generator=g),
            ("next", "reward"): torch.randn(n, 1, generator=g),
            ("next", "done"): term,
            ("next", "terminated"): term,
        },
        batch_size=[n],
    )


def check_same(ours: TensorDict, plain: dict[str, torch.Tensor]) -> None:
    """The plain version computes what the loss returns (every one of its entries)."""
    assert set(plain) == set(ours.keys()), (sorted(plain), sorted(ours.keys()))
    for key, value in plain.items():
        torch.testing.assert_close(ours[key], value, rtol=1e-4, atol=1e-5, msg=key)


def step(loss_fn, params) -> Callable[[], None]:
    def run():
        for p in params:
            p.grad = None
        out = loss_fn()
        sum(v for k, v in out.items() if k.startswith("loss")).backward()

    return run


# -- PPO -----------------------------------------------------------------------------


def plain_ppo(pol: nn.Module, crit: nn.Module, td: TensorDict):
    obs, act = td["observation"], td["action"]
    adv, prev, tgt = td["advantage"].squeeze(-1), td["action_log_prob"], td["value_target"]
    loc, scale = pol(obs).chunk(2, -1)
    dist = normal(loc, scale_of(scale))
    lw = dist.log_prob(act) - prev
    ratio = lw.exp()
    clipped = ratio.clamp(0.8, 1.2)
    gain = torch.minimum(ratio * adv, clipped * adv)
    entropy = dist.entropy()
    v = crit(obs)
    with torch.no_grad():  # the diagnostics ClipPPOLoss returns (as TorchRL's does)
        lwd = lw.detach()
        w = (lwd - lwd.max()).exp()  # ESS = (sum w)^2 / (n sum w^2), overflow-safe
        diagnostics = {
            "kl_approx": -lwd.mean(),
            "clip_fraction": (clipped != ratio).float().mean(),
            "ESS": w.sum().square() / (w.square().sum() * lwd.numel()),
            "entropy": entropy.detach().mean(),
        }
    return {
        "loss_objective": -gain.mean(),
        "loss_entropy": -0.01 * entropy.mean(),
        "loss_critic": nn.functional.smooth_l1_loss(v, tgt),
        **diagnostics,
    }


def bench_ppo() -> None:
    for n in (64, 4096):
        td = data(n)
        a, c = actor(normal), TensorDictModule(mlp(OBS, 1), ["observation"], ["state_value"])
        ours = ClipPPOLoss(a, c, log_explained_variance=False)
        trl = TorchRLClipPPO(a, c, log_explained_variance=False)
        trl.set_keys(sample_log_prob="action_log_prob")
        pol_net, crit_net = a.module[0].module[0], c.module
        params = list(ours.parameters())
        check_same(ours(td), plain_ppo(pol_net, crit_net, td))
        t_ours, t_trl, t_raw = compare(
            [
                step(lambda m=ours, x=td: m(x), params),
                # TorchRL's SACLoss writes loc/scale into its input: give it a shallow copy
                step(lambda m=trl, x=td: m(x.clone(False)), list(trl.parameters())),
                step(lambda p=pol_net, c=crit_net, x=td: plain_ppo(p, c, x), params),
            ],
            [20, 20, 20],
        )
        row(f"ClipPPOLoss fwd+bwd [{n}]", t_ours, t_trl, t_raw, "plain")


# -- SAC -----------------------------------------------------------------------------


def plain_sac(pol, q1, q2, tq1, tq2, log_alpha, td):
    obs, act = td["observation"], td["action"]
    nobs, r, term = td["next", "observation"], td["next", "reward"], td["next", "terminated"]
    alpha = log_alpha.detach().exp()

    def dist(o):
        loc, scale = pol(o).chunk(2, -1)
        return TanhNormal(loc, scale_of(scale))

    with torch.no_grad():
        nd = dist(nobs)
        na = nd.rsample()
        nlp = nd.log_prob(na)
        nx = torch.cat([nobs, na], -1)
        nq = torch.minimum(tq1(nx), tq2(nx)).squeeze(-1) - alpha * nlp
        y = r.squeeze(-1) + 0.99 * (~term).squeeze(-1) * nq
    x = torch.cat([obs, act], -1)
    p1, p2 = q1(x).squeeze(-1), q2(x).squeeze(-1)
    lq = (
        nn.functional.smooth_l1_loss(p1, y, reduction="none")
        + nn.functional.smooth_l1_loss(p2, y, reduction="none")
    ).mean()
    # the priority SACLoss writes for a prioritized buffer
    td.set("td_error", torch.maximum((p1 - y).abs(), (p2 - y).abs()).detach())
    d = dist(obs)
    a = d.rsample()
    lp = d.log_prob(a)
    xa = torch.cat([obs, a], -1)
    # critics frozen for the actor loss, as in the losses
    q1p = torch.func.functional_call(q1, {k: v.detach() for k, v in q1.named_parameters()}, (xa,))
    q2p = torch.func.functional_call(q2, {k: v.detach() for k, v in q2.named_parameters()}, (xa,))
    la = (alpha * lp - torch.minimum(q1p, q2p).squeeze(-1)).mean()
    lal = (-log_alpha * (lp.detach() - ACT)).mean()
    return {
        "loss_actor": la,
        "loss_qvalue": lq,
        "loss_alpha": lal,
        "alpha": alpha,
        "entropy": -lp.detach().mean(),
    }


def bench_sac() -> None:
    for n in (64, 4096):
        td = data(n)
        a = actor(TanhNormal)
        q = TensorDictModule(QNet(), ["observation", "action"], ["state_action_value"])
        ours = SACLoss(a, q, target_entropy=-float(ACT))
        trl = TorchRLSAC(a, q, target_entropy=-float(ACT))
        pol = a.module[0].module[0]
        q1, q2 = (m.module.net for m in ours.qvalue_network)
        # the target critics start as copies of the critics
        tq1, tq2 = (copy.deepcopy(q).requires_grad_(False) for q in (q1, q2))
        log_alpha = nn.Parameter(torch.zeros(()))
        params = [*ours.parameters(), log_alpha]
        torch.manual_seed(2)
        out = ours(td)
        torch.manual_seed(2)
        check_same(out, plain_sac(pol, q1, q2, tq1, tq2, log_alpha, td))
        t_ours, t_trl, t_raw = compare(
            [
                step(lambda m=ours, x=td: m(x), params),
                # TorchRL's SACLoss writes loc/scale into its input: give it a shallow copy
                step(lambda m=trl, x=td: m(x.clone(False)), list(trl.parameters())),
                step(lambda a=(pol, q1, q2, tq1, tq2, log_alpha, td): plain_sac(*a), params),
            ],
            [15, 15, 15],
        )
        row(f"SACLoss fwd+bwd [{n}]", t_ours, t_trl, t_raw, "plain")


def main() -> None:
    import tensordict
    import torchrl

    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, tensordict {tensordict.__version__}, torchrl {torchrl.__version__}, "
          f"threads {torch.get_num_threads()}")  # fmt: skip
    bench_gae()
    bench_ppo()
    bench_sac()


if __name__ == "__main__":
    main()
