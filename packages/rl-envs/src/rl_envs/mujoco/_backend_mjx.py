"""The ``"mjx"`` physics backend: MuJoCo XLA, ``jax.vmap`` over the batch, jitted.

Runs where JAX runs (CPU here; a GPU when JAX has one). JAX computes in float32
unless ``jax_enable_x64`` is set by the user, so trajectories agree with the
``"mujoco"`` backend to float32 precision, not bit for bit (see
``tests/test_mujoco_native_mjx.py`` for the stated tolerance).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rl_envs.mujoco._backend_mujoco import POST_CONSTRAINT_FIELDS
from rl_envs.mujoco._model import import_optional

__all__ = ["MJXBackend"]


def _field(data: Any, name: str) -> Any:
    """``data.<name>``; fields MJX moved to its implementation struct are read there."""
    impl = getattr(data, "_impl", None)
    if impl is not None and hasattr(impl, name):
        return getattr(impl, name)
    return getattr(data, name)


class MJXBackend:
    """``num_envs`` MJX datas stacked on a leading batch axis.

    Args:
        model: the compiled ``mujoco.MjModel`` (copied to the device with ``mjx.put_model``).
        num_envs: the batch size.
        fields: data fields read after each step and reset.

    Example:
        >>> import mujoco
        >>> m = mujoco.MjModel.from_xml_string(
        ...     "<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>")
        >>> b = MJXBackend(m, 2, ("qpos",))  # doctest: +SKIP
        >>> b.step(np.zeros((2, 0)), 3)  # doctest: +SKIP
    """

    name = "mjx"
    unstable: np.ndarray | None = None
    """After a step: bool ``[N]``, the rows whose state went non-finite; ``None`` if none."""

    def __init__(self, model: Any, num_envs: int, fields: tuple[str, ...]) -> None:
        what = 'MujocoEnv(backend="mjx")'
        jax = self._jax = import_optional("jax", what)
        jnp = self._jnp = import_optional("jax.numpy", what)
        mjx = import_optional("mujoco.mjx", what)
        self._mjx = mjx
        self.model = model
        self.num_envs = num_envs
        self.fields = tuple(fields)
        post = bool(POST_CONSTRAINT_FIELDS.intersection(self.fields))
        mx = mjx.put_model(model)
        fresh = mjx.make_data(mx)

        def read(d: Any) -> dict[str, Any]:
            return {f: _field(d, f) for f in self.fields}

        def step_one(d: Any, ctrl: Any, nstep: int) -> tuple[Any, dict[str, Any]]:
            d = d.replace(ctrl=ctrl)
            d = jax.lax.fori_loop(0, nstep, lambda _, x: mjx.step(mx, x), d)
            if post:
                d = mjx.rne_postconstraint(mx, d)
            return d, read(d)

        def reset_one(d: Any, qpos: Any, qvel: Any, do: Any) -> tuple[Any, dict[str, Any]]:
            new = mjx.forward(mx, fresh.replace(qpos=qpos, qvel=qvel))
            d = jax.tree.map(lambda a, b: jnp.where(do, a, b), new, d)
            return d, read(d)

        self._step = jax.jit(jax.vmap(step_one, in_axes=(0, 0, None)), static_argnums=2)
        self._reset = jax.jit(jax.vmap(reset_one))
        self._batch = jax.tree.map(lambda x: jnp.repeat(x[None], num_envs, axis=0), fresh)
        self._treedef = jax.tree.structure(self._batch)
        self._dtype = np.dtype(fresh.qpos.dtype)
        self._out: dict[str, np.ndarray] = {}
        # the initial state (qpos0, zero velocity) goes through the jitted reset: running
        # mjx.forward eagerly, op by op, takes minutes on CPU
        rows = np.arange(num_envs)
        self.reset(rows, np.tile(model.qpos0, (num_envs, 1)), np.zeros((num_envs, model.nv)))

    def step(self, ctrl: np.ndarray, frame_skip: int) -> None:
        """Sets ``ctrl`` ``[N, nu]`` and advances every data ``frame_skip`` physics steps."""
        jnp = self._jnp
        self._batch, out = self._step(self._batch, jnp.asarray(ctrl, self._dtype), int(frame_skip))
        self._out = {f: np.asarray(v, dtype=np.float64) for f, v in out.items()}
        # MJX does not reset a diverged simulator (MuJoCo does): its state goes non-finite
        bad = np.zeros(self.num_envs, dtype=bool)
        for v in self._out.values():
            bad |= ~np.isfinite(v.reshape(self.num_envs, -1)).all(1)
        self.unstable = bad if bad.any() else None

    def reset(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Resets ``rows`` to ``(qpos, qvel)`` (fresh data, then ``mjx.forward``)."""
        jnp, n = self._jnp, self.num_envs
        do = np.zeros(n, dtype=bool)
        do[rows] = True
        full_q = np.zeros((n, self.model.nq))
        full_v = np.zeros((n, self.model.nv))
        full_q[rows], full_v[rows] = qpos, qvel
        self._batch, out = self._reset(
            self._batch,
            jnp.asarray(full_q, self._dtype),
            jnp.asarray(full_v, self._dtype),
            jnp.asarray(do),
        )
        self._out = {f: np.asarray(v, dtype=np.float64) for f, v in out.items()}

    def read(self) -> dict[str, np.ndarray]:
        """The fields after the last step or reset, ``{name: [N, ...]}`` (as float64)."""
        return self._out

    def get_state(self) -> dict[str, Any]:
        """Every array of the batched MJX data (NumPy copies) and the read fields."""
        leaves = [np.array(x) for x in self._jax.tree.leaves(self._batch)]
        return {"leaves": leaves, "fields": {f: v.copy() for f, v in self._out.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state` (same model and ``num_envs``)."""
        leaves = state["leaves"]
        mine = self._jax.tree.leaves(self._batch)
        if len(leaves) != len(mine) or any(
            a.shape != b.shape for a, b in zip(leaves, mine, strict=False)
        ):
            raise ValueError(
                "The saved MJX state does not fit this env (different model or num_envs). "
                "Restore into an env built the same way."
            )
        self._batch = self._jax.tree.unflatten(
            self._treedef, [self._jnp.asarray(x) for x in leaves]
        )
        self._out = {f: np.array(v, dtype=np.float64) for f, v in state["fields"].items()}

    def data(self, i: int) -> Any:
        """A ``mujoco.MjData`` copy of env ``i`` (for rendering)."""
        one = self._jax.tree.map(lambda x: x[i], self._batch)
        return self._mjx.get_data(self.model, one)

    def close(self) -> None:
        """Nothing to release (JAX owns the buffers)."""
