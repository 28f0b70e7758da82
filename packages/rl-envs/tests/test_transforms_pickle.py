"""Pickled transforms come back with the same attributes (TorchRL's test_pickable)."""

from __future__ import annotations

import pickle

from rl_envs import FrameSkipTransform, StepCounter, VecNorm


def test_pickling_keeps_the_same_attributes():
    for t in (VecNorm(in_keys=["observation"]), StepCounter(), FrameSkipTransform(2)):
        t2 = pickle.loads(pickle.dumps(t))
        assert t.__dict__.keys() == t2.__dict__.keys(), type(t).__name__
