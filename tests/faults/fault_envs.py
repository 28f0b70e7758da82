"""Envs that fail on purpose, for the fault suite (importable by name in worker processes).

``FaultEnv`` is ``PendulumEnv`` whose ``_step`` / ``_reset`` misbehaves on its ``at``-th call
when ``fault`` says so: ``"sleep"`` blocks (for an hour), ``"raise"`` raises
``ValueError("fault injected ...")``, ``"exit"`` calls ``os._exit(3)``, ``"kill"`` SIGKILLs
its own process.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from rl_envs import EnvBase, PendulumEnv


class FaultEnv(EnvBase):
    """PendulumEnv with a fault injected in ``where`` (``"step"`` or ``"reset"``)."""

    def __init__(self, fault: str | None = None, where: str = "step", at: int = 1) -> None:
        super().__init__()
        self.inner = PendulumEnv()
        self.observation_spec = self.inner.observation_spec.clone()
        self.action_spec = self.inner.action_spec.clone()
        self.fault, self.where, self.at = fault, where, at
        self.calls = {"step": 0, "reset": 0}

    def _maybe_fail(self, where: str) -> None:
        self.calls[where] += 1
        if self.fault is None or where != self.where or self.calls[where] != self.at:
            return
        if self.fault == "sleep":
            time.sleep(3600)
        elif self.fault == "raise":
            raise ValueError(f"fault injected in {where}")
        elif self.fault == "exit":
            os._exit(3)
        elif self.fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)

    def _reset(self, td: Any) -> Any:
        self._maybe_fail("reset")
        return self.inner._reset(td)

    def _step(self, td: Any) -> Any:
        self._maybe_fail("step")
        return self.inner._step(td)

    def _set_seed(self, seed: int | None) -> None:
        self.inner.set_seed(seed)


def make_fault_env(**kwargs: Any) -> FaultEnv:
    """Picklable constructor for workers started with spawn / forkserver."""
    return FaultEnv(**kwargs)
