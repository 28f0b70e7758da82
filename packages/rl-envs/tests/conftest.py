"""Shared test helpers of rl-envs (fixtures only)."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
import torch

from rl_envs import step_mdp


def _assert_resume_is_exact(make: Callable[[], object], n_before: int, n_after: int):
    """Steps ``n_before``, saves (``torch.save`` round trip), steps ``n_after``; then
    restores into a FRESH ``make()`` and steps the same ``n_after`` with the same random
    actions: both continuations must be bit-identical. Returns the reference one."""
    env = make()
    env.set_seed(0)
    torch.manual_seed(0)
    root = step_mdp(env.rollout(n_before, break_when_any_done=False)[..., -1])
    buf = io.BytesIO()
    torch.save({"env": env.get_state(), "root": root}, buf)
    torch.manual_seed(1)
    ref = env.rollout(n_after, auto_reset=False, tensordict=root, break_when_any_done=False)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=False)
    fresh = make()
    fresh.set_state(ckpt["env"])
    torch.manual_seed(1)
    got = fresh.rollout(
        n_after, auto_reset=False, tensordict=ckpt["root"], break_when_any_done=False
    )
    assert set(ref.keys(True, True)) == set(got.keys(True, True))
    for key in ref.keys(True, True):
        assert torch.equal(ref[key], got[key]), key
    return ref


@pytest.fixture
def assert_resume_is_exact():
    """The exact-resume check for ``get_state`` / ``set_state`` (see above)."""
    return _assert_resume_is_exact
