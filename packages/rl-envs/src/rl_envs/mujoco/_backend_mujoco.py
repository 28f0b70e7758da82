"""The ``"mujoco"`` physics backend: ``N`` ``MjData`` stepped by the C library.

``mujoco.mj_step`` releases the GIL, so with ``num_threads > 1`` the ``N`` datas are
split into ``num_threads`` contiguous chunks stepped by a thread pool; with one thread
they are stepped in the caller's thread (no pool, no hand-off cost).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from rl_envs.mujoco._model import import_optional

__all__ = ["MujocoBackend", "default_num_threads"]

# Fields computed by mj_rnePostConstraint (gymnasium calls it after every step).
POST_CONSTRAINT_FIELDS = frozenset({"cacc", "cfrc_int", "cfrc_ext"})
# mjtWarning indices of a diverged state (fixed by MuJoCo's ABI; checked in the tests)
_BADQPOS, _BADQVEL, _BADQACC = 3, 4, 5


def default_num_threads(num_envs: int) -> int:
    """``min(num_envs, CPUs this process may use)``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(num_envs, cpus))


class MujocoBackend:
    """``num_envs`` ``MjData`` of one ``MjModel``, stepped in place.

    Args:
        model: the compiled ``mujoco.MjModel``.
        num_envs: how many datas.
        fields: ``MjData`` attributes read after each step and reset (``"qpos"``,
            ``"qvel"``, ``"xpos"``, ``"cfrc_ext"``, ``"sensordata"``, ...).
        num_threads: threads stepping the datas (``1``: the caller's thread).

    Example:
        >>> import mujoco
        >>> m = mujoco.MjModel.from_xml_string(
        ...     "<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>")
        >>> b = MujocoBackend(m, 2, ("qpos",), num_threads=1)
        >>> b.step(np.zeros((2, 0)), 3)
        >>> b.read()["qpos"].shape
        (2, 7)
    """

    name = "mujoco"
    unstable: np.ndarray | None = None
    """After a step: bool ``[N]``, the rows MuJoCo found diverged (and reset itself) since
    their last reset; ``None`` if none (see ``MujocoEnv``)."""

    def __init__(
        self, model: Any, num_envs: int, fields: tuple[str, ...], num_threads: int = 1
    ) -> None:
        self._mujoco = import_optional("mujoco", 'MujocoEnv(backend="mujoco")')
        self.model = model
        self.num_envs = num_envs
        self.fields = tuple(fields)
        self.post_constraint = bool(POST_CONSTRAINT_FIELDS.intersection(self.fields))
        self.datas = [self._mujoco.MjData(model) for _ in range(num_envs)]
        for d in self.datas:
            self._mujoco.mj_forward(model, d)
        unknown = [f for f in self.fields if not hasattr(self.datas[0], f)]
        if unknown:
            raise ValueError(
                f"SIM_FIELDS names {unknown}, which are not mujoco.MjData fields; use MjData "
                "attribute names such as 'qpos', 'qvel', 'xpos', 'cfrc_ext', 'sensordata'."
            )
        self._shapes = {f: np.shape(getattr(self.datas[0], f)) for f in self.fields}
        self.num_threads = max(1, min(int(num_threads), num_envs))
        self._chunks = [
            c.tolist() for c in np.array_split(np.arange(num_envs), self.num_threads) if len(c)
        ]
        self._pool: ThreadPoolExecutor | None = None
        self._ctrl = np.zeros((num_envs, model.nu))
        self._frame_skip = 1
        self._out: dict[str, np.ndarray] = {}
        self._spec = self._mujoco.mjtState.mjSTATE_INTEGRATION
        self._state_size = self._mujoco.mj_stateSize(model, self._spec)
        self._out = self._new_out()
        self._read_rows(range(num_envs), self._out)
        # views of each data's warning counters: mj_step counts a diverged state there (and
        # resets the data); mj_resetData (our reset) zeroes them
        self._warnings = [d.warning.number for d in self.datas]
        self._bad_rows: list[int] = []

    # --------------------------------------------------------------- stepping
    def _new_out(self) -> dict[str, np.ndarray]:
        return {f: np.empty((self.num_envs, *s)) for f, s in self._shapes.items()}

    def _read_rows(self, rows: Any, out: dict[str, np.ndarray]) -> None:
        datas = self.datas
        for f in self.fields:
            buf = out[f]
            for i in rows:
                buf[i] = getattr(datas[i], f)

    def _step_rows(self, rows: list[int]) -> None:
        mj, model, datas, ctrl, out = self._mujoco, self.model, self.datas, self._ctrl, self._out
        nstep, post = self._frame_skip, self.post_constraint
        fields, warns = self.fields, self._warnings
        for i in rows:
            d = datas[i]
            d.ctrl[:] = ctrl[i]
            mj.mj_step(model, d, nstep)
            if post:
                mj.mj_rnePostConstraint(model, d)
            w = warns[i]
            if w[_BADQPOS] or w[_BADQVEL] or w[_BADQACC]:
                self._bad_rows.append(i)  # list.append is atomic: safe from the pool threads
            for f in fields:
                out[f][i] = getattr(d, f)

    def step(self, ctrl: np.ndarray, frame_skip: int) -> None:
        """Sets ``ctrl`` ``[N, nu]`` and advances every data ``frame_skip`` physics steps."""
        self._ctrl = ctrl
        self._frame_skip = frame_skip
        self._out = self._new_out()
        self._bad_rows = []
        if len(self._chunks) == 1:
            self._step_rows(self._chunks[0])
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self.num_threads, thread_name_prefix="rl-envs-mujoco"
                )
            for future in [self._pool.submit(self._step_rows, c) for c in self._chunks]:
                future.result()
        if self._bad_rows:
            self.unstable = np.zeros(self.num_envs, dtype=bool)
            self.unstable[self._bad_rows] = True
        else:
            self.unstable = None

    def reset(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Resets ``rows`` to ``(qpos, qvel)`` (``[len(rows), nq]``, ``[len(rows), nv]``).

        As Gymnasium: ``mj_resetData``, write the state, ``mj_forward``.
        """
        mj, model = self._mujoco, self.model
        out = {f: v.copy() for f, v in self._out.items()}
        for k, i in enumerate(rows.tolist()):
            d = self.datas[i]
            mj.mj_resetData(model, d)
            d.qpos[:] = qpos[k]
            d.qvel[:] = qvel[k]
            mj.mj_forward(model, d)
        self._read_rows(rows.tolist(), out)
        self._out = out

    def read(self) -> dict[str, np.ndarray]:
        """The fields after the last step or reset, ``{name: [N, ...]}`` (float64)."""
        return self._out

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, np.ndarray]:
        """``mjSTATE_INTEGRATION`` of every data (warm start included) and the read fields."""
        state = np.empty((self.num_envs, self._state_size))
        for i, d in enumerate(self.datas):
            self._mujoco.mj_getState(self.model, d, state[i], self._spec)
        return {"physics": state, "fields": {f: v.copy() for f, v in self._out.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state` (same model and ``num_envs``)."""
        physics = np.asarray(state["physics"], dtype=np.float64)
        if physics.shape != (self.num_envs, self._state_size):
            raise ValueError(
                f"The saved MuJoCo state has shape {physics.shape}, this env expects "
                f"{(self.num_envs, self._state_size)} (num_envs, mjSTATE_INTEGRATION size). "
                "Restore into an env built with the same model and num_envs."
            )
        for i, d in enumerate(self.datas):
            self._mujoco.mj_setState(self.model, d, physics[i], self._spec)
            self._mujoco.mj_forward(self.model, d)
        self._out = {f: np.array(v, dtype=np.float64) for f, v in state["fields"].items()}

    def data(self, i: int) -> Any:
        """The ``MjData`` of env ``i`` (for rendering)."""
        return self.datas[i]

    def close(self) -> None:
        """Stops the thread pool."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
