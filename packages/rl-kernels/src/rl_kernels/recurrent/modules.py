"""``LSTMModule`` / ``GRUModule``: TensorDict modules over the reset-aware kernels.

They read and write the keys of TorchRL's (and rl_modules') modules of the
same names, hold a plain ``nn.LSTM`` / ``nn.GRU`` (so ``state_dict`` keys
are ``lstm.weight_ih_l0`` ... in either package), and run sequences with
:func:`~rl_kernels.recurrent.lstm_with_resets` / ``gru_with_resets``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey
from torch import nn

from rl_kernels.recurrent._backend import resolve_backend
from rl_kernels.recurrent.functional import gru_with_resets, lstm_with_resets, rnn_weights
from rl_kernels.recurrent.mode import recurrent_mode
from rl_kernels.recurrent.primer import RecurrentStatePrimer, StateSpec

Tensor = torch.Tensor


def _next(key: NestedKey) -> tuple[str, ...]:
    return ("next", key) if isinstance(key, str) else ("next", *key)


def _segment_ends(is_init: Tensor) -> Tensor:
    """``[*B, T, 1]`` bool: the last step of each trajectory (before a reset, or the last step)."""
    ends = torch.ones_like(is_init)
    ends[..., :-1, :] = is_init[..., 1:, :]
    return ends


class _RecurrentModule(TensorDictModuleBase):
    """Keys, modes, primer and step/sequence dispatch shared by the LSTM and GRU modules."""

    _state_names: tuple[str, ...] = ()
    _default_state_keys: tuple[str, ...] = ()
    rnn: nn.LSTM | nn.GRU

    def _setup(
        self,
        rnn: nn.LSTM | nn.GRU,
        in_key: NestedKey | None,
        in_keys: Sequence[NestedKey] | None,
        out_key: NestedKey | None,
        out_keys: Sequence[NestedKey] | None,
        is_init_key: NestedKey,
        default_recurrent_mode: bool | None,
        backend: str,
        check_carried_state: bool,
    ) -> None:
        who = type(self).__name__
        if not rnn.batch_first:
            raise ValueError(f"{who}: batch_first must be True (inputs are [*B, T, F]).")
        if rnn.bidirectional:
            raise ValueError(f"{who}: bidirectional RNNs cannot run step by step; not supported.")
        if getattr(rnn, "proj_size", 0):
            raise ValueError(f"{who}: proj_size is not supported.")
        if backend not in ("auto", "triton", "torch"):
            raise ValueError(
                f"{who}: backend must be 'auto', 'triton' or 'torch', got {backend!r}."
            )
        self.backend = backend
        self.check_carried_state = check_carried_state
        if (in_key is None) == (in_keys is None):
            raise ValueError(f"{who}: pass exactly one of in_key= or in_keys=.")
        in_keys = [in_key, *self._default_state_keys] if in_keys is None else list(in_keys)
        if len(in_keys) != 1 + len(self._state_names):
            raise ValueError(
                f"{who}: in_keys must be [input, {', '.join(self._state_names)} state], got {in_keys}."
            )
        if out_keys is None:
            if out_key is None:
                raise ValueError(f"{who}: pass out_key= or out_keys=.")
            out_keys = [out_key, *(_next(k) for k in in_keys[1:])]
        out_keys = list(out_keys)
        if len(out_keys) != len(in_keys):
            raise ValueError(
                f"{who}: out_keys must be [output, next {', '.join(self._state_names)} state], "
                f"got {out_keys}."
            )
        self.in_keys = [*in_keys, is_init_key]
        self.out_keys = out_keys
        self.input_key, self.state_keys = in_keys[0], in_keys[1:]
        self.output_key, self.next_state_keys = out_keys[0], out_keys[1:]
        self.is_init_key = is_init_key
        self.default_recurrent_mode = bool(default_recurrent_mode)

    @property
    def recurrent_mode(self) -> bool:
        """``True`` (sequences) inside ``set_recurrent_mode(True)``, else ``default_recurrent_mode``."""
        mode = recurrent_mode()
        return self.default_recurrent_mode if mode is None else mode

    def make_tensordict_primer(self) -> RecurrentStatePrimer:
        """``{state key: StateSpec([num_layers, hidden_size])}``, zero at reset, for an env primer."""
        p = self.rnn.weight_hh_l0
        shape = torch.Size([self.rnn.num_layers, self.rnn.hidden_size])
        specs = {k: StateSpec(shape, p.dtype, p.device) for k in self.state_keys}
        return RecurrentStatePrimer(specs, reset_key=self.is_init_key)

    def _states(self, td: TensorDictBase, all_init: bool, why: str, like: Tensor) -> list[Tensor]:
        states = [td.get(k, None) for k in self.state_keys]
        if all(s is not None for s in states):
            return states
        if not all_init:
            present = sorted(map(str, td.keys(True, True)))
            raise RuntimeError(
                f"{type(self).__name__}: no recurrent state {self.state_keys} in the input {why} "
                f"(it holds {present}): every step would silently restart from zeros. Add "
                "env.append_transform(module.make_tensordict_primer()) and an InitTracker "
                f"transform writing {self.is_init_key!r}."
            )
        shape = (*like.shape[:-1], self.rnn.num_layers, self.rnn.hidden_size)
        return [like.new_zeros(shape) for _ in self.state_keys]

    def _input(self, td: TensorDictBase) -> tuple[Tensor, Tensor | None]:
        x = td.get(self.input_key, None)
        if x is None:
            present = sorted(map(str, td.keys(True, True)))
            raise KeyError(
                f"{type(self).__name__}: input key {self.input_key!r} not found (the TensorDict "
                f"holds {present}); pass in_key= naming the entry your data carries."
            )
        if x.shape[-1] != self.rnn.input_size:
            raise ValueError(
                f"{type(self).__name__}: {self.input_key!r} has {x.shape[-1]} features (shape "
                f"{tuple(x.shape)}), the module was built with input_size={self.rnn.input_size}."
            )
        is_init = td.get(self.is_init_key, None)
        if is_init is not None and is_init.dtype != torch.bool:
            raise TypeError(
                f"{type(self).__name__}: {self.is_init_key!r} must be bool, got {is_init.dtype}."
            )
        return x, is_init

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        x, is_init = self._input(tensordict)
        if self.recurrent_mode:
            return self._forward_sequence(tensordict, x, is_init)
        return self._forward_step(tensordict, x, is_init)

    def _forward_step(
        self, td: TensorDictBase, x: Tensor, is_init: Tensor | None
    ) -> TensorDictBase:
        who = type(self).__name__
        batch = x.shape[:-1]
        if is_init is not None and tuple(is_init.shape) != (*batch, 1):
            raise ValueError(
                f"{who}: {self.is_init_key!r} must have shape [*B, 1] = {(*batch, 1)} in step "
                f"mode, got {tuple(is_init.shape)}."
            )
        all_init = is_init is not None and bool(is_init.all())
        why = "and not every env just reset"
        states = self._states(td, all_init, why, x)
        n = batch.numel()
        h0 = [s.reshape(n, *s.shape[-2:]).transpose(0, 1) for s in states]
        if is_init is not None:
            keep = ~is_init.reshape(1, n, 1)
            if self.check_carried_state:
                self._check_not_stale(h0[0], keep)
            h0 = [h * keep for h in h0]
        h0 = [h.contiguous() for h in h0]
        y, hn = self.rnn(x.reshape(n, 1, x.shape[-1]), tuple(h0) if len(h0) > 1 else h0[0])
        hn = hn if isinstance(hn, tuple) else (hn,)
        td.set(self.output_key, y.reshape(*batch, y.shape[-1]))
        for key, h in zip(self.next_state_keys, hn, strict=True):
            td.set(key, h.transpose(0, 1).reshape(*batch, h.shape[0], h.shape[2]))
        return td

    def _check_not_stale(self, h: Tensor, keep: Tensor) -> None:
        # A carried state is never exactly zero after a real step; all zeros where
        # is_init is False means the env dropped ("next", state) and re-primed zeros.
        stale = keep.reshape(-1) & (h == 0).all(0).all(-1)
        if bool(stale.any()):
            raise RuntimeError(
                f"{type(self).__name__}: the state {self.state_keys[0]!r} is exactly zero where "
                f"{self.is_init_key!r} is False ({int(stale.sum())} env(s)): the env did not carry "
                f"the state written to {self.next_state_keys[0]!r}. Fix the env, or pass "
                "check_carried_state=False if zero states are intended."
            )

    def _forward_sequence(
        self, td: TensorDictBase, x: Tensor, is_init: Tensor | None
    ) -> TensorDictBase:
        who = type(self).__name__
        if is_init is None:
            raise KeyError(
                f"{who}: sequence mode needs {self.is_init_key!r} (where trajectories start inside "
                "the [*B, T] batch); add an InitTracker transform to the env."
            )
        if td.batch_dims < 1:
            raise ValueError(
                f"{who}: sequence mode expects a TensorDict of batch shape [*B, T] (time last), "
                f"got {tuple(td.batch_size)}; outside a loss, use step mode."
            )
        first = is_init[..., 0, :]
        why = f"and {self.is_init_key!r} is not True at the first step of every sequence"
        states = self._states(td, bool(first.all()), why, x)
        hx = [s[..., 0, :, :].movedim(-2, 0) for s in states]
        backend = resolve_backend(self.backend, x.device, self.rnn.hidden_size, who)
        y, steps = self._run(x, is_init, hx, backend)
        td.set(self.output_key, y)
        ends = _segment_ends(is_init).unsqueeze(-1)
        for key, s in zip(self.next_state_keys, steps, strict=True):
            td.set(key, s * ends)  # as TorchRL: the state at each trajectory's last step, else 0
        return td

    def _run(
        self, x: Tensor, is_init: Tensor, hx: list[Tensor], backend: str
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        raise NotImplementedError


class LSTMModule(_RecurrentModule):
    """An LSTM reading/writing its states ``h``, ``c`` as TensorDict keys, with resets at ``is_init``.

    Step mode (collectors): the input is ``[*B, F]``, the states
    ``[*B, num_layers, hidden]``, zeroed where ``is_init``; the new ones go
    to ``("next", key)``. Sequence mode (``set_recurrent_mode(True)``,
    losses): the input is ``[*B, T, F]``, the state before step 0 is read at
    ``[..., 0]`` and restarts from zero wherever ``is_init`` is ``True``, so
    the outputs equal the step-by-step loop. ``("next", key)`` holds the
    state at each trajectory's last step and zeros elsewhere (as TorchRL).
    Sequences run on :func:`~rl_kernels.recurrent.lstm_with_resets`
    (Triton on CUDA, a tight torch loop elsewhere).

    Args:
        input_size: input features.
        hidden_size: hidden units.
        num_layers: stacked layers.
        bias: use biases.
        batch_first: must be ``True``.
        dropout: dropout between layers.
        bidirectional: must be ``False``.
        in_key: input key (states default to ``"recurrent_state_h"``, ``"recurrent_state_c"``).
        in_keys: ``[input, h, c]`` instead of ``in_key``.
        out_key: output key (next states go to ``("next", h)``, ``("next", c)``).
        out_keys: ``[output, next h, next c]`` instead of ``out_key``.
        device: where the parameters live.
        lstm: an ``nn.LSTM`` (``batch_first=True``) to wrap instead of building one.
        default_recurrent_mode: the mode outside any ``set_recurrent_mode`` block.
        is_init_key: the trajectory-start flag.
        backend: ``"auto"``, ``"triton"`` or ``"torch"`` for sequence mode.
        check_carried_state: in step mode, raise if a state is exactly zero where
            ``is_init`` is False (the env did not carry it).

    Examples:
        >>> from tensordict import TensorDict
        >>> from rl_kernels import set_recurrent_mode
        >>> lstm = LSTMModule(input_size=3, hidden_size=8, in_key="obs", out_key="features")
        >>> seq = TensorDict(obs=torch.randn(4, 10, 3), is_init=torch.ones(4, 10, 1, dtype=torch.bool),
        ...                  batch_size=[4, 10])
        >>> with set_recurrent_mode(True):
        ...     lstm(seq)["features"].shape
        torch.Size([4, 10, 8])
    """

    _state_names = ("h", "c")
    _default_state_keys = ("recurrent_state_h", "recurrent_state_c")

    def __init__(
        self,
        input_size: int | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        in_key: NestedKey | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        device: torch.device | str | None = None,
        lstm: nn.LSTM | None = None,
        default_recurrent_mode: bool | None = None,
        is_init_key: NestedKey = "is_init",
        backend: str = "auto",
        check_carried_state: bool = True,
    ) -> None:
        super().__init__()
        if lstm is None:
            if input_size is None or hidden_size is None:
                raise ValueError("LSTMModule: pass input_size and hidden_size, or lstm=.")
            lstm = nn.LSTM(
                input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                device=device,
            )  # fmt: skip
        self.lstm = lstm
        self._setup(
            lstm, in_key, in_keys, out_key, out_keys, is_init_key, default_recurrent_mode,
            backend, check_carried_state,
        )  # fmt: skip

    @property
    def rnn(self) -> nn.LSTM:  # type: ignore[override]
        return self.lstm

    def _run(
        self, x: Tensor, is_init: Tensor, hx: list[Tensor], backend: str
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        y, (h, c) = lstm_with_resets(
            x, is_init, rnn_weights(self.lstm), (hx[0], hx[1]), dropout=self.lstm.dropout,
            training=self.training, backend=backend,
        )  # fmt: skip
        return y, (h, c)


class GRUModule(_RecurrentModule):
    """A GRU reading/writing its state ``h`` as a TensorDict key, with resets at ``is_init``.

    Same semantics as :class:`LSTMModule` with one state (``"recurrent_state"``).

    Args:
        input_size: input features.
        hidden_size: hidden units.
        num_layers: stacked layers.
        bias: use biases.
        batch_first: must be ``True``.
        dropout: dropout between layers.
        bidirectional: must be ``False``.
        in_key: input key (the state defaults to ``"recurrent_state"``).
        in_keys: ``[input, h]`` instead of ``in_key``.
        out_key: output key (the next state goes to ``("next", h)``).
        out_keys: ``[output, next h]`` instead of ``out_key``.
        device: where the parameters live.
        gru: an ``nn.GRU`` (``batch_first=True``) to wrap instead of building one.
        default_recurrent_mode: the mode outside any ``set_recurrent_mode`` block.
        is_init_key: the trajectory-start flag.
        backend: ``"auto"``, ``"triton"`` or ``"torch"`` for sequence mode.
        check_carried_state: in step mode, raise if the state is exactly zero where
            ``is_init`` is False.

    Examples:
        >>> from tensordict import TensorDict
        >>> gru = GRUModule(input_size=3, hidden_size=8, in_key="obs", out_key="features")
        >>> td = TensorDict(obs=torch.zeros(4, 3), is_init=torch.ones(4, 1, dtype=torch.bool), batch_size=[4])
        >>> gru(td)["next", "recurrent_state"].shape
        torch.Size([4, 1, 8])
    """

    _state_names = ("h",)
    _default_state_keys = ("recurrent_state",)

    def __init__(
        self,
        input_size: int | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        in_key: NestedKey | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        device: torch.device | str | None = None,
        gru: nn.GRU | None = None,
        default_recurrent_mode: bool | None = None,
        is_init_key: NestedKey = "is_init",
        backend: str = "auto",
        check_carried_state: bool = True,
    ) -> None:
        super().__init__()
        if gru is None:
            if input_size is None or hidden_size is None:
                raise ValueError("GRUModule: pass input_size and hidden_size, or gru=.")
            gru = nn.GRU(
                input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                device=device,
            )  # fmt: skip
        self.gru = gru
        self._setup(
            gru, in_key, in_keys, out_key, out_keys, is_init_key, default_recurrent_mode,
            backend, check_carried_state,
        )  # fmt: skip

    @property
    def rnn(self) -> nn.GRU:  # type: ignore[override]
        return self.gru

    def _run(
        self, x: Tensor, is_init: Tensor, hx: list[Tensor], backend: str
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        y, h = gru_with_resets(
            x, is_init, rnn_weights(self.gru), hx[0], dropout=self.gru.dropout,
            training=self.training, backend=backend,
        )  # fmt: skip
        return y, (h,)
