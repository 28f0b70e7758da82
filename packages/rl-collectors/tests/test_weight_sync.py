"""Weight-sync schemes (TorchRL's ``weight_sync_schemes=``) and the workers' state layout."""

from __future__ import annotations

import functools

import pytest
import torch
from rl_collectors_toy_env import ScalePolicy, ToyEnv, make_toy_env
from tensordict import TensorDict

from rl_collectors import (
    Collector,
    MultiAsyncCollector,
    MultiProcessWeightSyncScheme,
    MultiSyncCollector,
    NoWeightSyncScheme,
    SharedMemWeightSyncScheme,
    WeightSyncScheme,
)

TOY_2 = functools.partial(make_toy_env, batch_size=(2,))


@pytest.mark.parametrize(
    ("backend", "scheme_cls"),
    [
        ("none", NoWeightSyncScheme),
        ("direct", NoWeightSyncScheme),
        ("shared", SharedMemWeightSyncScheme),
        ("thread", SharedMemWeightSyncScheme),
        ("process", MultiProcessWeightSyncScheme),
        ("multiprocessing", MultiProcessWeightSyncScheme),
    ],
)
def test_from_backend(backend: str, scheme_cls: type) -> None:
    assert type(WeightSyncScheme.from_backend(backend)) is scheme_cls


def test_from_backend_forwards_kwargs_and_rejects_unknown() -> None:
    assert WeightSyncScheme.from_backend("shared", sync=False).sync is False
    with pytest.raises(ValueError, match="Unsupported weight-sync backend 'rpc'"):
        WeightSyncScheme.from_backend("rpc")


def test_bad_schemes_are_explained() -> None:
    with pytest.raises(TypeError, match="instance"):
        Collector(ToyEnv(()), None, frames_per_batch=2, weight_sync_schemes={"policy": object})
    with pytest.raises(ValueError, match="only 'policy'"):
        Collector(ToyEnv(()), None, frames_per_batch=2, weight_sync_schemes={"value": None})


def _worker_weights(collector: object) -> list[float]:
    state = collector.state_dict()
    return [float(state[f"worker{i}"]["policy_state_dict"]["weight"]) for i in range(2)]


@pytest.mark.parametrize(
    ("cls", "scheme", "synced"),
    [
        (MultiSyncCollector, None, True),
        (MultiSyncCollector, NoWeightSyncScheme(), False),
        (MultiAsyncCollector, MultiProcessWeightSyncScheme(), True),
    ],
)
def test_schemes_decide_whether_workers_see_updates(cls: type, scheme, synced: bool) -> None:
    """A worker's state holds the weights it will use next (TorchRL's ``worker<i>`` layout)."""
    policy = ScalePolicy(1.0)
    schemes = None if scheme is None else {"policy": scheme}
    with cls(
        [TOY_2, TOY_2], policy, frames_per_batch=8, cat_results="stack", weight_sync_schemes=schemes
    ) as collector:
        assert _worker_weights(collector) == [1.0, 1.0]
        with torch.no_grad():
            policy.weight.fill_(3.0)
        collector.update_policy_weights_()
        assert _worker_weights(collector) == ([3.0, 3.0] if synced else [1.0, 1.0])


def test_compiled_policy_gives_the_eager_batch() -> None:
    eager = Collector(ToyEnv((2,)), ScalePolicy(2.0), frames_per_batch=8, trust_policy=True).next()
    compiled = Collector(
        ToyEnv((2,)), ScalePolicy(2.0), frames_per_batch=8, compile_policy={"backend": "eager"}
    )
    assert isinstance(compiled._policy_call, torch._dynamo.eval_frame.OptimizedModule)
    torch.testing.assert_close(compiled.next()["action"], eager["action"])


def test_init_on_sender_records_the_weight_source() -> None:
    module = torch.nn.Linear(2, 1)
    weights = TensorDict.from_module(module)
    scheme = SharedMemWeightSyncScheme()
    scheme.init_on_sender(model=module, devices=["cpu"], model_id="policy")
    assert scheme.sender_source is module
    scheme.init_on_sender(params_map={0: weights, 1: weights})
    assert scheme.sender_source is weights
    with pytest.raises(ValueError, match="same weights"):
        scheme.init_on_sender(params_map={0: weights, 1: weights.clone()})
    with pytest.raises(ValueError, match="exactly one"):
        scheme.init_on_sender()
    with pytest.raises(ValueError, match="model_id"):
        scheme.init_on_sender(model=module, model_id="value")
