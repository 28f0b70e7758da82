"""Offline, imitation and ensemble losses: rl-objectives vs plain torch vs TorchRL 0.14, in one process.

Run: ``.venv-bench/bin/python benchmarks/bench_offline_losses.py`` (CPU; TorchRL optional: without
it the TorchRL column reads "n/a" and the script says so).

Each row is one forward + backward (the sum of the ``loss_*`` entries) at batch 256 with
256-unit two-hidden-layer MLPs, HalfCheetah-sized (17 observations, 6 actions):

* IQLLoss, CQLLoss (10 sampled actions per source), TD3BCLoss, BCLoss (Gaussian NLL),
  CrossQLoss (batch-norm critics), GAILLoss (with gradient penalty), DiscreteIQLLoss and
  DiscreteCQLLoss (4 actions);
* REDQLoss with 10 critics: ours (stacked parameters, one ``vmap``) against a plain-torch
  Python loop over the 10 critics, and against TorchRL's class;
* sequence models at batch 256: DTLoss and OnlineDTLoss on windows of 20 steps with the
  paper's Gym transformer (128 wide, 3 layers, 1 head), ACTLoss on chunks of 10 with a
  128-wide ACTModel (2 encoder, 3 decoder layers). The plain row calls the same network
  directly; the TorchRL row is what a TorchRL user runs: its loss on its own model
  (``transformers``' GPT-2 for the DTs, its ``ACTModel``) of the same size.

The plain-torch versions are the same maths written directly on the ``nn.Module`` s and
tensors (target networks as module copies): the raw limit. Single-threaded
(``torch.set_num_threads(1)``), timed in thread CPU time and interleaved round robin, so load
on the shared machine hits every contender alike; each figure is a median.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import distributions as D
from torch import nn

import rl_objectives as ours

try:
    import torchrl.objectives as trl
    from torchrl.objectives import ValueEstimators as TrlEstimators
except ImportError:  # the TorchRL column is skipped
    trl = None

OBS, ACT, HID, N_ACT, BATCH = 17, 6, 256, 4, 256
GAMMA = 0.99
SCALE_BIAS = math.log(math.expm1(0.99))  # NormalParamExtractor's default: softplus(x + b) + 0.01
REPEATS = 5


def scale_of(x: torch.Tensor) -> torch.Tensor:
    return (F.softplus(x + SCALE_BIAS) + 0.01).clamp_min(1e-4)


def compare(fns: list[Callable[[], object] | None], reps: int, warmup: int = 2) -> list[float]:
    """Median CPU ms per call of each function (``None`` skipped), interleaved round robin."""
    live = [f for f in fns if f is not None]
    for fn in live:
        for _ in range(warmup):
            fn()
    samples: list[list[float]] = [[] for _ in live]
    for _ in range(REPEATS * reps):
        for fn, s in zip(live, samples, strict=True):
            t0 = time.thread_time()
            fn()
            s.append(time.thread_time() - t0)
    it = iter(statistics.median(s) * 1e3 for s in samples)
    return [next(it) if f is not None else float("nan") for f in fns]


def row(name: str, t_ours: float, t_plain: float, t_trl: float, plain_name: str = "plain") -> None:
    trl_txt = "torchrl      n/a" if math.isnan(t_trl) else (
        f"torchrl {t_trl:8.2f} ms ({t_trl / t_ours:4.2f}x ours)"
    )  # fmt: skip
    print(
        f"{name:<26} ours {t_ours:8.2f} ms | {plain_name} {t_plain:8.2f} ms "
        f"(ours/{plain_name} {t_ours / t_plain:4.2f}) | {trl_txt}",
        flush=True,
    )


def step(fn: Callable[[], dict], params: list[torch.Tensor]) -> Callable[[], None]:
    def run() -> None:
        for p in params:
            p.grad = None
        out = fn()
        sum(v for k, v in out.items() if k.startswith("loss")).backward()

    return run


# -- networks ------------------------------------------------------------------------


def mlp(i: int, o: int, bn: bool = False) -> nn.Sequential:
    if bn:
        return nn.Sequential(
            nn.BatchNorm1d(i), nn.Linear(i, HID), nn.BatchNorm1d(HID), nn.ReLU(),
            nn.Linear(HID, HID), nn.BatchNorm1d(HID), nn.ReLU(), nn.Linear(HID, o),
        )  # fmt: skip
    return nn.Sequential(nn.Linear(i, HID), nn.ReLU(), nn.Linear(HID, HID), nn.ReLU(),
                         nn.Linear(HID, o))  # fmt: skip


class TanhNormal(D.TransformedDistribution):
    def __init__(self, loc, scale):
        super().__init__(D.Independent(D.Normal(loc, scale), 1), [D.TanhTransform(cache_size=1)])


class QNet(nn.Module):
    def __init__(self, bn: bool = False, out: int = 1, with_action: bool = True) -> None:
        super().__init__()
        self.with_action = with_action
        self.net = mlp(OBS + ACT if with_action else OBS, out, bn)

    def forward(self, obs, act=None):
        return self.net(torch.cat([obs, act], -1) if self.with_action else obs)


class GreedyQ(nn.Module):
    """Action values and the greedy one (what a Q-value actor writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.q = QNet(out=N_ACT, with_action=False)

    def forward(self, obs):
        q = self.q(obs)
        return q, q.amax(-1, keepdim=True)


class Disc(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(OBS + ACT, 1)

    def forward(self, obs, act):
        return torch.sigmoid(self.net(torch.cat([obs, act], -1)))


def tanh_actor() -> ProbabilisticTensorDictSequential:
    return ProbabilisticTensorDictSequential(
        TensorDictModule(nn.Sequential(mlp(OBS, 2 * ACT), NormalParamExtractor()),
                         ["observation"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=TanhNormal,
                                      return_log_prob=True),
    )  # fmt: skip


def categorical_actor() -> ProbabilisticTensorDictSequential:
    return ProbabilisticTensorDictSequential(
        TensorDictModule(mlp(OBS, N_ACT), ["observation"], ["logits"]),
        ProbabilisticTensorDictModule(["logits"], ["action"], distribution_class=D.Categorical,
                                      return_log_prob=True),
    )  # fmt: skip


def qvalue(bn: bool = False) -> TensorDictModule:
    return TensorDictModule(QNet(bn), ["observation", "action"], ["state_action_value"])


def value() -> TensorDictModule:
    return TensorDictModule(mlp(OBS, 1), ["observation"], ["state_value"])


def data(n: int = BATCH, discrete: bool = False) -> TensorDict:
    g = torch.Generator().manual_seed(1)
    term = torch.rand(n, 1, generator=g) < 0.05
    act = torch.randint(N_ACT, (n,), generator=g) if discrete else (
        torch.rand(n, ACT, generator=g) * 1.8 - 0.9
    )  # fmt: skip
    return TensorDict(
        {
            "observation": torch.randn(n, OBS, generator=g), "action": act,
            "collector_observation": torch.randn(n, OBS, generator=g),
            "collector_action": torch.rand(n, ACT, generator=g) * 1.8 - 0.9,
            ("next", "observation"): torch.randn(n, OBS, generator=g),
            ("next", "reward"): torch.randn(n, 1, generator=g),
            ("next", "done"): term, ("next", "terminated"): term,
        },
        batch_size=[n],
    )  # fmt: skip


def unpack(td: TensorDict):
    return (td["observation"], td["action"], td["next", "observation"],
            td["next", "reward"].squeeze(-1), (~td["next", "terminated"]).squeeze(-1).float())  # fmt: skip


def tanh_dist(body: nn.Module, obs: torch.Tensor) -> D.Distribution:
    loc, scale = body[0](obs).chunk(2, -1)
    return TanhNormal(loc, scale_of(scale))


def trl_make(cls_name: str, *args, gamma: bool = True, **kwargs):
    """TorchRL's loss (``None`` without TorchRL); gamma through make_value_estimator."""
    if trl is None:
        return None
    loss = getattr(trl, cls_name)(*args, **kwargs)
    if gamma:
        loss.make_value_estimator(TrlEstimators.TD0, gamma=GAMMA)
    return loss


def trl_step(loss, td: TensorDict) -> Callable[[], None] | None:
    if loss is None:
        return None
    # a fresh shallow copy without what the other contenders wrote into the batch
    written = ("td_error", "pred_val", "_log_prob", "pred_q1", "pred_q2", "cql_q1_loss",
               "cql_q2_loss")  # fmt: skip
    return step(lambda: loss(td.exclude(*written)), list(loss.parameters()))


# -- plain-torch losses ----------------------------------------------------------------


def plain_iql(body, qs, tqs, v, td, beta=3.0, tau=0.7):
    obs, act, nobs, r, nt = unpack(td)
    x = torch.cat([obs, act], -1)
    with torch.no_grad():
        qmin = torch.minimum(tqs[0](x), tqs[1](x)).squeeze(-1)
    val = v(obs).squeeze(-1)
    u = qmin - val
    loss_value = (torch.where(u > 0, tau, 1 - tau) * u**2).mean()
    lp = tanh_dist(body, obs).log_prob(act)
    loss_actor = -(torch.exp(beta * (qmin - val.detach())).clamp(max=100) * lp).mean()
    with torch.no_grad():
        y = r + GAMMA * nt * v(nobs).squeeze(-1)
    loss_q = sum(F.mse_loss(q(x).squeeze(-1), y) for q in qs)
    return {"loss_actor": loss_actor, "loss_value": loss_value, "loss_qvalue": loss_q}


def plain_cql(body, qs, tqs, log_alpha, td, n=10):
    obs, act, nobs, r, nt = unpack(td)
    b = obs.shape[0]
    alpha = log_alpha.detach().exp()
    with torch.no_grad():
        na = tanh_dist(body, nobs).rsample()
        nx = torch.cat([nobs, na], -1)
        y = r + GAMMA * nt * torch.minimum(tqs[0](nx), tqs[1](nx)).squeeze(-1)
    x = torch.cat([obs, act], -1)
    preds = [q(x).squeeze(-1) for q in qs]
    loss_q = sum(F.mse_loss(p, y) for p in preds)
    with torch.no_grad():
        pd = tanh_dist(body, torch.cat([obs, nobs]).repeat_interleave(n, 0))
        pa = pd.rsample()
        plp = pd.log_prob(pa)
    rand = torch.empty(b * n, ACT).uniform_(-1, 1)
    o3 = obs.repeat_interleave(n, 0).repeat(3, 1)
    x3 = torch.cat([o3, torch.cat([rand, pa])], -1)
    corr = torch.cat([torch.full((b * n,), ACT * math.log(0.5)), plp]).view(3, b, n)
    loss_cql = 0.0
    for q, p in zip(qs, preds, strict=True):
        scores = (q(x3).view(3, b, n) - corr).permute(1, 0, 2).reshape(b, 3 * n)
        loss_cql = loss_cql + (torch.logsumexp(scores, -1) - p).mean()
    d = tanh_dist(body, obs)
    a_new = d.rsample()
    lp = d.log_prob(a_new)
    xn = torch.cat([obs, a_new], -1)
    with torch.no_grad():
        det = [{k: v.detach() for k, v in q.named_parameters()} for q in qs]
    q_new = torch.minimum(
        *(torch.func.functional_call(q, p, (xn,)) for q, p in zip(qs, det, strict=True))
    )
    return {
        "loss_qvalue": loss_q, "loss_cql": loss_cql,
        "loss_actor": (alpha * lp - q_new.squeeze(-1)).mean(),
        "loss_actor_bc": (alpha * lp - d.log_prob(act)).mean(),
        "loss_alpha": (-log_alpha * (lp.detach() - ACT)).mean(),
    }  # fmt: skip


def plain_td3bc(pi, tpi, qs, tqs, td):
    obs, act, nobs, r, nt = unpack(td)
    a_pi = pi(obs)
    det = {k: v.detach() for k, v in qs[0].named_parameters()}
    q_pi = torch.func.functional_call(qs[0], det, (torch.cat([obs, a_pi], -1),)).squeeze(-1)
    lmbd = 2.5 / q_pi.abs().mean().detach()
    loss_actor = -lmbd * q_pi.mean() + F.mse_loss(a_pi, act)
    with torch.no_grad():
        noise = (torch.randn_like(act) * 0.2).clamp(-0.5, 0.5)
        na = (tpi(nobs) + noise).clamp(-1, 1)
        nx = torch.cat([nobs, na], -1)
        y = r + GAMMA * nt * torch.minimum(tqs[0](nx), tqs[1](nx)).squeeze(-1)
    x = torch.cat([obs, act], -1)
    loss_q = sum(F.mse_loss(q(x).squeeze(-1), y) for q in qs)
    return {"loss_actor": loss_actor, "loss_qvalue": loss_q}


def plain_bc(body, td):
    obs, act = td["observation"], td["action"]
    loc, scale = body[0](obs).chunk(2, -1)
    # the distribution class the actor uses (an Independent Normal), as the loss must
    return {"loss_bc": -D.Independent(D.Normal(loc, scale_of(scale)), 1).log_prob(act).mean()}


def plain_crossq(body, qs, log_alpha, td):
    obs, act, nobs, r, nt = unpack(td)
    alpha = log_alpha.detach().exp()
    b = obs.shape[0]
    with torch.no_grad():
        nd = tanh_dist(body, nobs)
        na = nd.rsample()
        nlp = nd.log_prob(na)
    joint = torch.cat([torch.cat([obs, act], -1), torch.cat([nobs, na], -1)])
    outs = [q(joint).squeeze(-1) for q in qs]
    nq = torch.minimum(outs[0][b:], outs[1][b:]).detach()
    y = r + GAMMA * nt * (nq - alpha * nlp)
    loss_q = sum(F.mse_loss(o[:b], y) for o in outs)
    d = tanh_dist(body, obs)
    a_new = d.rsample()
    lp = d.log_prob(a_new)
    for q in qs:
        q.eval()
    xn = torch.cat([obs, a_new], -1)
    q_new = torch.minimum(*(torch.func.functional_call(q, {k: v.detach() for k, v in q.state_dict().items()}, (xn,)) for q in qs))  # fmt: skip
    for q in qs:
        q.train()
    return {"loss_qvalue": loss_q, "loss_actor": (alpha * lp - q_new.squeeze(-1)).mean(),
            "loss_alpha": (-log_alpha * (lp.detach() - ACT)).mean()}  # fmt: skip


def plain_redq_loop(body, qs, tqs, log_alpha, td, m=2):
    """REDQ as a Python loop over the critics (the baseline stacking replaces)."""
    obs, act, nobs, r, nt = unpack(td)
    b = obs.shape[0]
    alpha = log_alpha.detach().clamp(math.log(0.1), math.log(10.0)).exp()
    d = tanh_dist(body, torch.cat([obs, nobs]))
    a = d.rsample()
    lp = d.log_prob(a)
    xa = torch.cat([obs, a[:b]], -1)
    q_actor = torch.stack(
        [torch.func.functional_call(q, {k: v.detach() for k, v in q.named_parameters()}, (xa,))
         for q in qs]
    ).squeeze(-1)  # fmt: skip
    subset = torch.randperm(len(qs))[:m]
    with torch.no_grad():
        nx = torch.cat([nobs, a[b:]], -1)
        nv = torch.stack([tqs[int(j)](nx).squeeze(-1) - alpha * lp[b:] for j in subset]).amin(0)
        y = r + GAMMA * nt * nv
    x = torch.cat([obs, act], -1)
    pred = torch.stack([q(x).squeeze(-1) for q in qs])
    return {"loss_actor": (alpha * lp[:b] - q_actor).mean(), "loss_qvalue": F.mse_loss(pred, y.expand_as(pred)),
            "loss_alpha": (-log_alpha.exp() * (lp.detach() - ACT)).mean()}  # fmt: skip


def plain_gail(disc, td):
    oe, ae, oc, ac = (
        td["observation"],
        td["action"],
        td["collector_observation"],
        td["collector_action"],
    )
    d = disc(torch.cat([oe, oc]), torch.cat([ae, ac]))
    de, dc = d.split(oe.shape[0])
    loss = F.binary_cross_entropy(
        de, torch.ones_like(de), reduction="none"
    ) + F.binary_cross_entropy(dc, torch.zeros_like(dc), reduction="none")
    eps = torch.rand(oe.shape[0], 1)
    om = (eps * oc + (1 - eps) * oe).requires_grad_(True)
    am = (eps * ac + (1 - eps) * ae).requires_grad_(True)
    dm = disc(om, am)
    go, ga = torch.autograd.grad(dm, (om, am), torch.ones_like(dm), create_graph=True)
    gp = 10.0 * ((torch.cat([go, ga], -1).norm(dim=-1) - 1) ** 2).mean()
    return {"loss": (loss + gp).mean()}


def plain_discrete_iql(logits_net, qs, tqs, v, td, beta=3.0, tau=0.7):
    obs, act, nobs, r, nt = unpack(td)
    idx = act.unsqueeze(-1)
    with torch.no_grad():
        qmin = torch.minimum(tqs[0](obs).gather(-1, idx), tqs[1](obs).gather(-1, idx)).squeeze(-1)
    val = v(obs).squeeze(-1)
    u = qmin - val
    lp = F.log_softmax(logits_net(obs), -1).gather(-1, idx).squeeze(-1)
    with torch.no_grad():
        y = r + GAMMA * nt * v(nobs).squeeze(-1)
    return {
        "loss_value": (torch.where(u > 0, tau, 1 - tau) * u**2).mean(),
        "loss_actor": -(torch.exp(beta * (qmin - val.detach())).clamp(max=100) * lp).mean(),
        "loss_qvalue": sum(F.mse_loss(q(obs).gather(-1, idx).squeeze(-1), y) for q in qs),
    }


def plain_discrete_cql(qnet, tq, td):
    obs, act, nobs, r, nt = unpack(td)
    q = qnet(obs)
    qa = q.gather(-1, act.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        y = r + GAMMA * nt * tq(nobs).amax(-1)
    return {
        "loss_qvalue": 0.5 * F.mse_loss(qa, y),
        "loss_cql": (torch.logsumexp(q, -1) - qa).mean(),
    }


# -- rows ------------------------------------------------------------------------------


def targets(params) -> list[nn.Module]:
    return [copy.deepcopy(m) for m in params]


def bench_iql(td, reps):
    a, q, v = tanh_actor(), qvalue(), value()
    loss = ours.IQLLoss(a, q, v, temperature=3.0, expectile=0.7, loss_function="l2", gamma=GAMMA)
    body, qs = a.module[0].module, [net.module.net for net in loss.qvalue_network]
    tqs = targets(qs)
    plain = step(lambda: plain_iql(body, qs, tqs, v.module, td), list(loss.parameters()))
    tl = trl_make("IQLLoss", a, q, v, temperature=3.0, expectile=0.7, loss_function="l2")
    t = compare([step(lambda: loss(td), list(loss.parameters())), plain, trl_step(tl, td)], reps)
    row("IQLLoss", *t)


def bench_cql(td, reps):
    a, q = tanh_actor(), qvalue()
    loss = ours.CQLLoss(a, q, loss_function="l2", gamma=GAMMA, target_entropy=-float(ACT))
    body, qs = a.module[0].module, [net.module.net for net in loss.qvalue_network]
    tqs = targets(qs)
    plain = step(lambda: plain_cql(body, qs, tqs, loss.log_alpha, td), list(loss.parameters()))
    tl = trl_make("CQLLoss", a, q, loss_function="l2", target_entropy=-float(ACT))
    t = compare([step(lambda: loss(td), list(loss.parameters())), plain, trl_step(tl, td)], reps)
    row("CQLLoss", *t)


def bench_td3bc(td, reps):
    a = TensorDictModule(nn.Sequential(mlp(OBS, ACT), nn.Tanh()), ["observation"], ["action"])
    q = qvalue()
    loss = ours.TD3BCLoss(a, q, bounds=(-1.0, 1.0), loss_function="l2", gamma=GAMMA)
    qs = [net.module.net for net in loss.qvalue_network]
    tpi, tqs = copy.deepcopy(a.module), targets(qs)
    plain = step(lambda: plain_td3bc(a.module, tpi, qs, tqs, td), list(loss.parameters()))
    tl = trl_make("TD3BCLoss", a, q, bounds=(-1.0, 1.0), loss_function="l2")
    t = compare([step(lambda: loss(td), list(loss.parameters())), plain, trl_step(tl, td)], reps)
    row("TD3BCLoss", *t)


def bench_bc(td, reps):
    def normal(loc, scale):
        return D.Independent(D.Normal(loc, scale), 1)

    a = ProbabilisticTensorDictSequential(
        TensorDictModule(nn.Sequential(mlp(OBS, 2 * ACT), NormalParamExtractor()),
                         ["observation"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=normal),
    )  # fmt: skip
    loss = ours.BCLoss(a)
    body = a.module[0].module
    plain = step(lambda: plain_bc(body, td), list(loss.parameters()))
    tl = trl_make("BCLoss", a, gamma=False) if trl is not None and hasattr(trl, "BCLoss") else None
    t = compare([step(lambda: loss(td), list(loss.parameters())), plain, trl_step(tl, td)], reps)
    row("BCLoss (Gaussian NLL)", *t)


def bench_crossq(td, reps):
    a, q = tanh_actor(), qvalue(bn=True)
    loss = ours.CrossQLoss(a, q, loss_function="l2", gamma=GAMMA, target_entropy=-float(ACT))
    body, qs = a.module[0].module, [net.module.net for net in loss.qvalue_network]
    plain = step(lambda: plain_crossq(body, qs, loss.log_alpha, td), list(loss.parameters()))
    tl = trl_make("CrossQLoss", a, qvalue(bn=True), loss_function="l2", target_entropy=-float(ACT))
    trl_fn = trl_step(tl, td)
    if trl_fn is not None:
        try:
            trl_fn()
        except Exception as err:
            print(
                f"  (TorchRL CrossQLoss failed on batch-norm critics: {type(err).__name__}: {err})"
            )
            trl_fn = None
    t = compare([step(lambda: loss(td), list(loss.parameters())), plain, trl_fn], reps)
    row("CrossQLoss (BN critics)", *t)


def bench_redq(td, reps):
    a, q = tanh_actor(), qvalue()
    loss = ours.REDQLoss(a, q, num_qvalue_nets=10, loss_function="l2", gamma=GAMMA,
                         target_entropy=-float(ACT))  # fmt: skip
    body = a.module[0].module
    # the plain loop gets ten critics with the same values as ours
    qs = []
    for i in range(10):
        net = QNet().net
        flat = {k.removeprefix("module.net."): v[i].detach().clone()
                for k, v in loss.qvalue_network_params.flatten_keys(".").items()}  # fmt: skip
        net.load_state_dict(flat)
        qs.append(net)
    tqs = targets(qs)
    params = [*a.parameters(), *(p for m in qs for p in m.parameters()), loss.log_alpha]
    plain = step(lambda: plain_redq_loop(body, qs, tqs, loss.log_alpha, td), params)
    tl = trl_make(
        "REDQLoss", a, q, num_qvalue_nets=10, loss_function="l2", target_entropy=-float(ACT)
    )
    t = compare([step(lambda: loss(td), list(loss.parameters())), plain, trl_step(tl, td)], reps)
    row("REDQLoss (10 critics)", *t, plain_name="loop")


def bench_gail(td, reps):
    disc = TensorDictModule(Disc(), ["observation", "action"], ["d_logits"])
    loss = ours.GAILLoss(disc, use_grad_penalty=True)
    plain = step(lambda: plain_gail(disc.module, td), list(loss.parameters()))
    tl = trl_make("GAILLoss", disc, gamma=False, use_grad_penalty=True) if trl is not None else None
    t = compare([step(lambda: loss(td), list(loss.parameters())), plain, trl_step(tl, td)], reps)
    row("GAILLoss (grad penalty)", *t)


def bench_discrete(reps):
    td = data(discrete=True)
    a, v = categorical_actor(), value()
    q = TensorDictModule(
        QNet(out=N_ACT, with_action=False), ["observation"], ["state_action_value"]
    )
    loss = ours.DiscreteIQLLoss(a, q, v, action_space="categorical", temperature=3.0, expectile=0.7,
                                loss_function="l2", gamma=GAMMA)  # fmt: skip
    qs = [net.module for net in loss.qvalue_network]
    tqs = targets(qs)
    plain = step(lambda: plain_discrete_iql(a.module[0].module, qs, tqs, v.module, td),
                 list(loss.parameters()))  # fmt: skip
    tl = trl_make("DiscreteIQLLoss", a, q, v, action_space="categorical", temperature=3.0,
                  expectile=0.7, loss_function="l2")  # fmt: skip
    t = compare([step(lambda: loss(td), list(loss.parameters())), plain, trl_step(tl, td)], reps)
    row("DiscreteIQLLoss", *t)
    # TorchRL's DiscreteCQLLoss bootstraps on the network's chosen_action_value (greedy value)
    qn = TensorDictModule(GreedyQ(), ["observation"], ["action_value", "chosen_action_value"])
    loss = ours.DiscreteCQLLoss(qn, action_space="categorical", gamma=GAMMA)
    tq = copy.deepcopy(qn.module)
    plain = step(lambda: plain_discrete_cql(qn.module.q, tq.q, td), list(loss.parameters()))
    tl = trl_make("DiscreteCQLLoss", qn, action_space="categorical")
    t = compare([step(lambda: loss(td), list(loss.parameters())), plain, trl_step(tl, td)], reps)
    row("DiscreteCQLLoss", *t)


# -- sequence models: Decision Transformer, Online DT, ACT ------------------------------

CTX, CHUNK = 20, 10
DT_CFG = {"n_embd": 128, "n_layer": 3, "n_head": 1, "n_inner": 512, "activation": "relu",
          "n_positions": 3 * CTX, "resid_pdrop": 0.1, "attn_pdrop": 0.1}  # fmt: skip
ACT_CFG = {"obs_dim": OBS, "action_dim": ACT, "chunk_size": CHUNK, "hidden_dim": 128, "nheads": 8,
           "num_encoder_layers": 2, "num_decoder_layers": 3, "latent_dim": 32}  # fmt: skip
DT_KEYS = ["observation", "action", "return_to_go"]


def windows(n: int = BATCH) -> TensorDict:
    g = torch.Generator().manual_seed(2)
    return TensorDict(
        observation=torch.randn(n, CTX, OBS, generator=g),
        action=torch.rand(n, CTX, ACT, generator=g) * 1.8 - 0.9,
        return_to_go=torch.randn(n, CTX, 1, generator=g),
        batch_size=[n],
    )


def chunks(n: int = BATCH) -> TensorDict:
    g = torch.Generator().manual_seed(3)
    return TensorDict({"observation": torch.randn(n, OBS, generator=g),
                       ("vla_action", "chunk"): torch.rand(n, CHUNK, ACT, generator=g) * 2 - 1},
                      batch_size=[n])  # fmt: skip


def odt_actor(net: nn.Module) -> ProbabilisticTensorDictSequential:
    return ProbabilisticTensorDictSequential(
        TensorDictModule(net, DT_KEYS, ["loc", "scale"]),
        ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=TanhNormal),
    )


def plain_odt(net, log_alpha, td):
    act = td["action"]
    loc, scale = net(td["observation"], act, td["return_to_go"])
    dist = TanhNormal(loc, scale)
    ll = dist.log_prob(act)
    sample = dist.rsample()
    entropy = -dist.log_prob(sample)
    alpha = log_alpha.detach().exp()
    return {"loss_log_likelihood": -ll.mean(), "loss_entropy": -(alpha * entropy).mean(),
            "loss_alpha": (log_alpha.exp() * (entropy.detach() + ACT)).mean()}  # fmt: skip


def plain_act(model, td, kl_weight=10.0):
    chunk = td["vla_action", "chunk"]
    pred, mu, log_var = model(td["observation"], chunk)
    recon = (pred - chunk).abs().mean()
    kl = (0.5 * (mu**2 + log_var.exp() - 1 - log_var).sum(-1)).mean()
    return {"loss_act": recon + kl_weight * kl}


def bench_sequence() -> None:
    print(f"sequence models, batch {BATCH}: DT/ODT windows of {CTX} steps (128 wide, 3 layers), "
          f"ACT chunks of {CHUNK} (128 wide, 2+3 layers)")  # fmt: skip
    bench_dt(DT_CFG, "", 1)
    bench_act()
    # a tiny transformer, so that what the loss modules add around the network shows
    tiny = {**DT_CFG, "n_embd": 16, "n_layer": 1, "n_inner": 32}
    bench_dt(tiny, ", 16x1", 4)


def bench_dt(cfg: dict, tag: str, reps: int) -> None:
    import rl_modules

    td = windows()
    net = rl_modules.DTActor(OBS, ACT, cfg)
    loss = ours.DTLoss(TensorDictModule(net, DT_KEYS, ["action"]))
    params = list(loss.parameters())
    plain = step(lambda: {"loss": F.mse_loss(net(td["observation"], td["action"],
                                                 td["return_to_go"]), td["action"])}, params)  # fmt: skip
    tl = None
    if trl is not None:
        from torchrl.modules import DTActor as TrlDTActor

        tl = trl.DTLoss(TensorDictModule(TrlDTActor(OBS, ACT, cfg), DT_KEYS, ["action"]))
    t = compare([step(lambda: loss(td), params), plain, trl_step(tl, td)], reps)
    row(f"DTLoss (MSE{tag})", *t)

    net = rl_modules.OnlineDTActor(OBS, ACT, cfg)
    loss = ours.OnlineDTLoss(odt_actor(net), target_entropy=-float(ACT))
    params = list(loss.parameters())
    plain = step(lambda: plain_odt(net, loss.log_alpha, td), params)
    tl = None
    if trl is not None:
        from torchrl.modules import OnlineDTActor as TrlODTActor

        tl = trl.OnlineDTLoss(odt_actor(TrlODTActor(OBS, ACT, cfg)), target_entropy=-float(ACT))
    t = compare([step(lambda: loss(td), params), plain, trl_step(tl, td)], reps)
    row(f"OnlineDTLoss (TanhN{tag})", *t)


def bench_act() -> None:
    import rl_modules

    td = chunks()
    model = rl_modules.ACTModel(**ACT_CFG)
    keys_in, keys_out = ["observation", "action_chunk"], ["action_pred", "mu", "log_var"]
    loss = ours.ACTLoss(TensorDictModule(model, keys_in, keys_out))
    params = list(loss.parameters())
    plain = step(lambda: plain_act(model, td), params)
    tl = None
    if trl is not None:
        from torchrl.modules.models import ACTModel as TrlACTModel

        tl = trl.ACTLoss(TensorDictModule(TrlACTModel(**ACT_CFG), keys_in, keys_out))
    t = compare([step(lambda: loss(td), params), plain, trl_step(tl, td)], 1)
    row("ACTLoss (L1 + KL)", *t)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if trl is None:
        print("torchrl is not installed: the TorchRL column is skipped (n/a).")
    print(f"batch {BATCH}, MLPs {HID}x2, obs {OBS}, act {ACT}; forward + backward, median CPU ms")
    td = data()
    bench_iql(td, 6)
    bench_cql(td, 3)
    bench_td3bc(td, 6)
    bench_bc(td, 30)
    bench_crossq(td, 6)
    bench_redq(td, 4)
    bench_gail(td, 6)
    bench_discrete(10)
    bench_sequence()


if __name__ == "__main__":
    main()
