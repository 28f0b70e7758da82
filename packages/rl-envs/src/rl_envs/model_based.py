"""Model-based envs: imagination with a learned world model, behind the env contract.

``ModelBasedEnvBase`` steps by calling a world model (any callable that reads and writes a
TensorDict, e.g. a ``TensorDictModule``; this package never imports one) on the root of the
step, and keeps the observation, reward and done entries it wrote. ``DreamerEnv`` is
Dreamer's latent imagination (Hafner et al., 2019, arXiv:1912.01603): its observations are
the latent ``"state"`` and ``"belief"``, it never ends an episode, and it adopts the batch
size of the TensorDict it is reset with (TorchRL's model-based envs are not batch-locked:
the actor loss starts one imagined trajectory from every posterior state of a batch).
``WorldModelEnv`` drives the step module of a generic world model (encoder, dynamics, heads;
``rl_modules.WorldModel``) that writes its predictions under ``"next"``, from a latent the
caller encodes. Names and arguments follow TorchRL's ``torchrl.envs.model_based``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from rl_envs.env_base import EnvBase
from rl_envs.specs import Categorical, Composite, Unbounded

__all__ = ["DreamerEnv", "ModelBasedEnvBase", "WorldModelEnv"]

WorldModel = Callable[[TensorDictBase], TensorDictBase]


class ModelBasedEnvBase(EnvBase):
    """Base of envs whose transitions come from a world model.

    ``_step`` calls ``world_model`` on a shallow copy of the root (action and current
    state entries) and returns the entries of the observation, reward and done specs that
    it wrote; missing done flags are ``False``. Subclasses implement ``_reset``.

    Args:
        world_model: a callable ``td -> td`` (``TensorDictModule``-like); it is registered as
            a submodule when it is an ``nn.Module``.
        params: unused placeholder of TorchRL's functional call; must be ``None``.
        buffers: as ``params``.
        device: the env's device.
        batch_size: the env's batch size.

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from rl_envs import Unbounded
        >>> class Drift(ModelBasedEnvBase):
        ...     def _reset(self, td, **kwargs):
        ...         return TensorDict(obs=torch.zeros(*self.batch_size, 1), batch_size=self.batch_size)
        >>> wm = TensorDictModule(lambda o, a: (o + a, -(o + a).abs()),
        ...                       in_keys=["obs", "action"], out_keys=["obs", "reward"])
        >>> env = Drift(wm, batch_size=[2])
        >>> env.observation_spec = Composite(obs=Unbounded((2, 1)), shape=[2])
        >>> env.action_spec = Unbounded((2, 1))
        >>> env.rollout(3)["next", "obs"].shape
        torch.Size([2, 3, 1])
    """

    def __init__(
        self,
        world_model: WorldModel,
        params: Any = None,
        buffers: Any = None,
        device: torch.device | str | None = "cpu",
        batch_size: Sequence[int] | torch.Size | None = None,
    ) -> None:
        super().__init__(device=device, batch_size=batch_size)
        if params is not None or buffers is not None:
            raise ValueError(
                f"{type(self).__name__}: params/buffers are not supported; the world model is "
                "called with its own parameters (swap them with TensorDict.to_module if needed)."
            )
        if not callable(world_model):
            raise TypeError(
                f"{type(self).__name__}: world_model must be a callable td -> td (e.g. a "
                f"TensorDictModule), got {type(world_model).__name__}."
            )
        self.world_model = world_model
        # The world model runs on any batch: with an empty batch_size, step / reset take
        # inputs of any batch size (TorchRL's model-based envs are batch-unlocked).
        self._batch_locked = False
        # TorchRL's model-based envs flag "done" and "terminated" only: imagined
        # trajectories are not truncated by a time limit.
        flag = Categorical(2, shape=(*self.batch_size, 1), dtype=torch.bool, device=self.device)
        self.done_spec = Composite(done=flag, terminated=flag.clone(), shape=self.batch_size)

    def set_specs_from_env(self, env: Any) -> None:
        """Copy the observation, action, reward, done and state specs of ``env``.

        The specs are taken without ``env``'s batch dims and given this env's.
        """
        self.observation_spec_unbatched = env.full_observation_spec_unbatched
        self.action_spec_unbatched = env.full_action_spec_unbatched
        self.reward_spec_unbatched = env.full_reward_spec_unbatched
        self.done_spec_unbatched = env.full_done_spec_unbatched
        self.state_spec_unbatched = env.full_state_spec_unbatched

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = self.world_model(tensordict.copy())
        keys = [*self.observation_keys, *self.reward_keys, *self.done_keys]
        return out.select(*keys, strict=False)

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            torch.manual_seed(seed)


class DreamerEnv(ModelBasedEnvBase):
    """Dreamer's imagination env: latent ``"state"``/``"belief"`` in, imagined reward out.

    Its observation and state specs hold ``"state"`` (shape ``prior_shape``) and
    ``"belief"`` (``belief_shape``); the action and reward specs are set by the user or
    :meth:`set_specs_from_env`. Episodes never end (done flags are all ``False``).
    ``reset(td)`` starts from ``td``'s ``"state"``/``"belief"`` (random normal ones without
    ``td``) and adopts ``td``'s batch size.

    Args:
        world_model: a callable reading ``"state"``, ``"belief"``, ``"action"`` and writing
            the next ``"state"``, ``"belief"`` and ``"reward"`` at the root (in Dreamer:
            ``WorldModelWrapper(prior, reward_model)``).
        prior_shape: shape of the stochastic state.
        belief_shape: shape of the belief.
        obs_decoder: optional callable ``td -> td`` decoding the latents
            (:meth:`decode_obs`).
        device: the env's device.
        batch_size: the initial batch size (changes with the TensorDict given to ``reset``).

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from rl_envs import Bounded, check_env_specs
        >>> wm = TensorDictModule(lambda s, b, a: (s + a.sum(-1, keepdim=True), b, s[..., :1]),
        ...                       in_keys=["state", "belief", "action"],
        ...                       out_keys=["state", "belief", "reward"])
        >>> env = DreamerEnv(wm, prior_shape=(4,), belief_shape=(3,), batch_size=[5])
        >>> env.action_spec = Bounded(-1.0, 1.0, shape=(5, 2))
        >>> check_env_specs(env)
        >>> start = TensorDict(state=torch.zeros(7, 4), belief=torch.zeros(7, 3), batch_size=[7])
        >>> env.rollout(15, auto_reset=False, tensordict=env.reset(start)).batch_size
        torch.Size([7, 15])
    """

    def __init__(
        self,
        world_model: WorldModel,
        prior_shape: Sequence[int] | torch.Size,
        belief_shape: Sequence[int] | torch.Size,
        obs_decoder: WorldModel | None = None,
        device: torch.device | str | None = "cpu",
        batch_size: Sequence[int] | torch.Size | None = None,
    ) -> None:
        super().__init__(world_model, device=device, batch_size=batch_size)
        self.obs_decoder = obs_decoder
        self.prior_shape = torch.Size(prior_shape)
        self.belief_shape = torch.Size(belief_shape)
        latent = Composite(
            state=Unbounded(self.prior_shape), belief=Unbounded(self.belief_shape), shape=()
        )
        self.observation_spec_unbatched = latent
        self.state_spec_unbatched = latent.clone()

    # ---------------------------------------------------------------- batch size
    def set_batch_size(self, batch_size: Sequence[int] | torch.Size) -> None:
        """Give the env (and all its specs) a new batch size."""
        batch_size = torch.Size(batch_size)
        if batch_size == self.batch_size:
            return
        specs = {
            "observation_spec_unbatched": self.observation_spec_unbatched,
            "action_spec_unbatched": self.full_action_spec_unbatched,
            "reward_spec_unbatched": self.full_reward_spec_unbatched,
            "done_spec_unbatched": self.full_done_spec_unbatched,
            "state_spec_unbatched": self.state_spec_unbatched,
        }
        self._batch_size = batch_size  # EnvBase's protected batch size; specs re-batched below
        for name, spec in specs.items():
            setattr(self, name, spec)

    def set_specs_from_env(self, env: Any) -> None:
        """Take the action, reward and done specs of ``env``; ``"state"``/``"belief"`` from its
        observation spec when it has them (e.g. from a ``TensorDictPrimer``), else from
        ``prior_shape``/``belief_shape``."""
        self.action_spec_unbatched = env.full_action_spec_unbatched
        self.reward_spec_unbatched = env.full_reward_spec_unbatched
        self.done_spec_unbatched = env.full_done_spec_unbatched
        obs = env.full_observation_spec_unbatched
        keys = set(obs.keys())
        if {"state", "belief"} <= keys:
            latent = Composite(state=obs["state"], belief=obs["belief"], shape=())
            self.observation_spec_unbatched = latent
            self.state_spec_unbatched = latent.clone()

    # ---------------------------------------------------------------- env hooks
    def reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        """Start imagining from ``tensordict``'s ``"state"``/``"belief"`` (adopting its batch
        size), or from random normal latents without it."""
        if tensordict is not None:
            self.set_batch_size(tensordict.batch_size)
        return super().reset(tensordict, **kwargs)

    def rollout(
        self, max_steps: int, policy: Any = None, *args: Any, **kwargs: Any
    ) -> TensorDictBase:
        """:meth:`EnvBase.rollout`, adopting the batch size of ``tensordict=`` when given."""
        start = kwargs.get("tensordict")
        if start is not None:
            self.set_batch_size(start.batch_size)
        return super().rollout(max_steps, policy, *args, **kwargs)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        if tensordict is None:
            return self.full_observation_spec.rand()
        missing = [k for k in ("state", "belief") if tensordict.get(k, None) is None]
        if missing:
            present = sorted(str(k) for k in tensordict.keys(True, True))
            raise KeyError(
                f"DreamerEnv.reset(td) expected the latent entries {missing} in td; present: "
                f"{present}. Pass the posterior 'state' and 'belief' of the world model "
                "(e.g. data['next'].select('state', 'belief').reshape(-1))."
            )
        return tensordict.select("state", "belief").to(self.device)

    def decode_obs(
        self, tensordict: TensorDictBase, compute_latents: bool = False
    ) -> TensorDictBase:
        """Decode latents into observations with ``obs_decoder`` (running the world model first
        with ``compute_latents``)."""
        if self.obs_decoder is None:
            raise ValueError("DreamerEnv.decode_obs: no obs_decoder was given to the constructor.")
        if compute_latents:
            tensordict = self.world_model(tensordict)
        return self.obs_decoder(tensordict)


class WorldModelEnv(ModelBasedEnvBase):
    """Imagined rollouts of a world model in latent space, with a real env's specs.

    Each step calls ``world_model.step_module`` (dynamics and heads, no encoder) on the
    root; it writes its predictions under ``"next"`` (``("next", latent_key)``,
    ``("next", "reward")``, optionally ``("next", "done")``), which the env returns as the
    step's content. A reward or done flag the model does not predict is zero (``False``):
    without a done head, rollouts run for ``max_steps``. ``reset(td)`` starts from the
    latent in ``td`` (e.g. ``world_model.encode(obs_td)``); there is no latent to start from
    without one.

    Args:
        world_model: a ``WorldModel``-like module with a ``step_module`` attribute.
        base_env: the real env whose action, reward, done and (by default) observation specs
            the imagined env presents; it is never stepped.
        observation_spec: the observation spec to use instead of ``base_env``'s (e.g. the
            latent's).
        batch_size: default ``base_env.batch_size`` (``[1]`` when it is empty).
        device: default ``base_env.device``.
        latent_key: where the latent lives (default ``"latent"``).

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> class Ref(EnvBase):  # only its specs are read
        ...     def __init__(self):
        ...         super().__init__(batch_size=[2])
        ...         self.observation_spec = Composite(latent=Unbounded((2, 3)), shape=[2])
        ...         self.action_spec = Unbounded((2, 3))
        >>> class WM(torch.nn.Module):
        ...     step_module = TensorDictSequential(
        ...         TensorDictModule(lambda z, a: z + a, ["latent", "action"], [("next", "latent")]),
        ...         TensorDictModule(lambda z: z.sum(-1, True), [("next", "latent")],
        ...                          [("next", "reward")]))
        >>> env = WorldModelEnv(WM(), base_env=Ref())
        >>> start = TensorDict(latent=torch.zeros(2, 3), batch_size=[2])
        >>> env.rollout(4, tensordict=start)["next", "latent"].shape
        torch.Size([2, 4, 3])
    """

    def __init__(
        self,
        world_model: Any,
        base_env: EnvBase,
        *,
        observation_spec: Any = None,
        batch_size: Sequence[int] | torch.Size | None = None,
        device: torch.device | str | None = None,
        latent_key: NestedKey = "latent",
    ) -> None:
        step_module = getattr(world_model, "step_module", None)
        if step_module is None:
            raise TypeError(
                f"WorldModelEnv: world_model must expose a step_module (dynamics and heads, "
                f"e.g. rl_modules.WorldModel), got {type(world_model).__name__}."
            )
        if batch_size is None:
            batch_size = base_env.batch_size if len(base_env.batch_size) else torch.Size([1])
        super().__init__(
            step_module,
            device=base_env.device if device is None else device,
            batch_size=batch_size,
        )
        self.full_world_model = world_model
        self.latent_key = latent_key
        self.action_spec_unbatched = base_env.full_action_spec_unbatched
        self.reward_spec_unbatched = base_env.full_reward_spec_unbatched
        self.done_spec_unbatched = base_env.full_done_spec_unbatched
        if observation_spec is not None:
            self.observation_spec = observation_spec
        else:
            self.observation_spec_unbatched = base_env.full_observation_spec_unbatched

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = self.world_model(tensordict.copy())
        next_td = out.get("next", None)
        result = tensordict.empty()
        if next_td is None:
            raise KeyError(
                f"WorldModelEnv: the world model's step wrote nothing under 'next' (keys: "
                f"{sorted(map(str, out.keys(True, True)))}); its dynamics should write "
                f"('next', {self.latent_key!r}) and its reward head ('next', 'reward')."
            )
        for key in self.observation_keys:
            value = next_td.get(key, None)
            if value is not None:
                result.set(key, value)
        for spec in (self.full_reward_spec, self.full_done_spec):
            for key in spec.keys(True, True):
                value = next_td.get(key, None)
                result.set(key, spec[key].zero() if value is None else value)
        return result

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        if tensordict is None or tensordict.get(self.latent_key, None) is None:
            raise RuntimeError(
                f"WorldModelEnv.reset() needs the initial latent under {self.latent_key!r}: "
                "encode a real observation (world_model.encode(obs_td)) and pass it as "
                "env.reset(td) or env.rollout(..., tensordict=td)."
            )
        out = tensordict.copy()
        out.update(self.full_done_spec.zero())
        return out
