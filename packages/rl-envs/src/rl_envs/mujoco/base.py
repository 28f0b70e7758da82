"""``MujocoEnv``: a batched MuJoCo task on the ``mujoco`` bindings, no Gymnasium in the loop.

A subclass gives the model and the task; the base does the rest. The task hooks work
on NumPy float64 arrays of the whole batch (``sim[name]`` has shape ``[N, ...]``):

* ``SIM_FIELDS``: the ``MjData`` fields the task reads (default ``("qpos", "qvel")``;
  e.g. ``"xpos"``, ``"cfrc_ext"``, ``"sensordata"``). ``cacc``/``cfrc_int``/``cfrc_ext``
  make the backend run ``mj_rnePostConstraint`` after each step, as Gymnasium does.
* ``_make_obs(sim) -> [N, obs_dim]``: the observation (default
  ``concat(qpos[:, SKIP_QPOS:], qvel)``). The base evaluates it once on the initial
  state to size the observation spec.
* ``_compute_reward(prev, action, sim) -> [N]``: ``prev``/``sim`` are the fields before
  and after the step, ``action`` the float64 copy of the action.
* ``_compute_terminated(sim) -> [N] bool`` (default: never).
* ``_sample_initial_state(n) -> (qpos [n, nq], qvel [n, nv])`` drawn from
  ``self.np_random`` (default: ``qpos0``/zero velocity plus
  ``U(-reset_noise_scale, reset_noise_scale)`` noise on both).
* ``_reset_task(rows)``: task state to redraw for the reset ``rows`` (e.g. a goal),
  with ``_task_state()`` / ``_set_task_state(state)`` to save and restore it.
* ``_model_source()``: the model when the constructor gets none (an MJCF string, a
  path or an ``MjModel``); or set the class attribute ``MODEL``.

The base builds the specs from the model (action bounds from ``actuator_ctrlrange``),
holds ``num_envs`` simulators for ``batch_size=[num_envs]``, repeats each action for
``frame_skip`` physics steps, truncates after ``max_episode_steps``, resets only the
entries flagged by ``"_reset"``, and saves/restores its exact state.

Bad input and diverged physics (never a silent wrong answer):

* ``step`` before the first ``reset()`` / ``set_state()`` raises (``requires_reset``).
* Actions holding NaN, inf or a magnitude above MuJoCo's ``mjMAXVAL`` (``1e10``) raise
  before the physics runs: MuJoCo would zero such a ``ctrl`` (its ``mjWARN_BADCTRL``)
  and the control cost would overflow. Finite out-of-spec actions follow
  :class:`~rl_envs.EnvBase`'s policy (passed on, MuJoCo clips them to ``ctrlrange``,
  a one-time warning; ``validate_actions=True`` raises).
* ``reset(qpos=..., qvel=...)`` must be finite arrays of shape ``[num_envs, nq]`` /
  ``[num_envs, nv]``; other keywords raise a ``TypeError``.
* Divergence: when MuJoCo finds a NaN, inf or huge ``qpos`` / ``qvel`` / ``qacc``
  during a step it resets that simulator to the model's default state and counts a
  warning (``mjWARN_BADQPOS`` / ``BADQVEL`` / ``BADQACC``); the ``"mjx"`` backend
  produces non-finite states instead. Either way, ``on_unstable="raise"`` (the
  default) raises a ``RuntimeError`` naming the rows and requires a ``reset()``;
  ``on_unstable="terminate"`` ends those rows' episodes (``terminated=True``) and
  warns (``UserWarning``) naming them. The rows stay flagged until they are reset.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rl_envs.env_base import EnvBase
from rl_envs.mujoco._backend_mujoco import default_num_threads
from rl_envs.mujoco._backends import make_backend
from rl_envs.mujoco._model import load_model
from rl_envs.mujoco._render import PixelRenderer
from rl_envs.specs import Bounded, Composite, Unbounded

__all__ = ["MujocoEnv"]

_MJ_MAXVAL = 1e10  # mjMAXVAL: MuJoCo treats larger ctrl / qpos / qvel values as bad
_ON_UNSTABLE = ("raise", "terminate")


class MujocoEnv(EnvBase):
    """Base of the native MuJoCo tasks (batched, selectable physics backend).

    Args:
        model: the MJCF text, a path to an ``.xml`` file or a ``mujoco.MjModel``;
            default: the subclass's model (``MODEL`` / ``_model_source()``).
        backend: ``"mujoco"`` (the C library; a thread pool over the simulators) or
            ``"mjx"`` (MuJoCo XLA on JAX; extra ``rl-envs[mjx]``).
        num_envs: number of simulators; the env's ``batch_size`` is ``(num_envs,)``.
        device: device of the output tensors (the physics runs on CPU for ``"mujoco"``).
        seed: seed of the reset-noise RNG (``None``: fresh entropy).
        frame_skip: physics steps per env step (default: the class's ``FRAME_SKIP``).
        reset_noise_scale: scale of the reset noise (default: ``RESET_NOISE_SCALE``).
        max_episode_steps: the episode is truncated after this many steps.
        dtype: float dtype of observations, actions and rewards.
        num_threads: threads of the ``"mujoco"`` backend (default
            ``min(num_envs, CPUs available)``; ``1`` steps in the calling thread).
        from_pixels: add a ``"pixels"`` observation (uint8 ``[N, H, W, 3]``) rendered
            with ``mujoco.Renderer``; needs an OpenGL backend (``MUJOCO_GL=egl`` or
            ``osmesa``).
        pixels_only: only the ``"pixels"`` observation.
        render_width: width of ``"pixels"``.
        render_height: height of ``"pixels"``.
        camera_id: the camera that renders ``"pixels"`` (``-1``: the free camera).
        validate_actions: see :class:`~rl_envs.EnvBase`.
        xml_path: TorchRL's name for a model given as a path (same as ``model``).
        on_unstable: what a diverged simulation does (see the module docstring):
            ``"raise"`` (default) or ``"terminate"`` (end the episode and warn).

    Example:
        >>> xml = '''<mujoco><worldbody><body><joint name="h" type="hinge"/>
        ...   <geom type="capsule" size=".1" fromto="0 0 0 0 0 1"/></body></worldbody>
        ...   <actuator><motor joint="h" ctrlrange="-1 1"/></actuator></mujoco>'''
        >>> class Spin(MujocoEnv):
        ...     def _compute_reward(self, prev, action, sim):
        ...         return sim["qvel"][:, 0]
        >>> env = Spin(xml, num_envs=4, seed=0, num_threads=1)
        >>> env.rollout(3).batch_size
        torch.Size([4, 3])
    """

    MODEL: ClassVar[str | Path | None] = None
    FRAME_SKIP: ClassVar[int] = 1
    RESET_NOISE_SCALE: ClassVar[float] = 0.0
    SKIP_QPOS: ClassVar[int] = 0
    SIM_FIELDS: ClassVar[tuple[str, ...]] = ("qpos", "qvel")
    requires_reset = True

    def __init__(
        self,
        model: Any = None,
        *,
        backend: str = "mujoco",
        num_envs: int = 1,
        device: torch.device | str | None = None,
        seed: int | None = None,
        frame_skip: int | None = None,
        reset_noise_scale: float | None = None,
        max_episode_steps: int = 1000,
        dtype: torch.dtype = torch.float32,
        num_threads: int | None = None,
        from_pixels: bool = False,
        pixels_only: bool = False,
        render_width: int = 64,
        render_height: int = 64,
        camera_id: int = 0,
        validate_actions: bool = False,
        xml_path: str | Path | None = None,
        on_unstable: str = "raise",
    ) -> None:
        if on_unstable not in _ON_UNSTABLE:
            raise ValueError(
                f"on_unstable={on_unstable!r}: expected one of {_ON_UNSTABLE} ('raise' stops "
                "at a diverged simulation, 'terminate' ends its episode and warns)."
            )
        self.on_unstable = on_unstable
        if model is not None and xml_path is not None:
            raise ValueError("Pass the model once: either model=... or xml_path=..., not both.")
        model = model if model is not None else xml_path
        if int(num_envs) < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}.")
        super().__init__(
            device=device, batch_size=(int(num_envs),), validate_actions=validate_actions
        )
        self.num_envs = int(num_envs)
        self.dtype = dtype
        self._np_dtype = torch.empty((), dtype=dtype).numpy().dtype
        self.model = load_model(model if model is not None else self._model_source())
        self.frame_skip = int(frame_skip if frame_skip is not None else self.FRAME_SKIP)
        if self.frame_skip < 1:
            raise ValueError(f"frame_skip must be >= 1, got {self.frame_skip}.")
        self.reset_noise_scale = float(
            reset_noise_scale if reset_noise_scale is not None else self.RESET_NOISE_SCALE
        )
        self.max_episode_steps = int(max_episode_steps)
        self.dt = float(self.model.opt.timestep) * self.frame_skip
        self.init_qpos = np.array(self.model.qpos0, dtype=np.float64)
        self.init_qvel = np.zeros(self.model.nv)
        self.from_pixels = bool(from_pixels or pixels_only)
        self.pixels_only = bool(pixels_only)
        threads = default_num_threads(self.num_envs) if num_threads is None else int(num_threads)
        self.backend_name = backend
        self._physics = make_backend(backend, self.model, self.num_envs, self.SIM_FIELDS, threads)
        self._renderer = (
            PixelRenderer(self.model, render_width, render_height, camera_id)
            if self.from_pixels
            else None
        )
        self.np_random = np.random.default_rng(seed)
        self._t = np.zeros(self.num_envs, dtype=np.int64)
        self._sim = self._physics.read()
        self._make_specs()

    # ------------------------------------------------------------- task hooks
    def _model_source(self) -> Any:
        if self.MODEL is None:
            raise ValueError(
                f"{type(self).__name__} has no model: pass model=<MJCF string | path | "
                "mujoco.MjModel>, or set the class attribute MODEL / override _model_source()."
            )
        return self.MODEL

    def _make_obs(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([sim["qpos"][:, self.SKIP_QPOS :], sim["qvel"]], axis=1)

    def _compute_reward(
        self, prev: dict[str, np.ndarray], action: np.ndarray, sim: dict[str, np.ndarray]
    ) -> np.ndarray:
        raise NotImplementedError(
            f"{type(self).__name__} must implement _compute_reward(prev, action, sim) -> [N]."
        )

    def _compute_terminated(self, sim: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(self.num_envs, dtype=bool)

    def _sample_initial_state(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        s = self.reset_noise_scale
        qpos = self.init_qpos + self.np_random.uniform(-s, s, size=(n, self.model.nq))
        qvel = self.init_qvel + self.np_random.uniform(-s, s, size=(n, self.model.nv))
        return qpos, qvel

    def _reset_task(self, rows: np.ndarray) -> None:
        """Redraws the task's own state (goals, targets) of ``rows``; nothing by default."""

    def _task_state(self) -> dict[str, Any]:
        """Picklable copies of the task's own state (for :meth:`get_state`)."""
        return {}

    def _set_task_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`_task_state`."""

    # ------------------------------------------------------------------ specs
    def _make_specs(self) -> None:
        m, n, d, dt = self.model, self.num_envs, self.device, self.dtype
        obs = self._make_obs(self._sim)
        if obs.ndim != 2 or obs.shape[0] != n:
            raise ValueError(
                f"{type(self).__name__}._make_obs returned shape {obs.shape}; expected "
                f"[num_envs={n}, obs_dim]."
            )
        spec = Composite(shape=(n,), device=d)
        if not self.pixels_only:
            spec["observation"] = Unbounded(shape=(n, obs.shape[1]), dtype=dt, device=d)
        if self._renderer is not None:
            spec["pixels"] = Bounded(
                low=0,
                high=255,
                shape=(n, self._renderer.height, self._renderer.width, 3),
                dtype=torch.uint8,
                device=d,
            )
        self.observation_spec = spec
        limited = np.asarray(m.actuator_ctrllimited, dtype=bool)
        rng = np.asarray(m.actuator_ctrlrange, dtype=np.float64).reshape(m.nu, 2)
        low = torch.as_tensor(np.where(limited, rng[:, 0], -1.0), dtype=dt)
        high = torch.as_tensor(np.where(limited, rng[:, 1], 1.0), dtype=dt)
        self.action_spec = Bounded(
            low=low.expand(n, m.nu).clone(),
            high=high.expand(n, m.nu).clone(),
            shape=(n, m.nu),
            dtype=dt,
            device=d,
        )
        self.reward_spec = Unbounded(shape=(n, 1), dtype=dt, device=d)

    # ------------------------------------------------------------------ reset
    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        """Resets all entries, or those flagged by ``"_reset"``.

        Keyword Args:
            qpos, qvel: optional ``[num_envs, nq]`` / ``[num_envs, nv]`` start states
                (instead of the random initial state); only the reset rows are read.
        """
        unknown = sorted(set(kwargs) - {"qpos", "qvel"})
        if unknown:
            raise TypeError(
                f"{type(self).__name__}.reset() got unexpected keyword arguments {unknown}; "
                "expected only qpos=[num_envs, nq] and qvel=[num_envs, nv] (start states)."
            )
        n = self.num_envs
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            rows = np.arange(n)
        else:
            rows = np.flatnonzero(mask.reshape(n, -1).any(-1).cpu().numpy())
        if len(rows):
            qpos, qvel = self._initial_state(rows, kwargs.get("qpos"), kwargs.get("qvel"))
            self._physics.reset(rows, qpos, qvel)
            self._reset_task(rows)
            self._t[rows] = 0
            self._sim = self._physics.read()
        return TensorDict(self._observations(self._sim), batch_size=(n,), device=self.device)

    def _initial_state(
        self, rows: np.ndarray, qpos: Any, qvel: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        m = self.model
        if qpos is None or qvel is None:
            q0, v0 = self._sample_initial_state(len(rows))
        given = []
        for name, value, width in (("qpos", qpos, m.nq), ("qvel", qvel, m.nv)):
            if value is None:
                given.append(q0 if name == "qpos" else v0)
                continue
            try:
                arr = np.asarray(torch.as_tensor(value).detach().cpu(), dtype=np.float64)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise TypeError(
                    f"reset({name}=...): expected a float array of shape "
                    f"{(self.num_envs, width)}, got {type(value).__name__} ({exc})."
                ) from exc
            if arr.shape != (self.num_envs, width):
                raise ValueError(
                    f"reset({name}=...) got shape {arr.shape}, expected "
                    f"{(self.num_envs, width)} (num_envs, model.n{name[1]})."
                )
            bad = np.flatnonzero(~np.isfinite(arr[rows]).all(1))
            if len(bad):
                raise ValueError(
                    f"reset({name}=...): expected finite values, got NaN or inf in env rows "
                    f"{rows[bad].tolist()}; nothing was reset. Pass finite start states (or "
                    f"leave {name} out for the random initial state)."
                )
            given.append(arr[rows])
        return given[0], given[1]

    # ------------------------------------------------------------------- step
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action")
        n, nu = self.num_envs, self.model.nu
        if tuple(action.shape) != (n, nu):
            raise ValueError(
                f"{type(self).__name__}: action has shape {tuple(action.shape)}, expected "
                f"{(n, nu)} (num_envs, model.nu). Write actions from env.action_spec."
            )
        ctrl = action.detach().to("cpu", torch.float64).numpy()
        # max() propagates NaN, which compares False: one reduction catches NaN, inf and
        # magnitudes MuJoCo would zero
        if not np.abs(ctrl).max(initial=0.0) <= _MJ_MAXVAL:
            raise self._bad_action_error(ctrl)
        prev = self._sim
        self._physics.step(ctrl, self.frame_skip)
        sim = self._sim = self._physics.read()
        self._t += 1
        reward = np.asarray(self._compute_reward(prev, ctrl, sim), dtype=self._np_dtype)
        terminated = np.asarray(self._compute_terminated(sim), dtype=bool).reshape(n, 1)
        unstable = self._physics.unstable
        if unstable is not None:
            terminated = terminated | self._report_unstable(unstable).reshape(n, 1)
        truncated = (self._t >= self.max_episode_steps).reshape(n, 1)
        out = self._observations(sim)
        # NumPy first, one torch.from_numpy per entry: this is the hot path at small N
        out["reward"] = torch.from_numpy(reward.reshape(n, 1))
        out["terminated"] = torch.from_numpy(terminated)
        out["truncated"] = torch.from_numpy(truncated)
        out["done"] = torch.from_numpy(terminated | truncated)
        return TensorDict(out, batch_size=(n,), device=self.device)

    def _bad_action_error(self, ctrl: np.ndarray) -> ValueError:
        non_finite = np.flatnonzero(~np.isfinite(ctrl).all(1)).tolist()
        if non_finite:
            bad, what = non_finite, "NaN or inf"
        else:
            bad = np.flatnonzero(~(np.abs(ctrl) <= _MJ_MAXVAL).all(1)).tolist()
            what = f"a magnitude above {_MJ_MAXVAL:g} (which MuJoCo would replace by 0)"
        spec = self.action_spec.space
        return ValueError(
            f"{type(self).__name__}: expected finite actions of magnitude <= {_MJ_MAXVAL:g} "
            f"(MuJoCo's mjMAXVAL; the spec's bounds are {spec.low[0].tolist()} .. "
            f"{spec.high[0].tolist()}), got {what} in env rows {bad} (row {bad[0]}: "
            f"{ctrl[bad[0]].tolist()[:6]}); the simulation was not stepped and its state is "
            "unchanged. Check the policy's output (e.g. a diverged network) or clip it: "
            "`env.action_spec.project(action)`."
        )

    def _report_unstable(self, unstable: np.ndarray) -> np.ndarray:
        """Raises or warns about diverged rows (``on_unstable``); returns the bool mask."""
        rows = np.flatnonzero(unstable).tolist()
        what = (
            f"{type(self).__name__}: the simulation of env rows {rows} diverged (NaN, inf or "
            "huge qpos / qvel / qacc: MuJoCo's 'simulation is unstable'; MuJoCo reset those "
            "simulators to the model's default state, which is not the episode's state)"
        )
        if self.on_unstable == "raise":
            self.require_reset()
            raise RuntimeError(
                f"{what}. Expected a stable simulation. Reset the env (`td = env.reset()`), "
                "check the start states given to reset(qpos=..., qvel=...), the model's "
                "timestep and the action scale, or build the env with on_unstable="
                "'terminate' to end those episodes (terminated=True) and go on."
            )
        warnings.warn(
            f"{what}; their episodes end here (terminated=True, on_unstable='terminate'). "
            "Reset them before stepping them again.",
            UserWarning,
            stacklevel=4,
        )
        return unstable

    def _observations(self, sim: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        if not self.pixels_only:
            out["observation"] = torch.from_numpy(self._make_obs(sim).astype(self._np_dtype))
        if self._renderer is not None:
            frames = [self._renderer.render(self._physics.data(i)) for i in range(self.num_envs)]
            out["pixels"] = torch.from_numpy(np.stack(frames))
        return out

    # -------------------------------------------------------------- seeding
    def _set_seed(self, seed: int | None) -> None:
        self.np_random = np.random.default_rng(seed)

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """The exact state: physics (``mjSTATE_INTEGRATION``), step counters, reset RNG.

        Example:
            >>> from rl_envs.mujoco import HalfCheetahEnv
            >>> env = HalfCheetahEnv(num_envs=2, seed=0)
            >>> _ = env.reset()
            >>> fresh = HalfCheetahEnv(num_envs=2)
            >>> fresh.set_state(env.get_state())  # steps exactly like env from here
        """
        return {
            "env_class": type(self).__name__,
            "backend": self.backend_name,
            "physics": self._physics.get_state(),
            "t": self._t.copy(),
            "rng": self.np_random.bit_generator.state,
            "task": self._task_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` result into an env built the same way."""
        for key, mine in (("env_class", type(self).__name__), ("backend", self.backend_name)):
            if state.get(key) != mine:
                raise ValueError(
                    f"set_state(): the state was saved by {key}={state.get(key)!r}, this env "
                    f"has {key}={mine!r}. Restore into an env built the same way."
                )
        self._physics.set_state(state["physics"])
        self._t = np.array(state["t"], dtype=np.int64)
        self.np_random = np.random.default_rng()
        self.np_random.bit_generator.state = state["rng"]
        self._set_task_state(state.get("task", {}))
        self._sim = self._physics.read()
        self._awaiting_reset = False

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Stops the physics threads and frees the renderer (``raise_if_closed``: TorchRL's
        keyword; closing twice is silent)."""
        self.is_closed = True
        self._physics.close()
        if self._renderer is not None:
            self._renderer.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_envs={self.num_envs}, backend={self.backend_name!r}, "
            f"frame_skip={self.frame_skip}, device={self.device})"
        )
